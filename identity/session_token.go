package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Session cookie names: better-auth's "<prefix>.session_token" with the
// prefix "gatehouse"; under https the __Host- variant, which browsers accept
// only from a secure origin with Secure, Path=/ and no Domain, so that no
// other host (a sibling subdomain, say) can set or shadow it; and the
// __Secure- variant (Secure only) that https deployments used before.
const (
	sessionCookieName      = "gatehouse.session_token"
	secureCookiePrefix     = "__Secure-"
	hostCookiePrefix       = "__Host-"
	hostSessionCookieName  = hostCookiePrefix + sessionCookieName
	legacySecureCookieName = secureCookiePrefix + sessionCookieName
)

// SessionTokenLength is the length of a session token from NewSessionToken.
const SessionTokenLength = 32

// signatureLength is the length of base64std(HMAC-SHA256): 44 characters, the
// last one '='.
const signatureLength = 44

// maxSignedTokenLength bounds what VerifySignedToken looks at: far more than
// a token this package issues (32 + 1 + 44, or 85 percent-encoded), so junk
// cookies are rejected without hashing them.
const maxSignedTokenLength = 512

// NewSessionToken returns a random session token: SessionTokenLength characters from
// [A-Za-z0-9] (RandomBase62), about 190 bits of entropy. It fails only if crypto/rand does.
func NewSessionToken() (string, error) {
	tok, err := RandomBase62(SessionTokenLength)
	if err != nil {
		return "", fmt.Errorf("identity: new session token: %w", err)
	}
	return tok, nil
}

// SignToken returns token + "." + the standard base64 (padded, 44 characters)
// HMAC-SHA256 of token under secret: the signed cookie value better-auth
// writes, before URL encoding (see CookieValue).
func SignToken(secret []byte, token string) string {
	return token + "." + base64.StdEncoding.EncodeToString(tokenMAC(secret, token))
}

// VerifySignedToken checks a signed value from a cookie and returns the token
// it carries. value may be percent-encoded (as CookieValue sets it and
// browsers send it back) or raw (token.signature). The HMAC is compared in
// constant time. Anything malformed (bad encoding, no dot, empty token, a
// signature that is not 44 characters of standard base64, overlong input)
// yields ("", false); it never panics.
func VerifySignedToken(secret []byte, value string) (token string, ok bool) {
	if len(value) > maxSignedTokenLength {
		return "", false
	}
	if strings.Contains(value, "%") {
		// PathUnescape, not QueryUnescape: a raw '+' in base64 is not a
		// space.
		decoded, err := url.PathUnescape(value)
		if err != nil {
			return "", false
		}
		value = decoded
	}
	dot := strings.LastIndexByte(value, '.')
	if dot <= 0 {
		return "", false
	}
	token, sig := value[:dot], value[dot+1:]
	if len(sig) != signatureLength {
		return "", false
	}
	mac, err := base64.StdEncoding.Strict().DecodeString(sig)
	if err != nil || len(mac) != sha256.Size {
		return "", false
	}
	if !hmac.Equal(mac, tokenMAC(secret, token)) {
		return "", false
	}
	return token, true
}

// CookieValue returns the Set-Cookie value for token: SignToken's result
// encoded like JavaScript's encodeURIComponent ('+', '/' and '=' become %2B,
// %2F and %3D), as better-auth sets it.
func CookieValue(secret []byte, token string) string {
	return encodeURIComponent(SignToken(secret, token))
}

// HashToken returns the lower-case hex SHA-256 of a session token: the only
// form of the token the database stores (store.Session.TokenHash). Session
// tokens are 190-bit random values, so a plain hash (no salt, no slow KDF)
// is enough to make a leaked table useless.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// SessionCookieName returns the session cookie's name:
// "__Host-gatehouse.session_token" when secure (the base URL is https), else
// "gatehouse.session_token". Every reader and writer of the cookie takes its
// name from here (or from LegacySessionCookieName).
func SessionCookieName(secure bool) string {
	if secure {
		return hostSessionCookieName
	}
	return sessionCookieName
}

// LegacySessionCookieName returns the name https deployments gave the session
// cookie before the __Host- prefix, "__Secure-gatehouse.session_token", when
// secure, else "" (none). Sessions still reads it, for one release, so that
// sessions started before the upgrade survive it; the next refresh writes the
// cookie under SessionCookieName. Remove it in the release after.
func LegacySessionCookieName(secure bool) string {
	if secure {
		return legacySecureCookieName
	}
	return ""
}

// SessionCookie returns the session cookie: HttpOnly, SameSite=Lax, Path=/,
// no Domain (host-only), Secure when secure or when name carries the
// __Secure- or __Host- prefix. maxAge > 0 sets Max-Age (whole seconds, at least 1);
// maxAge == 0 omits it, making a browser-session cookie (rememberMe: false);
// maxAge < 0 expires the cookie like ExpiredCookie.
func SessionCookie(name, value string, maxAge time.Duration, secure bool) *http.Cookie {
	c := &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   secure || strings.HasPrefix(name, secureCookiePrefix) || strings.HasPrefix(name, hostCookiePrefix),
	}
	switch {
	case maxAge > 0:
		c.MaxAge = max(1, int(maxAge/time.Second))
	case maxAge < 0:
		c.Value = ""
		c.MaxAge = -1 // net/http writes Max-Age=0
	}
	return c
}

// ExpiredCookie returns a cookie that deletes name (Max-Age=0 on the wire),
// with the same attributes as SessionCookie so that browsers match it to the
// cookie being removed.
func ExpiredCookie(name string, secure bool) *http.Cookie {
	return SessionCookie(name, "", -1, secure)
}

func tokenMAC(secret []byte, token string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(token))
	return m.Sum(nil)
}

// encodeURIComponent percent-encodes every byte except the ones JavaScript's
// encodeURIComponent leaves alone: A-Z a-z 0-9 - _ . ! ~ * ' ( ).
func encodeURIComponent(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			strings.IndexByte("-_.!~*'()", c) >= 0:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
