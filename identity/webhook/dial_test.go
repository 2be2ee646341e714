package webhook_test

import (
	"context"
	"net"

	"github.com/gatehouse-dev/gatehouse/identity/webhook"
)

// netDialer dials as the deliverer's own transport does: a net.Dialer with the guard's
// Control hook.
type netDialer struct{ guard webhook.Guard }

func (d *netDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{Control: d.guard.Control}).DialContext(ctx, network, addr)
}
