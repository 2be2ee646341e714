package store

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/lib/pq"
)

// TestIsUnavailable lists what a failover shows the driver (docs/failover.md): the errors of a
// killed server or a dropped socket, a server shutting down or still starting, a standby that
// refuses writes, each as returned and as wrapped; and statement errors that are not outages.
func TestIsUnavailable(t *testing.T) {
	outage := map[string]error{
		"io.EOF":                      io.EOF,
		"unexpected EOF":              io.ErrUnexpectedEOF,
		"driver.ErrBadConn":           driver.ErrBadConn,
		"connection refused":          &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		"connection reset":            fmt.Errorf("read: %w", syscall.ECONNRESET),
		"57P01 admin_shutdown":        &pq.Error{Code: "57P01", Message: "terminating connection due to administrator command"},
		"57P02 crash_shutdown":        &pq.Error{Code: "57P02"},
		"57P03 cannot_connect_now":    &pq.Error{Code: "57P03", Message: "the database system is starting up"},
		"25006 read_only_transaction": &pq.Error{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"},
		"08006 connection_failure":    &pq.Error{Code: "08006"},
		"53300 too_many_connections":  &pq.Error{Code: "53300"},
	}
	for name, err := range outage {
		if !IsUnavailable(err) {
			t.Errorf("%s: IsUnavailable = false, want true", name)
		}
		if !IsUnavailable(fmt.Errorf("identity: sign in: %w", err)) {
			t.Errorf("%s wrapped: IsUnavailable = false, want true", name)
		}
		if w := wrapError("op", err); !errors.Is(w, ErrUnavailable) {
			t.Errorf("%s: wrapError gives %v, want ErrUnavailable", name, w)
		}
	}
	// BEGIN on a standby in recovery: lib/pq's BEGIN READ WRITE is refused with 0A000.
	recovery := &pq.Error{Code: "0A000", Message: "cannot set transaction read-write mode during recovery"}
	if w := wrapError("begin", recovery); !errors.Is(w, ErrUnavailable) {
		t.Errorf("0A000 at begin: wrapError gives %v, want ErrUnavailable", w)
	}
	if w := wrapError("insert", recovery); errors.Is(w, ErrUnavailable) {
		t.Errorf("0A000 from a statement: wrapError gives ErrUnavailable, want the plain error")
	}
	for name, err := range map[string]error{
		"23505 unique_violation":  &pq.Error{Code: "23505"},
		"25P02 in_failed_sql_tx":  &pq.Error{Code: "25P02"},
		"22P02 invalid_text_repr": &pq.Error{Code: "22P02"},
		"plain error":             errors.New("boom"),
	} {
		if IsUnavailable(err) {
			t.Errorf("%s: IsUnavailable = true, want false", name)
		}
	}
}
