package server

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// healthTimeout bounds the database check so that health answers within about a second.
const healthTimeout = 800 * time.Millisecond

// GetHealth answers 200 {"status":"ok"} when a trivial query succeeds, else 503.
func (s *Server) GetHealth(ctx context.Context, _ gen.GetHealthRequestObject) (gen.GetHealthResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "health: database unreachable", "err", err)
		return nil, ErrUnavailable
	}
	return gen.GetHealth200JSONResponse{Status: gen.HealthStatusOK}, nil
}
