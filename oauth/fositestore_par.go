package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Pushed authorization requests (RFC 9126): fosite's PARStorage over the oauth_par_requests
// table. A request_uri is single-use: GetPARSession takes (deletes) the row in the statement
// that reads it, so of concurrent uses of one request_uri exactly one proceeds, and
// DeletePARSession has nothing left to do.

var _ fosite.PARStorage = (*FositeStore)(nil)

// parRecord is a pushed authorization request as stored: fosite.AuthorizeRequest's fields,
// with the client by id and the form without client credentials.
type parRecord struct {
	ID                  string          `json:"id"`
	RequestedAt         time.Time       `json:"requested_at"`
	ClientID            string          `json:"client_id"`
	Form                string          `json:"form"`
	RequestedScope      []string        `json:"requested_scope"`
	GrantedScope        []string        `json:"granted_scope"`
	RequestedAudience   []string        `json:"requested_audience"`
	GrantedAudience     []string        `json:"granted_audience"`
	RedirectURI         string          `json:"redirect_uri"`
	ResponseTypes       []string        `json:"response_types"`
	State               string          `json:"state"`
	ResponseMode        string          `json:"response_mode"`
	DefaultResponseMode string          `json:"default_response_mode"`
	Session             json.RawMessage `json:"session,omitempty"`
}

// CreatePARSession stores a pushed authorization request under requestURI until the PAR
// lifetime (fosite's PushedAuthorizeContextLifespan) ends.
func (f *FositeStore) CreatePARSession(ctx context.Context, requestURI string, r fosite.AuthorizeRequester) error {
	form := url.Values{}
	for k, v := range r.GetRequestForm() {
		form[k] = v
	}
	for _, k := range append(secretFormKeys, "client_assertion_type") {
		form.Del(k)
	}
	rec := parRecord{
		ID: r.GetID(), RequestedAt: r.GetRequestedAt(), ClientID: r.GetClient().GetID(), Form: form.Encode(),
		RequestedScope: r.GetRequestedScopes(), GrantedScope: r.GetGrantedScopes(),
		RequestedAudience: r.GetRequestedAudience(), GrantedAudience: r.GetGrantedAudience(),
		ResponseTypes: r.GetResponseTypes(), State: r.GetState(), ResponseMode: string(r.GetResponseMode()),
		DefaultResponseMode: string(r.GetDefaultResponseMode()),
	}
	if u := r.GetRedirectURI(); u != nil {
		rec.RedirectURI = u.String()
	}
	expires := f.clock().Add(PARLifespan)
	if s := r.GetSession(); s != nil {
		b, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("oauth: store par: session: %w", err)
		}
		rec.Session = b
		if e := s.GetExpiresAt(fosite.PushedAuthorizeRequestContext); !e.IsZero() {
			expires = e
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("oauth: store par: %w", err)
	}
	return f.st.CreatePARRequest(ctx, requestURI, rec.ClientID, string(b), expires)
}

// GetPARSession takes the pushed request of requestURI: it is deleted as it is read. An
// unknown, used or expired request_uri, or one whose client is no longer usable, is
// fosite.ErrNotFound (fosite answers invalid_request_uri).
func (f *FositeStore) GetPARSession(ctx context.Context, requestURI string) (fosite.AuthorizeRequester, error) {
	_, raw, err := f.st.TakePARRequest(ctx, requestURI)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fosite.ErrNotFound.WithDebug("unknown, used or expired request_uri")
	}
	if err != nil {
		return nil, err
	}
	var rec parRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, fmt.Errorf("oauth: read par: %w", err)
	}
	client, err := f.GetClient(ctx, rec.ClientID)
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(rec.Form)
	if err != nil {
		return nil, fmt.Errorf("oauth: read par: form: %w", err)
	}
	ar := fosite.NewAuthorizeRequest()
	ar.ID, ar.RequestedAt, ar.Client, ar.Form = rec.ID, rec.RequestedAt, client, form
	ar.RequestedScope, ar.GrantedScope = rec.RequestedScope, rec.GrantedScope
	ar.RequestedAudience, ar.GrantedAudience = rec.RequestedAudience, rec.GrantedAudience
	ar.ResponseTypes, ar.State = rec.ResponseTypes, rec.State
	ar.ResponseMode, ar.DefaultResponseMode = fosite.ResponseModeType(rec.ResponseMode), fosite.ResponseModeType(rec.DefaultResponseMode)
	if rec.RedirectURI != "" {
		if ar.RedirectURI, err = url.Parse(rec.RedirectURI); err != nil {
			return nil, fmt.Errorf("oauth: read par: redirect uri: %w", err)
		}
	}
	if len(rec.Session) > 0 {
		s := NewSession("")
		if err := json.Unmarshal(rec.Session, s); err != nil {
			return nil, fmt.Errorf("oauth: read par: session: %w", err)
		}
		ar.Session = s
	}
	return ar, nil
}

// DeletePARSession does nothing: GetPARSession took the request already.
func (f *FositeStore) DeletePARSession(context.Context, string) error { return nil }
