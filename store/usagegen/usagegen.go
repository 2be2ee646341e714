// Package usagegen writes synthetic usage events through the real store, so every rollup is
// maintained exactly as on ingest, for `gatehouse dev seed-usage`, the benchmarks and load
// tests: on PostgreSQL with store.BulkIngestUsage (COPY, chunks of 25,000 events, Workers
// chunks at once), on SQLite with store.IngestUsage in
// batches of store.MaxUsageBatch.
package usagegen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Spec describes a data set: Events events over Subjects subjects and the Days days ending at
// End, in the project's Environments (each subject uses one, chosen by its number).
type Spec struct {
	ProjectID    string
	Environments []string
	Events       int
	Subjects     int
	Days         int
	// End is the newest timestamp (default: now); events spread evenly over the Days before it.
	End time.Time
	// Prefix starts every eventId (default "seed"), so that two runs do not collide.
	Prefix string
	// Workers is how many batches (SQLite) or COPY chunks (PostgreSQL) are in flight at once
	// (default 1).
	Workers int
	// Progress, when set, is called after each batch with the events written so far.
	Progress func(done int)
}

// subjectStep scatters subjects over event numbers (Spec.Event); a prime, so that it has an
// inverse modulo almost every subject count (subjectChunks).
const subjectStep = 7919

// meters and their shares: 8 in 10 events are api_call.
var meters = []string{"api_call", "api_call", "api_call", "api_call", "api_call", "api_call", "api_call", "api_call", "storage_gb", "seats"}

// Event returns the i-th event of spec: subject i mod Subjects (scattered by a multiplicative
// step so that neighbouring events are different subjects), a day spread over Days, a meter.
func (spec Spec) Event(i int) store.UsageEvent {
	subject := (i * subjectStep) % spec.Subjects
	offset := time.Duration(i%(spec.Days*24*60)) * time.Minute
	return store.UsageEvent{
		ProjectID:     spec.ProjectID,
		EnvironmentID: spec.Environments[subject%len(spec.Environments)],
		EventID:       fmt.Sprintf("%s-%d", spec.Prefix, i),
		SubjectID:     fmt.Sprintf("sub_%06d", subject),
		Meter:         meters[i%len(meters)],
		Quantity:      float64(1 + i%3),
		Timestamp:     spec.End.Add(-offset),
	}
}

