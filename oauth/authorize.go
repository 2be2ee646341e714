package oauth

// The provider's browser-side routes, relative to the base URL; the handlers are package
// server's (oauth_authorize.go), which owns the sessions and the pages' CSRF defences.
const (
	ConsentPath    = "/api/auth/oauth2/consent"
	UserinfoPath   = "/api/auth/oauth2/userinfo"
	EndSessionPath = "/api/auth/oauth2/end-session"
)

// ClaimsSupported are the claims the ID token and userinfo may carry (discovery).
var ClaimsSupported = []string{"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "azp", "at_hash",
	"name", "picture", "updated_at", "email", "email_verified", "organization", "roles", "entitlements", "billing"}
