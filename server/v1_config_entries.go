package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// MaxConfigValueBytes bounds a config value: the length of its compact JSON encoding, which is
// what the server stores (and seals, for a secret).
const MaxConfigValueBytes = 64 << 10

// errConfigArchived answers a write to an archived config entry.
var errConfigArchived = Conflict("Config entry is archived; restore it first")

// ListConfigEntries lists an environment's entries by key; secrets are always masked.
func (s *Server) ListConfigEntries(ctx context.Context, req gen.ListConfigEntriesRequestObject) (gen.ListConfigEntriesResponseObject, error) {
	state := store.StateActive
	if req.Params.State != nil {
		state = store.State(*req.Params.State)
	}
	entries, err := s.store.ListConfigEntries(ctx, req.EnvironmentId, state)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ConfigEntry, len(entries))
	for i, e := range entries {
		if out[i], err = configEntryJSON(e, nil); err != nil {
			return nil, err
		}
	}
	return gen.ListConfigEntries200JSONResponse{Data: out}, nil
}

// GetConfigEntry returns one active entry with its value. A secret is decrypted, and its
// reveal is audited first: when the audit row cannot be written, nothing is revealed. The
// response is never cached.
func (s *Server) GetConfigEntry(ctx context.Context, req gen.GetConfigEntryRequestObject) (gen.GetConfigEntryResponseObject, error) {
	noStore(ctx)
	e, err := s.store.ConfigEntry(ctx, req.EnvironmentId, req.Key)
	if err != nil {
		return nil, err
	}
	if !e.Secret {
		data, err := configEntryJSON(e, nil)
		if err != nil {
			return nil, err
		}
		return gen.GetConfigEntry200JSONResponse{Data: data}, nil
	}
	plaintext, err := s.keyring.Open(e.Value, store.ConfigValueAAD(e.EnvironmentID, e.Key))
	if err != nil {
		return nil, fmt.Errorf("server: open config secret %s: %w", e.ID, err)
	}
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		return s.auditConfig(ctx, tx, "config.reveal", e, map[string]any{"version": e.Version})
	})
	if err != nil {
		return nil, err
	}
	data, err := configEntryJSON(e, plaintext)
	if err != nil {
		return nil, err
	}
	return gen.GetConfigEntry200JSONResponse{Data: data}, nil
}

// PutConfigEntry creates (201) or replaces (200) an entry, writing a new version. A secret is
// sealed before it reaches the store, and the response masks it. An archived key is a 409.
func (s *Server) PutConfigEntry(ctx context.Context, req gen.PutConfigEntryRequestObject) (gen.PutConfigEntryResponseObject, error) {
	raw, err := encodeConfigValue(req.Body.Value)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxConfigValueBytes {
		return nil, Validation(FieldError{Path: []string{"body", "value"},
			Message: "must be at most " + strconv.Itoa(MaxConfigValueBytes) + " bytes as JSON"})
	}
	w := store.ConfigWrite{
		EnvironmentID: req.EnvironmentId,
		Key:           req.Key,
		Secret:        req.Body.Secret != nil && *req.Body.Secret,
		Value:         string(raw),
	}
	if d := req.Body.Description; d != nil && *d != "" {
		w.Description = d
	}
	w.ActorType, w.ActorID = actor(ctx)
	if w.Secret {
		if w.Value, err = s.keyring.Seal(raw, store.ConfigValueAAD(w.EnvironmentID, w.Key)); err != nil {
			return nil, err
		}
	}
	var e store.ConfigEntry
	var created bool
	err = s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if e, created, err = tx.PutConfigEntry(ctx, w); err != nil {
			return err
		}
		return s.auditConfig(ctx, tx, "config.update", e, map[string]any{"version": e.Version, "secret": e.Secret})
	})
	if errors.Is(err, store.ErrArchived) {
		return nil, errConfigArchived
	}
	if err != nil {
		return nil, err
	}
	data, err := configEntryJSON(e, nil)
	if err != nil {
		return nil, err
	}
	if created {
		return gen.PutConfigEntry201JSONResponse{Data: data}, nil
	}
	return gen.PutConfigEntry200JSONResponse{Data: data}, nil
}

// ArchiveConfigEntry archives an active entry; it is then 404 by key until restored.
func (s *Server) ArchiveConfigEntry(ctx context.Context, req gen.ArchiveConfigEntryRequestObject) (gen.ArchiveConfigEntryResponseObject, error) {
	data, err := s.setConfigArchived(ctx, req.EnvironmentId, req.Key, true)
	if err != nil {
		return nil, err
	}
	return gen.ArchiveConfigEntry200JSONResponse{Data: data}, nil
}

