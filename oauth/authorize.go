package oauth

// The provider's browser-side routes, relative to the base URL; the handlers are package
// server's (oauth_authorize.go), which owns the sessions and the pages' CSRF defences.
const (
	ConsentPath    = "/api/auth/oauth2/consent"
	UserinfoPath   = "/api/auth/oauth2/userinfo"
	EndSessionPath = "/api/auth/oauth2/end-session"
)

// ACRMultiFactor is the authentication context class a client asks for with
// acr_values=urn:gatehouse:mfa: the user signed in with a password and a second factor (the
// session's amr holds "mfa"). An ID token of such a session carries it as acr.
const ACRMultiFactor = "urn:gatehouse:mfa"

// ClaimsSupported are the claims the ID token and userinfo may carry (discovery).
var ClaimsSupported = []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "amr", "acr", "nonce", "azp", "at_hash",
	"name", "picture", "updated_at", "email", "email_verified", "organization", "roles", "entitlements", "billing"}
