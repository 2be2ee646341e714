package server

import (
	"fmt"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Read replicas (docs/read-replicas.md). An operation whose answer may be slightly stale
// declares x-read: replica in the spec; for its requests, once authenticated and authorized on
// the primary, readPool asks the store for a usable replica and the store's stale-tolerant
// reads (analytics, the subject directory, audit lists) run there. Everything else — every
// other operation, authentication and authorization of these ones, every write — reads the
// primary.

// x-read values.
const (
	readPrimary = "primary"
	readReplica = "replica"
)

// operationRead is whether an operation's x-read is replica. Only GET operations may declare
// it: readPool runs the handler again on the primary when the replica fails, which only a read
// may do.
func operationRead(method string, op *openapi3.Operation) (bool, error) {
	v, ok := op.Extensions["x-read"]
	if !ok {
		return false, nil
	}
	switch s, _ := v.(string); s {
	case readPrimary:
		return false, nil
	case readReplica:
		if method != http.MethodGet {
			return false, fmt.Errorf("server: %s: x-read: replica on a %s operation (only GET reads may)", op.OperationID, method)
		}
		return true, nil
	}
	return false, fmt.Errorf("server: %s: unknown x-read %v", op.OperationID, v)
}

// readPool runs after authorize, right before the handler: for an x-read: replica operation it
// puts a usable replica in the request's context (store.ReplicaReads). When the handler fails
// because the replica could not serve it (unreachable, or a query cancelled by the standby's
// recovery), the handler runs again on the primary, before anything was written. Each request
// that reaches its handler is counted by the pool that served it.
func (s *Server) readPool(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := routeOf(c)
		if m == nil {
			return next(c)
		}
		pool := store.PoolPrimary
		if m.policy.readReplica && s.store != nil {
			ctx, p := s.store.ReplicaReads(c.Request().Context())
			pool = p
			c.SetRequest(c.Request().WithContext(ctx))
		}
		err := next(c)
		if pool == store.PoolReplica && err != nil && !c.Response().Committed {
			if ctx, retry := s.store.RetryOnPrimary(c.Request().Context(), err); retry {
				s.log.Warn("read replica failed; the primary answers", "operation", m.id, "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
				pool = store.PoolPrimary
				c.SetRequest(c.Request().WithContext(ctx))
				err = next(c)
			}
		}
		s.metrics.readPool(m.id, pool)
		return err
	}
}

// metricReadPool counts requests by the pool that served their reads.
const metricReadPool = "gatehouse_read_pool_requests_total"

// metricReplicaLag and metricReplicaUsable are each read replica's state (store.ReplicaStatus),
// labelled by its position in GATEHOUSE_DATABASE_READ_URL.
const (
	metricReplicaLag    = "gatehouse_read_replica_lag_seconds"
	metricReplicaUsable = "gatehouse_read_replica_usable"
)

func newReadPoolCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricReadPool,
		Help: "Requests that reached their handler, by spec operation id and the database pool that served their reads (primary or replica).",
	}, []string{"operation", "pool"})
}

func (m *Metrics) readPool(operation string, pool store.Pool) {
	m.readPools.WithLabelValues(operation, string(pool)).Inc()
}

// replicaCollector exports the replicas' last measured lag and whether each is usable.
type replicaCollector struct {
	st          *store.Store
	lag, usable *prometheus.Desc
}

func newReplicaCollector(st *store.Store) *replicaCollector {
	return &replicaCollector{st: st,
		lag: prometheus.NewDesc(metricReplicaLag, "A read replica's lag behind the primary at its last check, in seconds.",
			[]string{"replica"}, nil),
		usable: prometheus.NewDesc(metricReplicaUsable, "1 when a read replica answered its last check within GATEHOUSE_READ_MAX_LAG, else 0.",
			[]string{"replica"}, nil),
	}
}

func (rc *replicaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- rc.lag; ch <- rc.usable }

func (rc *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range rc.st.ReplicaStatuses() {
		name := fmt.Sprint(r.Index)
		usable := 0.0
		if r.Usable {
			usable = 1
		}
		ch <- prometheus.MustNewConstMetric(rc.lag, prometheus.GaugeValue, r.Lag.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(rc.usable, prometheus.GaugeValue, usable, name)
	}
}
