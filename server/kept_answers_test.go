package server

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestKeptAnswersGenerations follows keptAnswers through its generations, with generations of two
// answers and a ttl of ten minutes on a clock the test moves: which questions are found after each
// step is written out.
func TestKeptAnswersGenerations(t *testing.T) {
	q := func(n int) authorizeQuestion {
		return authorizeQuestion{"prj_1", store.PrincipalUser, fmt.Sprintf("u%d", n), "doc:read"}
	}
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := start
	k := newKeptAnswers(2, 10*time.Minute)
	k.clock = func() time.Time { return now }
	k.started = start
	put := func(ns ...int) {
		k.putAll(len(ns), func(i int) authorizeQuestion { return q(ns[i]) },
			func(i int) keptAnswer { return keptAnswer{epoch: store.Epoch(ns[i])} })
	}
	// found looks the questions 1 to 6 up, as a batch does, and lists those found; each found
	// answer must be the one kept for it.
	found := func() []int {
		var got []int
		k.getAll(6, func(i int) authorizeQuestion { return q(i + 1) }, func(i int, a keptAnswer) {
			if a.epoch != store.Epoch(i+1) {
				t.Errorf("question %d: got the answer kept for %d", i+1, a.epoch)
			}
			got = append(got, i+1)
		})
		return got
	}
	step := func(name string, want ...int) {
		t.Helper()
		if got := found(); !slices.Equal(got, want) {
			t.Errorf("%s: found %v, want %v", name, got, want)
		}
	}

	put(1, 2)
	step("two kept", 1, 2)
	put(3) // the current generation {1, 2} is full: it becomes the previous one; current {3}
	step("a third kept", 1, 2, 3)
	// That lookup found 1 and 2 in the previous generation and moved them: 1 into the current one
	// ({3, 1}, full), 2 after a rotation (previous {3, 1}, current {2}).
	put(4) // current {2, 4}
	step("a fourth kept: four answers asked each time, all held", 1, 2, 3, 4)

	// Unasked answers go: keep 5 and 6, then ask only 5 and 6 for a while.
	k = newKeptAnswers(2, 10*time.Minute)
	k.clock = func() time.Time { return now }
	k.started = now
	put(1, 2)
	put(5, 6) // rotates: previous 1, 2; current 5, 6
	ask := func(ns ...int) {
		k.getAll(len(ns), func(i int) authorizeQuestion { return q(ns[i]) }, func(int, keptAnswer) {})
	}
	ask(5, 6)
	put(3) // current 5, 6 full: rotates, dropping 1 and 2
	step("1 and 2 not asked for two generations", 3, 5, 6)

	// Time: a generation is current for half the ttl.
	now = start
	k = newKeptAnswers(100, 10*time.Minute)
	k.clock = func() time.Time { return now }
	k.started = now
	put(1, 2)
	now = now.Add(4 * time.Minute)
	ask(1)
	now = now.Add(2 * time.Minute) // 6 minutes: the lookup rotates first, 1 and 2 still found
	step("six minutes", 1, 2)      // and moved back into the current generation
	now = now.Add(4 * time.Minute) // 10 minutes: not rotated since the lookup at 6
	put(3)
	now = now.Add(2 * time.Minute) // 12: rotates; 1, 2 (asked at 6) and 3 in the previous one
	step("twelve minutes", 1, 2, 3)
	now = now.Add(20 * time.Minute) // 32: twenty minutes unasked, both generations dropped
	step("twenty minutes later")
	put(1)                                        // current {1} from 32
	now = now.Add(5*time.Minute + 30*time.Second) // 37:30
	put(2)                                        // rotates: previous {1}, current {2} from 37:30
	now = now.Add(5*time.Minute + 30*time.Second) // 43: rotates before looking up; 1 dropped
	step("1 unasked for eleven minutes", 2)
}

