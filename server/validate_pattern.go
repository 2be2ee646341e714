package server

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A pattern matcher is a schema's pattern regexp compiled, at start-up, into a deterministic
// automaton over ASCII bytes: one table lookup per byte of the string. Go's regexp runs its
// one-pass or backtracking matcher per call (about a microsecond for a 20-byte permission here,
// 100 of them in an authorization batch, a twelfth of the batch's CPU). Go's regexp package has
// no DFA, and the patterns of the spec are small, anchored and ASCII, which is all this
// reproduces: a pattern with any other empty-width assertion than ^ or $ at the text's ends, or
// whose automaton would exceed maxPatternStates, gets no matcher; a string with a byte of 128 or
// more is left to the regexp itself. Matches mean what regexp.MatchString means: somewhere in the
// string, unless anchored.

// maxPatternStates bounds a pattern matcher's states (each a 128-entry row).
const maxPatternStates = 64

// patternMatcher answers re.MatchString for ASCII strings with its automaton.
type patternMatcher struct {
	re *regexp.Regexp
	// next[s][b] is the state after byte b in state s; -1: no match can follow, whatever comes.
	next [][128]int16
	// matchNow[s]: a match has been found (the rest of the string does not matter);
	// matchAtEnd[s]: the string matches if it ends here.
	matchNow, matchAtEnd []bool
}

// MatchString reports whether s holds a match of the pattern, as re.MatchString does.
func (m *patternMatcher) MatchString(s string) bool {
	state := 0
	for i := 0; i < len(s); i++ {
		if m.matchNow[state] {
			return true
		}
		c := s[i]
		if c >= 128 {
			return m.re.MatchString(s)
		}
		if state = int(m.next[state][c]); state < 0 {
			return false
		}
	}
	return m.matchNow[state] || m.matchAtEnd[state]
}

// Match is MatchString for bytes.
func (m *patternMatcher) Match(b []byte) bool {
	state := 0
	for _, c := range b {
		if m.matchNow[state] {
			return true
		}
		if c >= 128 {
			return m.re.Match(b)
		}
		if state = int(m.next[state][c]); state < 0 {
			return false
		}
	}
	return m.matchNow[state] || m.matchAtEnd[state]
}

// patternMatchers holds the matcher (or nil) of each pattern met, by its source: each is built
// once per process, however many servers (tests start hundreds) compile the spec.
var patternMatchers sync.Map

// newPatternMatcher returns re's patternMatcher, or nil when it has anything that is not
// reproduced here or more than maxPatternStates states.
func newPatternMatcher(re *regexp.Regexp) *patternMatcher {
	if m, ok := patternMatchers.Load(re.String()); ok {
		return m.(*patternMatcher)
	}
	m := buildPatternMatcher(re)
	patternMatchers.Store(re.String(), m)
	return m
}

// buildPatternMatcher is newPatternMatcher without the cache.
func buildPatternMatcher(re *regexp.Regexp) *patternMatcher {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil
	}
	for _, inst := range prog.Inst {
		switch inst.Op {
		case syntax.InstEmptyWidth:
			// One assertion an instruction: ^ or $, not both, nothing else.
			if op := syntax.EmptyOp(inst.Arg); op != syntax.EmptyBeginText && op != syntax.EmptyEndText {
				return nil
			}
		case syntax.InstAlt, syntax.InstAltMatch, syntax.InstCapture, syntax.InstNop, syntax.InstMatch, syntax.InstFail,
			syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		default:
			return nil
		}
	}
	b := dfaBuilder{prog: prog, index: map[string]int{}}
	m := &patternMatcher{re: re}
	// A state is the set of instructions waiting for the next byte (a thread at the pattern's
	// start is added at every position: the match may begin anywhere), closed over the empty
	// transitions the position allows: ^ only before the first byte, $ only after the last.
	start := b.closure([]uint32{uint32(prog.Start)}, true)
	queue := []int{b.state(start)}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if len(b.states) > maxPatternStates {
			return nil
		}
		for len(m.next) <= s {
			m.next = append(m.next, [128]int16{})
			m.matchNow, m.matchAtEnd = append(m.matchNow, false), append(m.matchAtEnd, false)
		}
		pcs := b.states[s]
		m.matchNow[s] = slices.ContainsFunc(pcs, func(pc uint32) bool { return prog.Inst[pc].Op == syntax.InstMatch })
		m.matchAtEnd[s] = b.matchesAtEnd(pcs)
		for c := range 128 {
			var out []uint32
			for _, pc := range pcs {
				if matchesByte(&prog.Inst[pc], byte(c)) {
					out = append(out, prog.Inst[pc].Out)
				}
			}
			// Past the first byte ^ never holds: a pattern anchored there adds no thread at its
			// start, and a state with no thread can match nothing, whatever follows.
			out = b.closure(append(out, uint32(prog.Start)), false)
			if len(out) == 0 {
				m.next[s][c] = -1
				continue
			}
			n, added := b.stateOf(out)
			m.next[s][c] = int16(n)
			if added {
				queue = append(queue, n)
			}
		}
	}
	if len(b.states) > maxPatternStates {
		return nil
	}
	return m
}

