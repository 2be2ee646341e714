package server

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// specPatterns are the distinct pattern regexps of the fast checks of the request bodies of ops
// (every operation when ops is nil).
func specPatterns(t testing.TB, ops map[string]bool) []*regexp.Regexp {
	seen := map[string]*regexp.Regexp{}
	var walk func(f *fastSchema)
	walk = func(f *fastSchema) {
		if f == nil {
			return
		}
		if f.pattern != nil {
			seen[f.pattern.String()] = f.pattern
		}
		for _, p := range f.props {
			walk(p.schema)
		}
		for _, a := range f.allOf {
			walk(a)
		}
		walk(f.items)
		walk(f.additional)
	}
	for op, b := range fastValidator(t).bodies {
		if ops == nil || ops[op] {
			walk(b.fastSchema)
		}
	}
	var out []*regexp.Regexp
	for _, re := range seen {
		out = append(out, re)
	}
	return out
}

// TestPatternMatcherLiteral: the permission pattern's automaton and a few patterns of other
// shapes (unanchored, alternations, classes, repetition counts, case folding, ., $ alone) on
// literal strings, each answer written out.
func TestPatternMatcherLiteral(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{`^(\*|[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*)$`,
			[]string{"*", "a:b", "document:read", "a-1:b_2", "x0:y-"},
			[]string{"", "**", "*a", "a", "a:", ":b", "A:b", "a:B", "a:b:c", "1a:b", "a:b\n", " a:b", "a:b ", "a:é"}},
		{`[0-9]{3}`, []string{"123", "a1234", "x999y"}, []string{"", "12", "1a2b3"}},
		{`^ab|cd$`, []string{"ab", "abx", "cd", "xcd"}, []string{"", "xab", "cdx", "acbd"}},
		{`(?i)^api_[a-z]+$`, []string{"api_call", "API_Call", "Api_x"}, []string{"api_", "api_1", "xapi_call"}},
		{`^a.c$`, []string{"abc", "a-c", "a c"}, []string{"ac", "a\nc", "abbc"}},
		{`x$`, []string{"x", "abx"}, []string{"", "xa"}},
		{`^$`, []string{""}, []string{"a", "\n"}},
		{`a*`, []string{"", "b", "aaa"}, nil},
	} {
		re := regexp.MustCompile(tc.pattern)
		m := newPatternMatcher(re)
		if m == nil {
			t.Errorf("%s: no automaton", tc.pattern)
			continue
		}
		for want, list := range map[bool][]string{true: tc.yes, false: tc.no} {
			for _, s := range list {
				if got := m.MatchString(s); got != want {
					t.Errorf("%s on %q: MatchString %v, want %v", tc.pattern, s, got, want)
				}
				if got := m.Match([]byte(s)); got != want {
					t.Errorf("%s on %q: Match %v, want %v", tc.pattern, s, got, want)
				}
			}
		}
	}
	for _, p := range []string{`\bword\b`, `(?m)^a$`, `a\B`} {
		if newPatternMatcher(regexp.MustCompile(p)) != nil {
			t.Errorf("%s: has an automaton, want none (its assertion is not reproduced)", p)
		}
	}
}

// TestPatternMatcherAgrees: for every pattern of the spec that has an automaton (those of the
// decision bodies must: the others may have too many states, such as a class repeated up to 255
// times) and a few others, the automaton answers what the regexp answers, over strings built
// from the pattern's own characters and random ASCII and non-ASCII bytes.
func TestPatternMatcherAgrees(t *testing.T) {
	hot := specPatterns(t, typedBodies)
	if len(hot) == 0 {
		t.Fatal("no pattern in the decision bodies")
	}
	for _, re := range hot {
		if newPatternMatcher(re) == nil {
			t.Errorf("%s: a decision body's pattern has no automaton", re)
		}
	}
	patterns := specPatterns(t, nil)
	for _, p := range []string{`[0-9]{3}`, `^ab|cd$`, `(?i)^api_[a-z]+$`, `^a.c$`, `(?s)a.c`, `x$`, `^$`, `a*b+`, `^[^:]+:[^:]+$`} {
		patterns = append(patterns, regexp.MustCompile(p))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, re := range patterns {
		m := newPatternMatcher(re)
		if m == nil {
			t.Logf("%s: no automaton", re)
			continue
		}
		alphabet := []byte(strings.ReplaceAll(re.String(), "\\", "") + "aZ09:_-*.\n é")
		matched := 0
		for k := range 20000 {
			b := make([]byte, rng.IntN(24))
			for i := range b {
				if rng.IntN(10) == 0 {
					b[i] = byte(rng.IntN(256))
				} else {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			}
			if k%2 == 0 {
				// A string that matches some pattern, with up to two bytes changed.
				b = []byte(nearMatches[rng.IntN(len(nearMatches))])
				for range rng.IntN(3) {
					if len(b) > 0 {
						b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
					}
				}
			}
			want := re.Match(b)
			if want {
				matched++
			}
			if got := m.Match(b); got != want {
				t.Fatalf("%s on %q: Match %v, regexp %v", re, b, got, want)
			}
			if got := m.MatchString(string(b)); got != want {
				t.Fatalf("%s on %q: MatchString %v, regexp %v", re, b, got, want)
			}
		}
		t.Logf("%s: %d of 20000 strings matched", re, matched)
	}
}

// nearMatches are strings that match patterns of TestPatternMatcherAgrees, to change a little.
var nearMatches = []string{"document:read", "a-b_c:d-e", "*", "my-project-2", "api_Call", "abc", "a\nc", "cd", "xx",
	"aab", "k:v", "123", "sk_test_abcdefgh", "whsec_abc+/=12", "Key.1:x", "a@b|c=d"}

// BenchmarkPatternMatcher: the permission pattern on a permission, by the automaton and by the
// regexp.
func BenchmarkPatternMatcher(b *testing.B) {
	re := regexp.MustCompile(`^(\*|[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*)$`)
	m := newPatternMatcher(re)
	for name, match := range map[string]func(string) bool{"automaton": m.MatchString, "regexp": re.MatchString} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !match("resource7:action9") {
					b.Fatal("no match")
				}
			}
		})
	}
}