// RestoreConfigEntry restores an archived entry (an active one is returned unchanged).
func (s *Server) RestoreConfigEntry(ctx context.Context, req gen.RestoreConfigEntryRequestObject) (gen.RestoreConfigEntryResponseObject, error) {
	data, err := s.setConfigArchived(ctx, req.EnvironmentId, req.Key, false)
	if err != nil {
		return nil, err
	}
	return gen.RestoreConfigEntry200JSONResponse{Data: data}, nil
}

// ListConfigEntryVersions lists an active entry's versions, newest first; secret values are
// masked.
func (s *Server) ListConfigEntryVersions(ctx context.Context, req gen.ListConfigEntryVersionsRequestObject) (gen.ListConfigEntryVersionsResponseObject, error) {
	versions, err := s.store.ListConfigVersions(ctx, req.EnvironmentId, req.Key)
	if err != nil {
		return nil, err
	}
	out := make([]gen.ConfigVersion, len(versions))
	for i, v := range versions {
		out[i] = gen.ConfigVersion{
			Version: v.Version, Secret: v.Secret, Masked: v.Secret,
			Description: nullableOf(v.Description),
			CreatedBy:   gen.AuditRef{Type: v.ActorType, Id: v.ActorID},
			CreatedAt:   v.CreatedAt,
		}
		if !v.Secret {
			if out[i].Value, err = storedJSON(v.Value); err != nil {
				return nil, fmt.Errorf("server: config version %s: %w", v.ID, err)
			}
		}
	}
	return gen.ListConfigEntryVersions200JSONResponse{Data: out}, nil
}

// setConfigArchived archives or restores an entry with its audit row in one transaction.
func (s *Server) setConfigArchived(ctx context.Context, envID, key string, archived bool) (gen.ConfigEntry, error) {
	action := "config.restore"
	if archived {
		action = "config.archive"
	}
	var e store.ConfigEntry
	err := s.store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if e, err = tx.SetConfigEntryArchived(ctx, envID, key, archived); err != nil {
			return err
		}
		return s.auditConfig(ctx, tx, action, e, nil)
	})
	if err != nil {
		return gen.ConfigEntry{}, err
	}
	return configEntryJSON(e, nil)
}

// auditConfig records action on entry e in tx, in the organization and project the request
// addresses. Metadata names the entry (key, environment) plus extra — never its value.
func (s *Server) auditConfig(ctx context.Context, tx *store.Tx, action string, e store.ConfigEntry, extra map[string]any) error {
	scope := ScopeFrom(ctx)
	md := map[string]any{"key": e.Key, "environmentId": e.EnvironmentID}
	for k, v := range extra {
		md[k] = v
	}
	return audit(ctx, tx, auditEvent{Action: action, TargetType: "config_entry", TargetID: e.ID,
		OrganizationID: scope.OrganizationID, ProjectID: scope.ProjectID, Metadata: md})
}

// encodeConfigValue is the stored form of a request's value: compact JSON, without the HTML
// escaping that encoding/json adds by default. A JSON null is a value like any other.
func encodeConfigValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("server: encode config value: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// configEntryJSON renders an entry. A secret is masked (value null, masked true) unless
// revealed holds its opened plaintext.
func configEntryJSON(e store.ConfigEntry, revealed []byte) (gen.ConfigEntry, error) {
	out := gen.ConfigEntry{
		Key: e.Key, Secret: e.Secret, Version: e.Version, EnvironmentId: e.EnvironmentID,
		Description: nullableOf(e.Description),
		CreatedAt:   e.CreatedAt, UpdatedAt: e.UpdatedAt, ArchivedAt: nullableOf(e.ArchivedAt),
	}
	var err error
	switch {
	case e.Secret && revealed == nil:
		out.Masked = true
	case e.Secret:
		out.Value, err = storedJSON(string(revealed))
	default:
		out.Value, err = storedJSON(e.Value)
	}
	if err != nil {
		return gen.ConfigEntry{}, fmt.Errorf("server: config entry %s: %w", e.ID, err)
	}
	return out, nil
}

// storedJSON passes stored JSON text through to the response unchanged, after checking it:
// a response must not fail half-written.
func storedJSON(text string) (json.RawMessage, error) {
	if !json.Valid([]byte(text)) {
		return nil, errors.New("stored value is not JSON")
	}
	return json.RawMessage(text), nil
}
