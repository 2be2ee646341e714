package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// usageMaintenanceEvery is how often each replica runs store.MaintainUsage (partitions ahead,
// retention, replay window); several replicas doing so at once is safe (an advisory lock).
const usageMaintenanceEvery = time.Hour

// usageConversionBatch is how many events one step of the conversion of a pre-0032 usage table
// moves (one short transaction each), and usageConversionPause the pause between steps, which
// leaves the database to ingest.
const (
	usageConversionBatch = 10_000
	usageConversionPause = 50 * time.Millisecond
)

// maintainUsage runs until ctx ends: on PostgreSQL it moves a pre-0032 usage table into the
// partitions in batches while one is left (store.ConvertUsageBatch; any replica may do it, one
// at a time), and runs store.MaintainUsage and store.RepairSubjectTotals at once and then every
// usageMaintenanceEvery.
// Failures are logged and retried on the next round. On SQLite it returns at once.
func maintainUsage(ctx context.Context, st *store.Store, log *slog.Logger) {
	if st.Dialect() != store.Postgres {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		var total int64
		for ctx.Err() == nil {
			moved, done, err := st.ConvertUsageBatch(ctx, usageConversionBatch)
			switch {
			case done:
				if total > 0 {
					log.Info("usage events converted to partitions", "moved", total)
				}
				return
			case err != nil && ctx.Err() == nil:
				log.Error("usage event conversion", "err", err)
				sleep(ctx, time.Minute)
			default:
				if total += moved; total%1_000_000 < int64(usageConversionBatch) && moved > 0 {
					log.Info("converting usage events to partitions", "moved", total)
				}
				sleep(ctx, usageConversionPause)
			}
		}
	})
	for {
		rep, err := st.MaintainUsage(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("usage maintenance", "err", err)
		case err == nil && (len(rep.Created)+len(rep.Dropped) > 0 || rep.ExpiredIDs+rep.ExpiredDefault > 0):
			log.Info("usage maintenance", "created", rep.Created, "dropped", rep.Dropped,
				"expired_replay_ids", rep.ExpiredIDs, "expired_default_rows", rep.ExpiredDefault)
		}
		// Totals that a replica of a release before migration 34 left behind (store.RepairSubjectTotals).
		switch repaired, err := st.RepairSubjectTotals(ctx); {
		case err != nil && ctx.Err() == nil:
			log.Error("usage subject totals", "err", err)
		case len(repaired) > 0:
			log.Info("usage subject totals rebuilt", "projects", repaired)
		}
		if !sleep(ctx, usageMaintenanceEvery) {
			return
		}
	}
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
