package server

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// healthTimeout bounds the database check so that health answers within about a second.
const healthTimeout = 800 * time.Millisecond

// GetHealth answers 200 {"status":"ok"} when a trivial query succeeds, else 503. The body also
// names the build (version, commit, goVersion) when those are known.
func (s *Server) GetHealth(ctx context.Context, _ gen.GetHealthRequestObject) (gen.GetHealthResponseObject, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.WarnContext(ctx, "health: database unreachable", "err", err)
		return nil, ErrUnavailable
	}
	b := s.cfg.Build
	return gen.GetHealth200JSONResponse{Status: gen.HealthStatusOK,
		Version: nonEmpty(b.Version), Commit: nonEmpty(b.Commit), GoVersion: nonEmpty(b.GoVersion)}, nil
}

// nonEmpty is &v, or nil for "" (an optional member left out).
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
