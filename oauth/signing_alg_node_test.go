package oauth_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/gatehouse-dev/gatehouse/server/apptest"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// requireNodeE2EEnv makes a missing node or node_modules/openid-client fail the openid-client
// tests instead of skipping them; make test sets it (as for e2e's node tests).
const requireNodeE2EEnv = "GATEHOUSE_REQUIRE_NODE_E2E"

// openIDClient is e2e/oidc/openid-client.mjs running under node: a relying party built on
// openid-client that completes code grants and verifies their ID tokens.
type openIDClient struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// rpAnswer is the script's answer to one grant.
type rpAnswer struct {
	OK      bool   `json:"ok"`
	Alg     string `json:"alg"`
	Kid     string `json:"kid"`
	Sub     string `json:"sub"`
	Error   string `json:"error"`
	Message string `json:"message"`
	// Status is the HTTP status of a token response openid-client refused to read (not 400).
	Status int `json:"status"`
}

func startOpenIDClient(t *testing.T) *openIDClient {
	t.Helper()
	root, err := filepath.Abs("..") // go test runs in oauth/
	if err != nil {
		t.Fatal(err)
	}
	skip := func(msg string) {
		t.Helper()
		if os.Getenv(requireNodeE2EEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, requireNodeE2EEnv)
		}
		t.Skipf("%s; run npm ci, or set %s=1 to make this a failure", msg, requireNodeE2EEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed (Node.js 20 or later)")
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "openid-client", "package.json")); err != nil {
		skip("node_modules/openid-client is missing")
	}
	cmd := exec.Command(node, filepath.Join("e2e", "oidc", "openid-client.mjs"))
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("openid-client.mjs: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("openid-client.mjs did not exit\n%s", stderr.String())
		}
	})
	return &openIDClient{in: in, out: bufio.NewScanner(out)}
}

// grant runs the code flow of client in e's signed-in browser up to the callback, and has
// relying party rp (alg: the client's registered id_token_signed_response_alg, "" for none)
// complete it.
func (c *openIDClient) grant(t *testing.T, e *signingAlgEnv, rp string, client apptest.OIDCClient, alg string) rpAnswer {
	t.Helper()
	cfg := e.clientConfig(client, *client.ClientSecret, "openid", "email")
	v := oauth2.GenerateVerifier()
	const state = "state-openid-client-0123456789"
	res := e.br.Get(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(v)))
	callback := res.Header.Get("Location")
	if !strings.HasPrefix(callback, cfg.RedirectURL+"?code=") {
		t.Fatalf("authorization response: %d %q", res.Status, callback)
	}
	req, _ := json.Marshal(map[string]string{"rp": rp, "issuer": e.url, "clientId": client.ID, "clientSecret": *client.ClientSecret,
		"alg": alg, "callback": callback, "verifier": v, "state": state})
	if _, err := c.in.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
	if !c.out.Scan() {
		t.Fatalf("openid-client.mjs answered nothing: %v", c.out.Err())
	}
	var a rpAnswer
	if err := json.Unmarshal(c.out.Bytes(), &a); err != nil {
		t.Fatalf("openid-client.mjs answered %q: %v", c.out.Text(), err)
	}
	return a
}

// wantVerified asserts that the relying party accepted an ID token signed with alg under kid.
func wantVerified(t *testing.T, name string, a rpAnswer, alg, kid string) {
	t.Helper()
	if !a.OK || a.Alg != alg || a.Kid != kid || !strings.HasPrefix(a.Sub, "usr_") {
		t.Errorf("%s: %+v; want an ID token signed %s by %s that openid-client verified", name, a, alg, kid)
	}
}

// TestOpenIDClientRotationRS256ToES256: openid-client, with ID token signature checks on,
// completes code grants across a rotation from RS256 to ES256. A relying party that fetched
// the JWKS after the ES256 key was published verifies the RS256 ID token it gets while the
// RS256 key still signs and the ES256 one after the switch, from one JWKS fetch; one that
// registered id_token_signed_response_alg ES256 gets server_error until the ES256 key signs,
// then verified ES256 ID tokens; one registered for RS256 (still offered by this instance,
// though the rotation was run as if it were not) gets RS256 ID tokens from a fresh RS256 key,
// made at once, after the switch, which a relying party that fetches the JWKS then verifies.
// (One that cached the JWKS within openid-client's refetch cooldown does not: rotating with the
// servers' GATEHOUSE_SIGNING_ALGS publishes the next RS256 key ahead instead.)
func TestOpenIDClientRotationRS256ToES256(t *testing.T) {
	rp := startOpenIDClient(t)
	e := newSigningAlgEnv(t, storetest.Backends(t)[0], "RS256")
	old, err := e.app.keys.Current(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantVerified(t, "before the rotation", rp.grant(t, e, "early", e.anyAlg, ""), "RS256", old.ID)
	if a := rp.grant(t, e, "es256-early", e.es256, "ES256"); a.OK || a.Error != "server_error" || a.Status != 500 {
		t.Errorf("ES256 client before the rotation: %+v, want 500 server_error", a)
	}

	r := e.rotate(t, "ES256")
	// Published, not signing: a relying party that discovers now sees both keys.
	wantVerified(t, "published, not signing", rp.grant(t, e, "during", e.anyAlg, ""), "RS256", old.ID)
	wantVerified(t, "RS256 client before activation", rp.grant(t, e, "rs256", e.rs256, "RS256"), "RS256", old.ID)

	e.clk.Set(r.ActivatesAt)
	wantVerified(t, "after activation, same relying party", rp.grant(t, e, "during", e.anyAlg, ""), "ES256", r.KeyID)
	wantVerified(t, "after activation, a new relying party", rp.grant(t, e, "late", e.anyAlg, ""), "ES256", r.KeyID)
	wantVerified(t, "ES256 client after activation", rp.grant(t, e, "es256-late", e.es256, "ES256"), "ES256", r.KeyID)
	a := rp.grant(t, e, "rs256-late", e.rs256, "RS256")
	fresh, err := e.app.keys.CurrentFor(t.Context(), "RS256")
	if err != nil || fresh.ID == old.ID {
		t.Fatalf("RS256 key after activation %+v (old %s): %v", fresh, old.ID, err)
	}
	wantVerified(t, "RS256 client after activation", a, "RS256", fresh.ID)
}

// TestOpenIDClientES256: on an ES256 instance openid-client verifies ES256 ID tokens, for a
// client that registered ES256 and for one that registered nothing (discovery lists ES256); a
// relying party that insists on RS256 refuses the ES256 token itself.
func TestOpenIDClientES256(t *testing.T) {
	rp := startOpenIDClient(t)
	e := newSigningAlgEnv(t, storetest.Backends(t)[0], "ES256")
	key, err := e.app.keys.Current(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantVerified(t, "no registered alg", rp.grant(t, e, "any", e.anyAlg, ""), "ES256", key.ID)
	wantVerified(t, "ES256 registered", rp.grant(t, e, "es256", e.es256, "ES256"), "ES256", key.ID)
	// The relying party expects RS256 of a client registered without an alg: openid-client
	// itself refuses the ES256 ID token (the server answered).
	if a := rp.grant(t, e, "insists-rs256", e.anyAlg, "RS256"); a.OK || !strings.Contains(a.Message, `unexpected JWT "alg" header parameter`) {
		t.Errorf("an RS256 relying party given an ES256 ID token: %+v, want openid-client to refuse it", a)
	} else {
		t.Logf("openid-client refuses: %s", a.Message)
	}
}