// matchesByte reports whether the instruction consumes the ASCII byte c. (Inst.MatchRune reads
// the instruction's rune list, which the "any" instructions do not have.)
func matchesByte(inst *syntax.Inst, c byte) bool {
	switch inst.Op {
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return c != '\n'
	case syntax.InstRune, syntax.InstRune1:
		return inst.MatchRune(rune(c))
	}
	return false
}

// dfaBuilder numbers the instruction sets met while building a patternMatcher.
type dfaBuilder struct {
	prog   *syntax.Prog
	states [][]uint32
	index  map[string]int
}

// closure is the sorted set of the instructions reachable from pcs by empty transitions
// (alternations, captures, no-ops, and ^ when atBegin), keeping those that wait for a byte, a $
// (for matchesAtEnd) or are a match.
func (b *dfaBuilder) closure(pcs []uint32, atBegin bool) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	var visit func(pc uint32)
	visit = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		inst := &b.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			visit(inst.Out)
			visit(inst.Arg)
		case syntax.InstCapture, syntax.InstNop:
			visit(inst.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(inst.Arg)&syntax.EmptyBeginText != 0 && !atBegin {
				return
			}
			if syntax.EmptyOp(inst.Arg)&syntax.EmptyEndText != 0 {
				out = append(out, pc) // decided at the end of the string
				return
			}
			visit(inst.Out)
		case syntax.InstFail:
		default:
			out = append(out, pc)
		}
	}
	for _, pc := range pcs {
		visit(pc)
	}
	slices.Sort(out)
	return out
}

// matchesAtEnd reports whether a string ending in the state pcs matches: a match is reachable
// through $ assertions (and empty transitions) alone.
func (b *dfaBuilder) matchesAtEnd(pcs []uint32) bool {
	seen := map[uint32]bool{}
	var reach func(pc uint32) bool
	reach = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		inst := &b.prog.Inst[pc]
		switch inst.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return reach(inst.Out) || reach(inst.Arg)
		case syntax.InstCapture, syntax.InstNop:
			return reach(inst.Out)
		case syntax.InstEmptyWidth:
			// ^ cannot hold after a byte; at the start, closure has already passed it.
			return syntax.EmptyOp(inst.Arg)&syntax.EmptyBeginText == 0 && reach(inst.Out)
		}
		return false
	}
	return slices.ContainsFunc(pcs, reach)
}

// state numbers pcs, adding it when new.
func (b *dfaBuilder) state(pcs []uint32) int {
	n, _ := b.stateOf(pcs)
	return n
}

func (b *dfaBuilder) stateOf(pcs []uint32) (int, bool) {
	var key strings.Builder
	for _, pc := range pcs {
		key.WriteString(strconv.FormatUint(uint64(pc), 10))
		key.WriteByte(',')
	}
	if n, ok := b.index[key.String()]; ok {
		return n, false
	}
	b.states = append(b.states, pcs)
	b.index[key.String()] = len(b.states) - 1
	return len(b.states) - 1, true
}