// TestKeptAnswersBound keeps many more answers than two generations hold and requires at most
// twice the size to be held, and the most recent ones found.
func TestKeptAnswersBound(t *testing.T) {
	k := newKeptAnswers(100, time.Hour)
	for n := range 1000 {
		k.put(authorizeQuestion{"prj_1", store.PrincipalUser, fmt.Sprint(n), "doc:read"}, keptAnswer{epoch: store.Epoch(n)})
	}
	if held := len(k.cur) + len(k.prev); held > 200 {
		t.Errorf("%d answers held, want at most 200", held)
	}
	// The last 200 kept, looked up together (as one batch: found before any is moved).
	q := func(i int) authorizeQuestion {
		return authorizeQuestion{"prj_1", store.PrincipalUser, fmt.Sprint(800 + i), "doc:read"}
	}
	found := 0
	k.getAll(200, q, func(i int, a keptAnswer) {
		if a.epoch != store.Epoch(800+i) {
			t.Errorf("answer %d: got the one kept for %d", 800+i, a.epoch)
		}
		found++
	})
	if found != 200 {
		t.Errorf("%d of the last 200 answers found, want 200", found)
	}
	if _, ok := k.get(authorizeQuestion{"prj_1", store.PrincipalUser, "799", "doc:read"}); ok {
		t.Error("answer 799 is still held; only the last 200 should be")
	}
}

// TestKeptAnswersKeys requires questions whose strings join to the same text to be told apart.
func TestKeptAnswersKeys(t *testing.T) {
	k := newKeptAnswers(100, time.Hour)
	k.put(authorizeQuestion{"prj_1", "user", "ab", "c:read"}, keptAnswer{epoch: 1})
	for _, q := range []authorizeQuestion{
		{"prj_1", "user", "a", "bc:read"},
		{"prj_1", "usera", "b", "c:read"},
		{"prj_1user", "", "ab", "c:read"},
	} {
		if a, ok := k.get(q); ok {
			t.Errorf("%+v: found the answer kept for another question (epoch %d)", q, a.epoch)
		}
	}
	if _, ok := k.get(authorizeQuestion{"prj_1", "user", "ab", "c:read"}); !ok {
		t.Error("the answer kept is not found")
	}
}

// TestKeptAnswersHoldNoRequestText keeps an answer to a question whose strings are parts of a
// large text, as a request body's are, and requires the text to be collected afterwards: a kept
// answer must not hold the body that asked it.
func TestKeptAnswersHoldNoRequestText(t *testing.T) {
	k := newKeptAnswers(100, time.Hour)
	collected := make(chan struct{})
	func() {
		body := strings.Repeat(`{"principalType":"user","principalId":"alice","permission":"doc:read"}`, 1000)
		runtime.AddCleanup(unsafe.StringData(body), func(chan struct{}) { close(collected) }, collected)
		q := authorizeQuestion{"prj_1", body[18:22], body[39:44], body[60:68]}
		if q.PrincipalType != "user" || q.PrincipalID != "alice" || q.Permission != "doc:read" {
			t.Fatalf("the fixture's slices are wrong: %+v", q)
		}
		k.put(q, keptAnswer{epoch: 1})
	}()
	for range 10 {
		runtime.GC()
		select {
		case <-collected:
			if _, ok := k.get(authorizeQuestion{"prj_1", "user", "alice", "doc:read"}); !ok {
				t.Error("the answer kept is not found")
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Error("the request text is still held after the answer was kept")
}

// TestKeptAnswersConcurrent looks up and keeps answers from several goroutines at once, in
// generations small enough to rotate all the time, and requires every answer found to be the one
// kept for its question (run it with -race too).
func TestKeptAnswersConcurrent(t *testing.T) {
	k := newKeptAnswers(50, time.Hour)
	q := func(n int) authorizeQuestion {
		return authorizeQuestion{"prj_1", store.PrincipalUser, fmt.Sprint(n), "doc:read"}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				base := (g*31 + i*7) % 200
				k.putAll(5, func(j int) authorizeQuestion { return q(base + j) },
					func(j int) keptAnswer { return keptAnswer{epoch: store.Epoch(base + j)} })
				k.getAll(20, func(j int) authorizeQuestion { return q((base + j*3) % 200) }, func(j int, a keptAnswer) {
					if want := store.Epoch((base + j*3) % 200); a.epoch != want {
						t.Errorf("question %d: found the answer kept for %d", want, a.epoch)
					}
				})
			}
		}()
	}
	wg.Wait()
	if held := len(k.cur) + len(k.prev); held > 100 {
		t.Errorf("%d answers held, want at most 100", held)
	}
}
