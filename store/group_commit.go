package store

import (
	"runtime"
	"sync"
)

// groupQueue is what the Store's two group-commit queues share (usage events, usage_batch.go;
// OAuth token rows, oauth_tokens_queue.go): the items waiting for the next shared transaction,
// the flusher goroutine that records them, and its start and stop. What a flush takes and how it
// records it is each queue's own.
type groupQueue[T any] struct {
	once sync.Once
	// wake tells the flusher that items are queued (buffered, one); stop asks it to record what
	// is queued and return, which it reports by closing stopped.
	wake, stop, stopped chan struct{}
	// mu guards pending and closed; a flush takes its items from pending under it.
	mu      sync.Mutex
	pending []T
	closed  bool
}

// start runs init, then flush in the flusher, the first time it is called; later calls do
// nothing.
func (q *groupQueue[T]) start(init func(), flush func()) {
	q.once.Do(func() {
		q.wake, q.stop, q.stopped = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		if init != nil {
			init()
		}
		go q.flushLoop(flush)
	})
}

// add queues item and wakes the flusher; it is false, item not queued, once the queue is
// closed.
func (q *groupQueue[T]) add(item T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, item)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // the flusher is already told
	}
	return true
}

// flushLoop is the flusher: it calls flush, which records queued items until the queue is
// empty, each time it is woken, and once more at stop before it returns.
func (q *groupQueue[T]) flushLoop(flush func()) {
	defer close(q.stopped)
	for {
		select {
		case <-q.wake:
		case <-q.stop:
			flush()
			return
		}
		// Let the requests already running reach the queue first. On one core
		// (GOMAXPROCS=1) the flusher woken by the first item otherwise ran at once and, on
		// SQLite (in process: it keeps the core while it writes), recorded that item nearly
		// alone: pinned single new events went from about 2,000/s to 6,900/s, ES256 tokens from
		// about 2,300/s to 3,400/s (docs/benchmarks.md).
		runtime.Gosched()
		flush()
	}
}

// close refuses new items, waits for the flusher to record the queued ones and stops it. It is
// part of Store.Close, and does nothing the second time. The queue must have been started.
func (q *groupQueue[T]) close() {
	q.mu.Lock()
	already := q.closed
	q.closed = true
	q.mu.Unlock()
	if !already {
		close(q.stop)
	}
	<-q.stopped
}
