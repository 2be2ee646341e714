package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/usagegen"
)

// seedUsage is `gatehouse dev seed-usage -project ID [-events N] [-subjects M] [-days D]`: it
// writes N synthetic usage events over M subjects and the last D days into the project's
// environments through the real store (rollups included; on PostgreSQL COPY chunks through
// store.BulkIngestUsage, on SQLite batches of 1,000 through store.IngestUsage), for trying the
// analytics at scale. Event ids are "<prefix>-<n>", so a rerun with
// the same prefix only replays.
func seedUsage(ctx context.Context, cfg settings, args []string, stderr io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("seed-usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "project id (required)")
	events := fs.Int("events", 100_000, "events to write")
	subjects := fs.Int("subjects", 10_000, "distinct subjects")
	days := fs.Int("days", 90, "days the events spread over, ending now")
	prefix := fs.String("prefix", "seed", "eventId prefix")
	workers := fs.Int("workers", 4, "batches (SQLite, which writes one at a time anyway) or COPY chunks (PostgreSQL) in flight")
	if err := fs.Parse(args); err != nil {
		return &ConfigError{Var: "seed-usage", Reason: err.Error()}
	}
	if *project == "" {
		return &ConfigError{Var: "seed-usage", Reason: "-project is required"}
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	p, err := st.Project(ctx, *project)
	if err != nil {
		return fmt.Errorf("project %s: %w", *project, err)
	}
	envs := make([]string, len(p.Environments))
	for i, e := range p.Environments {
		envs[i] = e.ID
	}
	start := time.Now()
	last := start
	n, err := usagegen.Seed(ctx, st, usagegen.Spec{ProjectID: p.ID, Environments: envs, Events: *events,
		Subjects: *subjects, Days: *days, Prefix: *prefix, Workers: *workers,
		Progress: func(done int) {
			if time.Since(last) > 5*time.Second {
				last = time.Now()
				log.Info("seeding usage", "done", done, "of", *events)
			}
		}})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	log.Info("seeded usage", "new", n, "sent", *events, "seconds", elapsed.Seconds(), "events_per_second", float64(*events)/elapsed.Seconds())
	return nil
}