// Seed writes spec's events and returns how many were new.
func Seed(ctx context.Context, st *store.Store, spec Spec) (int, error) {
	if spec.Events < 1 || spec.Subjects < 1 || spec.Days < 1 || spec.ProjectID == "" || len(spec.Environments) == 0 {
		return 0, fmt.Errorf("usagegen: need a project, environments and positive events, subjects and days")
	}
	if spec.End.IsZero() {
		spec.End = time.Now().UTC()
	}
	if spec.Prefix == "" {
		spec.Prefix = "seed"
	}
	spec.Workers = max(spec.Workers, 1)
	if st.Dialect() == store.Postgres {
		return seedBulk(ctx, st, spec)
	}
	var next, done, fresh atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, spec.Workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range spec.Workers {
		wg.Go(func() {
			batch := make([]store.UsageEvent, 0, store.MaxUsageBatch)
			for {
				from := int(next.Add(store.MaxUsageBatch)) - store.MaxUsageBatch
				if from >= spec.Events || ctx.Err() != nil {
					return
				}
				batch = batch[:0]
				for i := from; i < min(from+store.MaxUsageBatch, spec.Events); i++ {
					batch = append(batch, spec.Event(i))
				}
				results, err := st.IngestUsage(ctx, batch)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				for _, r := range results {
					if !r.Duplicate {
						fresh.Add(1)
					}
				}
				if n := done.Add(int64(len(batch))); spec.Progress != nil {
					spec.Progress(int(n))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return int(fresh.Load()), err
	}
	return int(fresh.Load()), nil
}

// seedBulk is Seed on PostgreSQL: chunks of about bulkChunk events through
// store.BulkIngestUsage, spec.Workers chunks at once (PostgreSQL runs each statement on one
// core; concurrent chunks overlap their COPY and event inserts).
//
// The chunks are cut by subject, not by event number (subjectChunks): a chunk carries every
// event of a range of subjects, so each rollup row (a subject's day, meter, environment) is
// written once, by one chunk, and the rollups' and the events' subject indexes grow at their
// right edge instead of being updated all over. Cut by event number, every chunk touched rows
// of every subject: at 10 M events over 50,000 subjects the rollups outgrew PostgreSQL's default
// 128 MB of shared buffers and the seed fell from 19,000 to 12,000 events/s. The events written
// are the same (spec.Event(i) for every i below spec.Events), only their order differs. Last,
// the usage tables are analysed (store.AnalyzeUsage).
func seedBulk(ctx context.Context, st *store.Store, spec Spec) (int, error) {
	chunks := subjectChunks(spec, bulkChunk)
	var next, done, fresh atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, spec.Workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range spec.Workers {
		wg.Go(func() {
			var chunk []store.UsageEvent
			for {
				c := int(next.Add(1)) - 1
				if c >= len(chunks) || ctx.Err() != nil {
					return
				}
				chunk = chunk[:0]
				chunks[c](func(i int) { chunk = append(chunk, spec.Event(i)) })
				n, err := st.BulkIngestUsage(ctx, chunk)
				if err != nil {
					errs <- err
					cancel()
					return
				}
				fresh.Add(int64(n))
				if d := done.Add(int64(len(chunk))); spec.Progress != nil {
					spec.Progress(int(d))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return int(fresh.Load()), err
	}
	return int(fresh.Load()), st.AnalyzeUsage(ctx)
}

// bulkChunk is about how many events one BulkIngestUsage call of seedBulk takes.
const bulkChunk = 25_000

// subjectChunks splits the event numbers 0 … spec.Events-1 into chunks of about size events
// each, every chunk holding all the events of a range of subjects, and returns each chunk as a
// function that calls yield with its event numbers, subject by subject. Every number is in
// exactly one chunk. Event i's subject is i·subjectStep mod Subjects (Spec.Event), so subject s's
// events are i = r + k·Subjects for r = s·subjectStep⁻¹ mod Subjects; when subjectStep has no
// inverse modulo Subjects (Subjects a multiple of it), the chunks are cut by event number.
func subjectChunks(spec Spec, size int) []func(yield func(i int)) {
	n, subjects := spec.Events, spec.Subjects
	inverse, ok := modInverse(subjectStep, subjects)
	var chunks []func(func(int))
	if !ok || n < subjects {
		for from := 0; from < n; from += size {
			chunks = append(chunks, func(yield func(int)) {
				for i := from; i < min(from+size, n); i++ {
					yield(i)
				}
			})
		}
		return chunks
	}
	// Each subject has n/subjects or one more events, so a range of size·subjects/n subjects
	// holds about size events.
	span := max(1, size*subjects/n)
	for first := 0; first < subjects; first += span {
		last := min(first+span, subjects)
		chunks = append(chunks, func(yield func(int)) {
			for s := first; s < last; s++ {
				for i := s * inverse % subjects; i < n; i += subjects {
					yield(i)
				}
			}
		})
	}
	return chunks
}

// modInverse returns x with a·x ≡ 1 (mod m), if there is one.
func modInverse(a, m int) (int, bool) {
	if m == 1 {
		return 0, true
	}
	// Extended Euclid on (a mod m, m).
	r0, r1 := a%m, m
	s0, s1 := 1, 0
	for r1 != 0 {
		q := r0 / r1
		r0, r1 = r1, r0-q*r1
		s0, s1 = s1, s0-q*s1
	}
	if r0 != 1 {
		return 0, false
	}
	return ((s0 % m) + m) % m, true
}
