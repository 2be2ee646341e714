package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Usage ingest. Schema rules (lengths, meter pattern, quantity ≥ 0, batch size) are checked by
// the validator before these handlers run; the handlers add the rules a schema cannot state:
// the environment belongs to the project, the timestamp is not too far ahead, the properties
// are not too big.

// Usage event limits the schema does not carry.
const (
	// MaxUsagePropertiesBytes bounds an event's properties, as compact JSON.
	MaxUsagePropertiesBytes = 4 << 10
	// MaxUsageClockSkew is how far in the future an event's timestamp may be.
	MaxUsageClockSkew = 5 * time.Minute
)

// IngestUsageEvent records one event: 201 when new, 200 with the original id for a replay.
func (s *Server) IngestUsageEvent(ctx context.Context, req gen.IngestUsageEventRequestObject) (gen.IngestUsageEventResponseObject, error) {
	b := req.Body
	if err := s.checkUsageEnvironment(ctx, req.ProjectId, b.EnvironmentId, []string{"body", "environmentId"}); err != nil {
		return nil, err
	}
	e, err := s.usageEvent(req.ProjectId, b.EnvironmentId, gen.UsageEventFields{EventId: b.EventId, SubjectId: b.SubjectId,
		Meter: b.Meter, Quantity: b.Quantity, Timestamp: b.Timestamp, Properties: b.Properties}, []string{"body"})
	if err != nil {
		return nil, err
	}
	e.KeyID = eventKeyID(ctx)
	results, err := s.store.IngestUsage(ctx, []store.UsageEvent{e})
	if err != nil {
		return nil, err
	}
	r := results[0]
	if r.KeyRefused {
		return nil, ErrUnauthenticated
	}
	// 200 for a replay, 201 for a new event (usage_ack.go).
	return usageAckBody{id: r.ID, duplicate: r.Duplicate}, nil
}

// IngestUsageEventBatch records up to store.MaxUsageBatch events of one environment in one
// transaction, after validating all of them; one result per event, in order.
func (s *Server) IngestUsageEventBatch(ctx context.Context, req gen.IngestUsageEventBatchRequestObject) (gen.IngestUsageEventBatchResponseObject, error) {
	b := req.Body
	if err := s.checkUsageEnvironment(ctx, req.ProjectId, b.EnvironmentId, []string{"body", "environmentId"}); err != nil {
		return nil, err
	}
	events := make([]store.UsageEvent, len(b.Events))
	var fieldErrs []FieldError
	for i, f := range b.Events {
		e, err := s.usageEvent(req.ProjectId, b.EnvironmentId, f, []string{"body", "events", strconv.Itoa(i)})
		if verr, ok := errors.AsType[*Error](err); ok {
			fieldErrs = append(fieldErrs, verr.Errors...)
			continue
		}
		if err != nil {
			return nil, err
		}
		events[i] = e
	}
	if len(fieldErrs) > 0 {
		return nil, Validation(fieldErrs...)
	}
	keyID := eventKeyID(ctx)
	for i := range events {
		events[i].KeyID = keyID
	}
	results, err := s.store.IngestUsage(ctx, events)
	if err != nil {
		return nil, err
	}
	if results[0].KeyRefused {
		// One key sent them all: all are refused.
		return nil, ErrUnauthenticated
	}
	var out gen.IngestUsageEventBatch200JSONResponse
	out.Data.Results = make([]struct {
		Accepted  bool   `json:"accepted"`
		Duplicate bool   `json:"duplicate"`
		EventId   string `json:"eventId"`
		Id        string `json:"id"`
	}, len(results))
	for i, r := range results {
		res := &out.Data.Results[i]
		res.EventId, res.Id, res.Duplicate, res.Accepted = events[i].EventID, r.ID, r.Duplicate, !r.Duplicate
		if r.Duplicate {
			out.Data.Duplicates++
		} else {
			out.Data.Accepted++
		}
	}
	return out, nil
}

// eventKeyID is the API key the request was authenticated with, for store.IngestUsage to
// confirm in its transaction (apikey_cache.go), or "" for a user's session.
func eventKeyID(ctx context.Context) string {
	if p := PrincipalFrom(ctx); p != nil && p.ServiceAccount != nil {
		return p.ServiceAccount.KeyID
	}
	return ""
}

// usageEvent turns one validated event body into a store event, checking the timestamp and
// the properties' size; path locates the event in the body for error paths.
func (s *Server) usageEvent(projectID, environmentID string, f gen.UsageEventFields, path []string) (store.UsageEvent, error) {
	e := store.UsageEvent{ProjectID: projectID, EnvironmentID: environmentID, EventID: f.EventId,
		SubjectID: f.SubjectId, Meter: f.Meter, Quantity: 1}
	if f.Quantity != nil {
		e.Quantity = *f.Quantity
	}
	now := s.store.Now()
	e.ReceivedAt, e.Timestamp = now, now
	if f.Timestamp != nil {
		if f.Timestamp.After(now.Add(MaxUsageClockSkew)) {
			return e, Validation(FieldError{Path: append(path[:len(path):len(path)], "timestamp"),
				Message: "must not be more than 5 minutes in the future"})
		}
		e.Timestamp = *f.Timestamp
	}
	if f.Properties != nil {
		raw, err := json.Marshal(*f.Properties)
		if err != nil {
			return e, err
		}
		if len(raw) > MaxUsagePropertiesBytes {
			return e, Validation(FieldError{Path: append(path[:len(path):len(path)], "properties"),
				Message: "must be at most " + strconv.Itoa(MaxUsagePropertiesBytes) + " bytes as JSON"})
		}
		e.Properties = string(raw)
	}
	return e, nil
}

// errNotProjectEnvironment is the message of a 400 for an environment of another project.
const errNotProjectEnvironment = "must be an environment of this project"

// checkUsageEnvironment answers 400 at path unless environmentID is one of the project's
// environments. The pin of a service account was checked by authorize (403).
func (s *Server) checkUsageEnvironment(ctx context.Context, projectID, environmentID string, path []string) error {
	owner, ok := s.envProjects.Load(environmentID)
	if !ok {
		p, err := s.store.EnvironmentProject(ctx, environmentID)
		if errors.Is(err, store.ErrNotFound) {
			return Validation(FieldError{Path: path, Message: errNotProjectEnvironment})
		}
		if err != nil {
			return err
		}
		s.envProjects.Store(environmentID, p)
		owner = p
	}
	if owner.(string) != projectID {
		return Validation(FieldError{Path: path, Message: errNotProjectEnvironment})
	}
	return nil
}
