package haload

import (
	"testing"
	"time"
)

// TestUnavailability: the window runs from the start of the first failure to the end of the
// first success after the last failure; 4xx answers are not failures.
func TestUnavailability(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(from, to int) (time.Time, time.Time) {
		return t0.Add(time.Duration(from) * time.Millisecond), t0.Add(time.Duration(to) * time.Millisecond)
	}
	var l Ledger
	add := func(status, from, to int) {
		s, e := at(from, to)
		l.Outcomes = append(l.Outcomes, Outcome{Status: status, Start: s, End: e})
	}
	add(201, 0, 10)
	add(503, 100, 120)  // first failure starts at 100
	add(200, 130, 140)  // a success between failures does not end the window
	add(0, 150, 900)    // no answer: a failure, the last to end (900)
	add(429, 200, 210)  // a 4xx is an answer
	add(503, 300, 400)  // ends before the last failure
	add(200, 850, 950)  // the first success ending after 900
	add(200, 910, 1000) // later
	w := l.Unavailability()
	if w.Failed != 3 || w.Total != 8 {
		t.Errorf("Failed, Total = %d, %d; want 3, 8", w.Failed, w.Total)
	}
	if w.Duration() != 850*time.Millisecond {
		t.Errorf("window %v (%v to %v), want 850ms (100 ms to 950 ms)", w.Duration(), w.FirstFailure, w.Recovered)
	}
	var none Ledger
	none.Outcomes = []Outcome{{Status: 200, Start: t0, End: t0}}
	if w := none.Unavailability(); w.Failed != 0 || w.Duration() != 0 {
		t.Errorf("no failures: %+v, want an empty window", w)
	}
}
