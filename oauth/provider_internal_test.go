package oauth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ory/fosite"
)

// TestAccessTokenValidationUsesStoredExpiry: the access-token strategy accepts a stored request
// until its access-token expiry and refuses it from then on, whatever the JWT says.
func TestAccessTokenValidationUsesStoredExpiry(t *testing.T) {
	var s accessTokenStrategy
	for name, c := range map[string]struct {
		exp  time.Time
		want error
	}{
		"future":  {time.Now().Add(time.Minute), nil},
		"past":    {time.Now().Add(-time.Second), fosite.ErrTokenExpired},
		"missing": {time.Time{}, fosite.ErrTokenExpired},
	} {
		sess := NewSession("cli_x")
		if !c.exp.IsZero() {
			sess.SetExpiresAt(fosite.AccessToken, c.exp)
		}
		err := s.ValidateAccessToken(context.Background(), &fosite.Request{Session: sess}, "a.b.c")
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if err := s.ValidateAccessToken(context.Background(), nil, "a.b.c"); err == nil {
		t.Error("nil request accepted")
	}
}
