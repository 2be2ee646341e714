package server

import (
	"encoding/binary"
	"sync"
	"time"
)

// keptAnswers holds the decisions kept between requests (decision_cache.go), by question, each
// with the epoch it was read at, in two generations. An answer is kept into the current
// generation; an answer found in the previous one is moved into the current one. When the
// current generation holds size answers, or a lookup or a write finds it current for half of
// ttl, it becomes the previous one and the previous one is dropped (both are, when it has been
// current for ttl). So at most twice size answers are held, the least recently asked are the ones
// dropped, and an answer is gone at most one and a half ttl after it was last asked. That is what
// golang-lru's expirable LRU (which keeps the API keys) gave, approximately, except that the LRU
// forgot an answer ttl after it was read even while it was asked.
//
// Written by hand because a batch asks up to 100 questions at once: the LRU's Get takes its
// lock, reads the clock and moves the entry in its list for each question, about 0.5 µs a
// question in a pinned profile of a SQLite batch (a sixth of the batch's CPU), where getAll
// takes the lock and reads the clock once for all of them (docs/benchmarks.md, "Kept answers
// looked up together").
//
// An answer is kept under its question's key (appendQuestionKey), a string of its own: the
// question's strings are substrings of the request body that asked it, and keeping them would
// keep that whole body (about 10 kB for a batch of 100) for as long as any of its answers is
// kept.
type keptAnswers struct {
	size int
	ttl  time.Duration
	// clock is time.Now, but for tests; it times the generations only, never a decision.
	clock func() time.Time

	mu        sync.RWMutex
	cur, prev map[string]keptAnswer // by appendQuestionKey
	started   time.Time             // when cur became the current generation
}

// newKeptAnswers makes an empty keptAnswers of generations of size answers, each current at most
// ttl/2.
func newKeptAnswers(size int, ttl time.Duration) *keptAnswers {
	return &keptAnswers{size: size, ttl: ttl, clock: time.Now, cur: map[string]keptAnswer{}, started: time.Now()}
}

// get returns the answer kept for q, if any, whatever its epoch.
func (k *keptAnswers) get(q authorizeQuestion) (keptAnswer, bool) {
	var a keptAnswer
	var ok bool
	k.getAll(1, func(int) authorizeQuestion { return q }, func(_ int, found keptAnswer) { a, ok = found, true })
	return a, ok
}

// getAll looks up the n questions question(0) … question(n-1), calling found(i, answer) for each
// one kept, in order, under one read lock (found must not call k). The answers found only in the
// previous generation are then moved into the current one, under one write lock.
func (k *keptAnswers) getAll(n int, question func(int) authorizeQuestion, found func(int, keptAnswer)) {
	now := k.clock()
	var key [256]byte // most questions' keys fit: then looking them up allocates nothing
	var older []string
	var olderAnswers []keptAnswer
	k.mu.RLock()
	if now.Sub(k.started) >= k.ttl/2 {
		k.mu.RUnlock()
		k.mu.Lock()
		k.rotateIfDue(now)
		k.mu.Unlock()
		k.mu.RLock()
	}
	for i := range n {
		b := appendQuestionKey(key[:0], question(i))
		if a, ok := k.cur[string(b)]; ok {
			found(i, a)
			continue
		}
		if a, ok := k.prev[string(b)]; ok {
			found(i, a)
			older = append(older, string(b))
			olderAnswers = append(olderAnswers, a)
		}
	}
	k.mu.RUnlock()
	if len(older) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for j, q := range older {
		if _, ok := k.cur[q]; !ok { // a newer answer kept meanwhile stays
			k.putLocked(q, olderAnswers[j], now)
		}
	}
}

// putAll keeps answer(i) for question(i), i from 0 to n-1, under one write lock.
func (k *keptAnswers) putAll(n int, question func(int) authorizeQuestion, answer func(int) keptAnswer) {
	now := k.clock()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rotateIfDue(now)
	for i := range n {
		k.putLocked(string(appendQuestionKey(nil, question(i))), answer(i), now)
	}
}

// put keeps a for q.
func (k *keptAnswers) put(q authorizeQuestion, a keptAnswer) {
	k.putAll(1, func(int) authorizeQuestion { return q }, func(int) keptAnswer { return a })
}

// putLocked keeps a under key in the current generation, first making it the previous one when
// it is full. k.mu is held for writing.
func (k *keptAnswers) putLocked(key string, a keptAnswer, now time.Time) {
	if _, ok := k.cur[key]; !ok && len(k.cur) >= k.size {
		k.rotate(now)
	}
	k.cur[key] = a
}

// rotateIfDue rotates the generations when the current one has been current for half of ttl,
// and drops both when for ttl. k.mu is held for writing.
func (k *keptAnswers) rotateIfDue(now time.Time) {
	switch age := now.Sub(k.started); {
	case age >= k.ttl:
		k.prev, k.cur, k.started = nil, map[string]keptAnswer{}, now
	case age >= k.ttl/2:
		k.rotate(now)
	}
}

// rotate makes the current generation the previous one, dropping the previous one, and starts
// an empty current one at now. k.mu is held for writing.
func (k *keptAnswers) rotate(now time.Time) {
	k.prev, k.cur, k.started = k.cur, make(map[string]keptAnswer, len(k.cur)), now
}

// appendQuestionKey appends q's key: each of its four strings after its length (a uvarint), so
// that no two questions share a key.
func appendQuestionKey(b []byte, q authorizeQuestion) []byte {
	for _, s := range [...]string{q.ProjectID, q.PrincipalType, q.PrincipalID, q.Permission} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}
