package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// serveLoopback runs the real app behind Server.Listener on a loopback port, as main does.
func serveLoopback(t *testing.T, app *testApp) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := app.srv.HTTPServer()
	go func() { _ = hs.Serve(app.srv.Listener(ln)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// rawRequest sends bytes exactly as given (no client-side cleaning or escaping) and reads the
// answer.
func rawRequest(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// wireProblem is a problem body as a client decodes it.
type wireProblem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	RequestID string `json:"requestId"`
	Errors    []struct {
		Path    []string `json:"path"`
		Message string   `json:"message"`
	} `json:"errors"`
}

func decodeWireProblem(t *testing.T, res *http.Response, body []byte) wireProblem {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json; body %s", ct, body)
	}
	var p wireProblem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if p.Status != res.StatusCode || p.RequestID == "" || p.RequestID != res.Header.Get("X-Request-Id") {
		t.Fatalf("problem %+v with status %d and X-Request-Id %q", p, res.StatusCode, res.Header.Get("X-Request-Id"))
	}
	return p
}

// TestMalformedRequestsAnswerProblems: requests net/http refuses before any handler runs (bad
// percent-encoding, a broken request line, oversize headers) still get problem+json with a
// request id. Before Listener, net/http answered text/plain "400 Bad Request".
func TestMalformedRequestsAnswerProblems(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	addr := serveLoopback(t, app)
	cases := []struct {
		name, raw string
		status    int
		title     string
	}{
		{"bad escape in an organization id", "GET /api/v1/organizations/%zz% HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Malformed request"},
		{"bad escape in a project route", "DELETE /api/v1/projects/prj_1/roles/%2 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Malformed request"},
		{"broken request line", "GET\r\nHost: x\r\n\r\n", 400, "Malformed request"},
		{"unknown transfer encoding", "POST /api/v1/organizations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: zip\r\n\r\n", 501, "Not Implemented"},
		{"headers too large", "GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+4096) + "\r\n\r\n", 431, "Request Header Fields Too Large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := rawRequest(t, addr, tc.raw)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, tc.status, body)
			}
			p := decodeWireProblem(t, res, body)
			if p.Type != testBaseURL+"/problems/http-4xx" && tc.status < 500 || p.Title != tc.title {
				t.Errorf("problem %+v, want type %s/problems/http-4xx and title %q", p, testBaseURL, tc.title)
			}
		})
	}
	t.Run("well-formed requests pass through unchanged", func(t *testing.T) {
		res, body := rawRequest(t, addr, "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		if res.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) || res.Header.Get("Date") == "" {
			t.Fatalf("health = %d %s %v", res.StatusCode, body, res.Header)
		}
	})
}

// TestOneRoutingDecision: echo's route decides the operation. A path echo routes but the spec's
// template does not describe (dot segments are not cleaned) used to reach a second router and
// answer 500; it is now the operation echo matched, answered like any unknown id.
func TestOneRoutingDecision(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ten := app.newTenancy(t)
	owner := ten.members[RoleOwner]
	addr := serveLoopback(t, app)
	for _, path := range []string{
		"/api/v1/projects/" + ten.project.ID + "/roles/../../../health",
		"/api/v1/projects/../health/roles/x",
		"/api/v1/organizations/..",
	} {
		t.Run(path, func(t *testing.T) {
			method := "DELETE"
			if strings.HasPrefix(path, "/api/v1/organizations/") {
				method = "GET"
			}
			res, body := rawRequest(t, addr, method+" "+path+" HTTP/1.1\r\nHost: x\r\nOrigin: "+testBaseURL+"\r\nCookie: "+owner.Cookie+"\r\n\r\n")
			if res.StatusCode != http.StatusNotFound {
				t.Fatalf("status %d, want 404; body %s", res.StatusCode, body)
			}
			p := decodeWireProblem(t, res, body)
			if p.Type != testBaseURL+"/problems/http-404" || p.Title != "Not found" {
				t.Errorf("problem %+v", p)
			}
		})
	}
	if strings.Contains(app.logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", app.logs.String())
	}
}

// TestPathParametersDecodeOnce: a path parameter is percent-decoded exactly once, whether or
// not net/http kept a raw path: "org%25zz" is the id "org%zz" and "a%2Fb" the id "a/b", both
// unknown (404), never a 400 from decoding twice or a 500.
func TestPathParametersDecodeOnce(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ten := app.newTenancy(t)
	for _, id := range []string{"org%25zz", "a%2Fb", "%2e%2e", "x%20y"} {
		res := app.do(ten.members[RoleOwner].as(request{method: "GET", path: "/api/v1/organizations/" + id}))
		res.wantProblem(t, 404, "http-404", "Not found")
	}
	res := app.do(ten.members[RoleOwner].as(request{method: "GET", path: "/api/v1/organizations/" + strings.Replace(ten.org.ID, "_", "%5F", 1)}))
	if res.Code != 200 {
		t.Fatalf("an escaped form of the organization's own id = %d %s", res.Code, res.Body)
	}
}

// TestOversizeChunkedBodyIs413: a body over the limit sent without Content-Length (chunked) is
// refused with the same 413 problem as a declared one, and nothing is logged as an error.
func TestOversizeChunkedBodyIs413(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	addr := serveLoopback(t, app)
	big := `{"name":"` + strings.Repeat("a", 1<<20+10) + `","email":"x@example.com","password":"correct horse battery"}`
	var chunked strings.Builder
	for rest := big; rest != ""; {
		n := min(len(rest), 64<<10)
		fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	chunked.WriteString("0\r\n\r\n")
	ada := app.newFixtureUser(t, "Ada", "ada@example.com")
	signedIn := "Cookie: " + ada.Cookie + "\r\nOrigin: " + testBaseURL + "\r\n"
	for path, auth := range map[string]string{"/api/auth/sign-up/email": "", "/api/v1/organizations": signedIn} {
		res, body := rawRequest(t, addr, "POST "+path+" HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+chunked.String())
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: status %d, want 413; body %s", path, res.StatusCode, body)
		}
		if p := decodeWireProblem(t, res, body); p.Type != testBaseURL+"/problems/http-4xx" || p.Title != "Request body too large" {
			t.Errorf("%s: problem %+v", path, p)
		}
	}
	if strings.Contains(app.logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", app.logs.String())
	}
}

// TestSlowBodyIs408: a client that stops sending its body gets 408 (a problem) once the read
// deadline passes, logged as a warning, never a 500.
func TestSlowBodyIs408(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := app.srv.HTTPServer()
	hs.ReadTimeout = 300 * time.Millisecond // the production value is ReadTimeout
	go func() { _ = hs.Serve(app.srv.Listener(ln)) }()
	t.Cleanup(func() { _ = hs.Close() })
	ada := app.newFixtureUser(t, "Ada", "ada@example.com")
	signedIn := "Cookie: " + ada.Cookie + "\r\nOrigin: " + testBaseURL + "\r\n"
	for path, auth := range map[string]string{"/api/auth/sign-up/email": "", "/api/v1/organizations": signedIn} {
		res, body := rawRequest(t, ln.Addr().String(), "POST "+path+" HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":")
		if res.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%s: status %d, want 408; body %s", path, res.StatusCode, body)
		}
		if p := decodeWireProblem(t, res, body); p.Type != testBaseURL+"/problems/http-4xx" || p.Title != "Request timeout" {
			t.Errorf("%s: problem %+v", path, p)
		}
	}
	logs := app.logs.String()
	if strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "level=WARN msg=\"request body read timed out\"") {
		t.Errorf("logs:\n%s", logs)
	}
}
