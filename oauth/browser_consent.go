package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
)

// ---- Challenges ----

// challenge ties a consent or logout form to the browser session that was shown it and to
// the pending request; it is signed with HMAC-SHA256 and expires after challengeTTL.
type challenge struct {
	Kind    string `json:"k"`
	Session string `json:"s"`
	Client  string `json:"c,omitempty"`
	// Query is the pending authorization request (consent).
	Query string `json:"q,omitempty"`
	// Redirect and State are the validated post-logout redirect (logout).
	Redirect string `json:"r,omitempty"`
	State    string `json:"st,omitempty"`
	Expires  int64  `json:"e"`
}

func (b *browserProvider) sign(c challenge) string {
	c.Expires = time.Now().Add(challengeTTL).Unix()
	payload, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, b.key)
	mac.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// open verifies a challenge of kind issued to session sessionID.
func (b *browserProvider) open(raw, kind, sessionID string) (challenge, error) {
	payloadPart, sigPart, ok := strings.Cut(raw, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(payloadPart)
	sig, err2 := base64.RawURLEncoding.DecodeString(sigPart)
	if !ok || err1 != nil || err2 != nil {
		return challenge{}, errors.New("malformed challenge")
	}
	mac := hmac.New(sha256.New, b.key)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return challenge{}, errors.New("bad challenge signature")
	}
	var c challenge
	if err := json.Unmarshal(payload, &c); err != nil {
		return challenge{}, errors.New("malformed challenge")
	}
	if c.Kind != kind || c.Session != sessionID || time.Now().Unix() > c.Expires {
		return challenge{}, errors.New("the challenge is expired or belongs to another session")
	}
	return c, nil
}

// sameOrigin is the form posts' Origin check: like checkOrigin, but the Origin (or, without
// one, the Referer's origin) must be present and trusted, since these posts always carry the
// session cookie.
func (b *browserProvider) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if u, err := url.Parse(r.Header.Get("Referer")); err == nil && u.Scheme != "" && u.Host != "" {
			origin = u.Scheme + "://" + u.Host
		}
	}
	return origin != "" && origin != "null" && b.trustedOrigin(origin)
}

// ---- Consent ----

// consentPage serves GET /api/auth/oauth2/consent: the client's name and the requested scopes
// in plain words, with Allow and Deny.
func (b *browserProvider) consentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sess, user, _, err := b.sessions.FromRequest(r)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "login_required", msgNotSignedIn)
		return
	}
	raw := r.URL.Query().Get("consent_challenge")
	c, err := b.open(raw, "consent", sess.ID)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", msgConsentInvalid)
		return
	}
	client, err := b.store.OIDCClientByID(ctx, c.Client)
	if err != nil || !client.Usable() {
		b.errorPage(w, http.StatusBadRequest, "invalid_client", msgUnknownClient)
		return
	}
	q, _ := url.ParseQuery(c.Query)
	b.render(w, http.StatusOK, PageConsent, Page{
		Title: "Allow access", Action: ConsentPath, ClientName: client.Name, Email: user.Email,
		Scopes: DescribeScopes(strings.Fields(q.Get("scope"))), Challenge: raw,
	})
}

// readPageForm reads the form of a post from one of the provider's own pages (at most 64 KiB),
// which must come from this site; otherwise it answers with the error page and reports false.
func (b *browserProvider) readPageForm(w http.ResponseWriter, r *http.Request) bool {
	if !b.sameOrigin(r) {
		b.errorPage(w, http.StatusForbidden, "access_denied", msgForeignForm)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The form could not be read.")
		return false
	}
	return true
}

// consentDecision serves POST /api/auth/oauth2/consent: a same-origin post with the page's
// challenge, issued to this session and never answered before. Accept records the consent and
// issues the code; deny answers access_denied.
func (b *browserProvider) consentDecision(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !b.readPageForm(w, r) {
		return
	}
	sess, user, _, err := b.sessions.FromRequest(r)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "login_required", msgNotSignedIn)
		return
	}
	raw := r.PostForm.Get("consent_challenge")
	c, err := b.open(raw, "consent", sess.ID)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", msgConsentInvalid)
		return
	}
	decision := r.PostForm.Get("decision")
	if decision != "accept" && decision != "deny" {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "Choose Allow or Deny.")
		return
	}
	// A challenge answers one decision: its first use is recorded until it expires.
	_, sig, _ := strings.Cut(raw, ".")
	if fresh, err := b.spend(ctx, "consent", sig, c.Expires); err != nil {
		b.errorPage(w, http.StatusInternalServerError, "server_error", "")
		return
	} else if !fresh {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", msgConsentAnswered)
		return
	}
	// Replay the pending authorization request through fosite: it checks the client and the
	// redirect URI again (a client disabled meanwhile gets the error page).
	areq, err := http.NewRequestWithContext(ctx, http.MethodGet, AuthorizePath+"?"+c.Query, nil)
	if err != nil {
		b.errorPage(w, http.StatusBadRequest, "invalid_request", "The pending request is invalid.")
		return
	}
	ar, err := b.p.NewAuthorizeRequest(ctx, areq)
	if err != nil {
		b.authorizeError(w, ar, err)
		return
	}
	if decision == "deny" {
		b.authorizeError(w, ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
		return
	}
	consent := store.OAuthConsent{UserID: user.ID, ClientID: ar.GetClient().GetID(), Scopes: ar.GetRequestedScopes()}
	client, err := b.store.OIDCClientByID(ctx, consent.ClientID)
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	if client.SkipConsent {
		// Asked because of prompt=consent; skipConsent clients keep no consent rows.
		b.grant(ctx, w, ar, sess, user)
		return
	}
	err = b.store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.GrantOAuthConsent(ctx, &consent); err != nil {
			return err
		}
		requestID, ip, userAgent := b.requestInfo(ctx)
		return tx.AppendAudit(ctx, &store.AuditEntry{
			ActorType: store.ActorUser, ActorID: user.ID, Action: "oauth_consent.grant",
			TargetType: "oidc_client", TargetID: consent.ClientID, OrganizationID: client.OrganizationID, ProjectID: client.ProjectID,
			RequestID: requestID, IPAddress: ip, UserAgent: userAgent,
			Metadata: map[string]any{"scopes": consent.Scopes},
		})
	})
	if err != nil {
		b.authorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	b.grant(ctx, w, ar, sess, user)
}
