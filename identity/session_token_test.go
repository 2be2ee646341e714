package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewSessionToken(t *testing.T) {
	format := regexp.MustCompile(`^[A-Za-z0-9]{32}$`)
	seen := map[string]bool{}
	counts := map[rune]int{}
	const n = 2000
	for range n {
		tok, err := NewSessionToken()
		if err != nil {
			t.Fatal(err)
		}
		if !format.MatchString(tok) {
			t.Fatalf("NewSessionToken = %q, want 32 alphanumerics", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
		for _, c := range tok {
			counts[c]++
		}
	}
	// Every character of the alphabet shows up, roughly uniformly (expected
	// 2000·32/62 ≈ 1032 each; a modulo bias would push the first 8 to ~1290).
	if len(counts) != len(base62) {
		t.Errorf("%d distinct characters, want %d", len(counts), len(base62))
	}
	for c, k := range counts {
		if k < 800 || k > 1270 {
			t.Errorf("character %q appeared %d times, want about 1032", c, k)
		}
	}
}

func TestSignToken(t *testing.T) {
	secret := []byte("better-auth-secret-123456789012345678901234567890")
	token := "Ab3dEfGhIjKlMnOpQrStUvWxYz012345"

	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(token))
	want := token + "." + base64.StdEncoding.EncodeToString(mac.Sum(nil))

	signed := SignToken(secret, token)
	if signed != want {
		t.Fatalf("SignToken = %q, want %q", signed, want)
	}
	sig := signed[len(token)+1:]
	if len(sig) != 44 || !strings.HasSuffix(sig, "=") {
		t.Errorf("signature %q: want 44 characters ending in '='", sig)
	}

	// The cookie value is encodeURIComponent(signed).
	cookie := CookieValue(secret, token)
	wantCookie := strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(want)
	if cookie != wantCookie {
		t.Errorf("CookieValue = %q, want %q", cookie, wantCookie)
	}
	if unescaped, err := url.QueryUnescape(cookie); err != nil || unescaped != want {
		t.Errorf("CookieValue does not decode back: %q, %v", unescaped, err)
	}

	for name, value := range map[string]string{"raw": signed, "url-encoded": cookie, "lower-case escapes": strings.NewReplacer("%2B", "%2b", "%2F", "%2f", "%3D", "%3d").Replace(cookie)} {
		if got, ok := VerifySignedToken(secret, value); !ok || got != token {
			t.Errorf("VerifySignedToken(%s %q) = %q, %v; want %q, true", name, value, got, ok, token)
		}
	}
}

// TestSignTokenPlusSign: a raw value with '+' in its signature must not be
// query-unescaped into a space.
func TestSignTokenPlusSign(t *testing.T) {
	secret := []byte("s")
	for range 200 {
		tok, _ := NewSessionToken()
		signed := SignToken(secret, tok)
		if !strings.ContainsAny(signed, "+/") {
			continue
		}
		if got, ok := VerifySignedToken(secret, signed); !ok || got != tok {
			t.Fatalf("raw %q: %q, %v", signed, got, ok)
		}
		if got, ok := VerifySignedToken(secret, CookieValue(secret, tok)); !ok || got != tok {
			t.Fatalf("encoded %q: %q, %v", CookieValue(secret, tok), got, ok)
		}
		return
	}
	t.Fatal("no signature with '+' or '/' in 200 tries")
}

func TestVerifySignedTokenRejects(t *testing.T) {
	secret := []byte("secret")
	token := "Ab3dEfGhIjKlMnOpQrStUvWxYz012345"
	signed := SignToken(secret, token)

	// Flipping any single byte (token or signature) breaks it.
	for i := range len(signed) {
		b := []byte(signed)
		b[i] ^= 0x01
		if got, ok := VerifySignedToken(secret, string(b)); ok {
			t.Errorf("flipped byte %d: %q verified as %q", i, b, got)
		}
	}
	sigStart := len(token) + 1
	for _, value := range []string{
		"",
		".",
		token,
		token + ".",
		"." + signed[sigStart:],
		signed[:len(signed)-1],
		signed + "=",
		signed[:sigStart] + strings.Repeat("A", 44),
		signed[:sigStart] + strings.Repeat("!", 44),
		signed + "%",
		signed + "%zz",
		"%" + signed,
		strings.Repeat("a", 10000) + signed,
		strings.Repeat("%2B", 200),
		token + "x." + signed[sigStart:],
	} {
		if got, ok := VerifySignedToken(secret, value); ok || got != "" {
			t.Errorf("VerifySignedToken(%q) = %q, %v; want rejected", value, got, ok)
		}
	}
	if _, ok := VerifySignedToken([]byte("other secret"), signed); ok {
		t.Error("verified under another secret")
	}
}

func TestHashToken(t *testing.T) {
	// sha256("abc")
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashToken("abc"); got != want {
		t.Errorf("HashToken(abc) = %s, want %s", got, want)
	}
}

func TestSessionCookie(t *testing.T) {
	if got := SessionCookieName(false); got != "gatehouse.session_token" {
		t.Errorf("SessionCookieName(false) = %q", got)
	}
	if got := SessionCookieName(true); got != "__Host-gatehouse.session_token" {
		t.Errorf("SessionCookieName(true) = %q", got)
	}
	if got := LegacySessionCookieName(true); got != "__Secure-gatehouse.session_token" {
		t.Errorf("LegacySessionCookieName(true) = %q", got)
	}
	if got := LegacySessionCookieName(false); got != "" {
		t.Errorf("LegacySessionCookieName(false) = %q", got)
	}
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
		want   string
	}{
		{"remember", SessionCookie("gatehouse.session_token", "a.b%3D", 7*24*time.Hour, false),
			"gatehouse.session_token=a.b%3D; Path=/; Max-Age=604800; HttpOnly; SameSite=Lax"},
		{"secure", SessionCookie(SessionCookieName(true), "v", time.Hour, true),
			"__Host-gatehouse.session_token=v; Path=/; Max-Age=3600; HttpOnly; Secure; SameSite=Lax"},
		{"browser session", SessionCookie("gatehouse.session_token", "v", 0, false),
			"gatehouse.session_token=v; Path=/; HttpOnly; SameSite=Lax"},
		{"prefix forces Secure", SessionCookie("__Secure-x", "v", 0, false),
			"__Secure-x=v; Path=/; HttpOnly; Secure; SameSite=Lax"},
		{"host prefix forces Secure", SessionCookie("__Host-x", "v", 0, false),
			"__Host-x=v; Path=/; HttpOnly; Secure; SameSite=Lax"},
		{"sub-second", SessionCookie("x", "v", time.Millisecond, false),
			"x=v; Path=/; Max-Age=1; HttpOnly; SameSite=Lax"},
		{"expired", ExpiredCookie("gatehouse.session_token", false),
			"gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"},
		{"expired secure", ExpiredCookie(SessionCookieName(true), true),
			"__Host-gatehouse.session_token=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Lax"},
	} {
		if got := tc.cookie.String(); got != tc.want {
			t.Errorf("%s: Set-Cookie %q, want %q", tc.name, got, tc.want)
		}
		if tc.cookie.Domain != "" {
			t.Errorf("%s: Domain %q, want none", tc.name, tc.cookie.Domain)
		}
	}

	// The value survives a round trip through a request's Cookie header.
	secret := []byte("k")
	value := CookieValue(secret, "Ab3dEfGhIjKlMnOpQrStUvWxYz012345")
	req, _ := http.NewRequest("GET", "/", nil)
	req.AddCookie(SessionCookie("gatehouse.session_token", value, 0, false))
	c, err := req.Cookie("gatehouse.session_token")
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := VerifySignedToken(secret, c.Value); !ok || tok != "Ab3dEfGhIjKlMnOpQrStUvWxYz012345" {
		t.Errorf("round trip through Cookie header: %q, %v", tok, ok)
	}
}
