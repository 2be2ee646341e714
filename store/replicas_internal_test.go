package store

import (
	"database/sql"
	"testing"
	"time"
)

// TestReplicaLag measures lag from the primary's WAL samples: an idle primary's caught-up
// replica lags by the age of the newest sample only; a replica stuck at an old position lags
// since the first sample past it; one behind every kept sample lags at least as long as the
// oldest is old, or since its last replayed commit when that is longer; no sample, no measure.
func TestReplicaLag(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	rs := &replicaSet{maxLag: 5 * time.Second}
	if _, known := rs.lag(100, t0, sql.NullFloat64{}); known {
		t.Error("lag known before any sample")
	}
	// Idle: the primary's position stays at 100 for 20 s.
	for i := range 21 {
		rs.samples = append(rs.samples, lsnSample{at: t0.Add(time.Duration(i) * time.Second), lsn: 100})
	}
	now := t0.Add(20*time.Second + 300*time.Millisecond)
	if lag, known := rs.lag(100, now, sql.NullFloat64{Float64: 3600, Valid: true}); !known || lag != 300*time.Millisecond {
		t.Errorf("idle primary, replica caught up: lag %v (%v), want 300ms", lag, known)
	}
	// Busy: the position moves by 10 a second from t0+20s; the replica stops at 150.
	for i := 1; i <= 10; i++ {
		rs.samples = append(rs.samples, lsnSample{at: t0.Add(time.Duration(20+i) * time.Second), lsn: int64(100 + 10*i)})
	}
	now = t0.Add(30 * time.Second)
	if lag, _ := rs.lag(150, now, sql.NullFloat64{}); lag != 5*time.Second {
		t.Errorf("replica at 150, primary at 200: lag %v, want 5s (the sample at 150 is 5 s old)", lag)
	}
	if lag, _ := rs.lag(155, now, sql.NullFloat64{}); lag != 5*time.Second {
		t.Errorf("replica at 155: lag %v, want 5s (it holds the sample at 150, not the one at 160)", lag)
	}
	// Behind every kept sample (the oldest is 30 s old).
	if lag, _ := rs.lag(50, now, sql.NullFloat64{Float64: 10, Valid: true}); lag != 30*time.Second {
		t.Errorf("replica behind every sample: lag %v, want 30s", lag)
	}
	if lag, _ := rs.lag(50, now, sql.NullFloat64{Float64: 90, Valid: true}); lag != 90*time.Second {
		t.Errorf("replica behind every sample, last replayed commit 90 s ago: lag %v, want 1m30s", lag)
	}
}
