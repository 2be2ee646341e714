package oauth

import (
	"context"
	"errors"
	"testing"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"
)

// TestTokenHandlersDeclineQuietly: for a client_credentials request, each of the composed
// token endpoint handlers of the other grants (authorization code, PKCE, refresh, and OpenID
// Connect for the code flow and refresh: five) answers PopulateTokenEndpointResponse with
// fosite.ErrUnknownRequest itself, not wrapped with a stack trace; the client credentials
// handler is the one that handles it.
func TestTokenHandlersDeclineQuietly(t *testing.T) {
	ctx := context.Background()
	conf := &fosite.Config{GlobalSecret: make([]byte, 32)}
	noKey := func(context.Context) (interface{}, error) { return nil, errors.New("no key") }
	strategy := &compose.CommonStrategy{
		CoreStrategy:               compose.NewOAuth2HMACStrategy(conf),
		OpenIDConnectTokenStrategy: compose.NewOpenIDConnectStrategy(noKey, conf),
	}
	composeProvider(conf, NewFositeStore(nil), strategy)
	req := fosite.NewAccessRequest(NewSession("cli_x"))
	req.GrantTypes = fosite.Arguments{GrantClientCredentials}
	declined := 0
	var handlers []fosite.TokenEndpointHandler
	for _, h := range conf.TokenEndpointHandlers {
		if h.CanHandleTokenEndpointRequest(ctx, req) {
			handlers = append(handlers, h)
			continue
		}
		declined++
		if err := h.PopulateTokenEndpointResponse(ctx, req, fosite.NewAccessResponse()); err != fosite.ErrUnknownRequest {
			t.Errorf("%T declined with %#v, want fosite.ErrUnknownRequest itself", h, err)
		}
	}
	if declined != 5 {
		t.Errorf("%d handlers declined, want 5", declined)
	}
	if len(handlers) != 1 {
		t.Fatalf("%d handlers handle client_credentials, want 1", len(handlers))
	}
	if q, ok := handlers[0].(quietTokenHandler); !ok {
		t.Errorf("handler %T is not wrapped", handlers[0])
	} else if _, ok := q.TokenEndpointHandler.(*oauth2.ClientCredentialsGrantHandler); !ok {
		t.Errorf("client_credentials is handled by %T", q.TokenEndpointHandler)
	}
}
