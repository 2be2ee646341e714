package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// BenchmarkRequestPasswordResetTiming measures request-password-reset for an address with an
// account and one without, interleaved (one of each per iteration, each from its own client IP
// and to its own address, so no send limit applies), and reports the median of each and their
// difference: the answer must not tell who has an account, and neither should its timing.
//
//	go test -run '^$' -bench RequestPasswordResetTiming -benchtime 400x ./server/
func BenchmarkRequestPasswordResetTiming(b *testing.B) {
	for _, be := range apptest.BenchBackends(b) {
		b.Run(be.Name, func(b *testing.B) {
			st := be.Open(b)
			srv, err := newServer(testConfig(), st, slog.New(slog.NewJSONHandler(io.Discard, nil)), testDeps{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			err = st.InTx(ctx, func(tx *store.Tx) error {
				for i := range b.N {
					u := store.User{Name: "Known", Email: fmt.Sprintf("known%d@example.com", i)}
					if err := tx.CreateUser(ctx, &u, "!no-password"); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			call := func(email, ip string) time.Duration {
				req := httptest.NewRequest(http.MethodPost, "/api/auth/request-password-reset",
					strings.NewReader(`{"email":"`+email+`"}`))
				req.Header.Set("Content-Type", "application/json")
				req.RemoteAddr = ip + ":40000"
				rec := httptest.NewRecorder()
				start := time.Now()
				srv.Handler().ServeHTTP(rec, req)
				d := time.Since(start)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", email, rec.Code, rec.Body)
				}
				return d
			}
			known, unknown := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				ip := func(n int) string { return fmt.Sprintf("10.%d.%d.%d", n/65536%256, n/256%256, n%256) }
				if i%2 == 0 { // alternate which goes first
					known = append(known, call(fmt.Sprintf("known%d@example.com", i), ip(2*i)))
					unknown = append(unknown, call(fmt.Sprintf("unknown%d@example.com", i), ip(2*i+1)))
				} else {
					unknown = append(unknown, call(fmt.Sprintf("unknown%d@example.com", i), ip(2*i+1)))
					known = append(known, call(fmt.Sprintf("known%d@example.com", i), ip(2*i)))
				}
			}
			b.StopTimer()
			median := func(ds []time.Duration) time.Duration {
				slices.Sort(ds)
				return ds[len(ds)/2]
			}
			k, u := median(known), median(unknown)
			b.ReportMetric(float64(k.Microseconds()), "known-p50-µs")
			b.ReportMetric(float64(u.Microseconds()), "unknown-p50-µs")
			b.ReportMetric(float64(k-u)/float64(u)*100, "diff-%")
		})
	}
}
