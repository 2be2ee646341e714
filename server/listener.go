package server

import (
	"bytes"
	"net"
	"net/http"
	"regexp"
	"strconv"

	"github.com/google/uuid"
)

// Listener wraps ln so that the answers net/http writes by itself also go out as problem+json.
// net/http refuses some requests before any handler runs — bad percent-encoding in the path
// (GET /api/v1/organizations/%zz%), a malformed request line, headers too large, an unknown
// transfer encoding — and writes a text/plain body straight to the connection; it offers no
// hook to change that. This wrapper recognises those writes by their exact shape (status line,
// text/plain, Connection: close, one line of body, no Date header: no handler response looks
// like that) and writes the same status as a problem with a request id instead. Every other
// byte passes through untouched.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &problemListener{Listener: ln, baseURL: s.cfg.BaseURL}
}

type problemListener struct {
	net.Listener
	baseURL string
}

func (l *problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c, baseURL: l.baseURL}, nil
}

type problemConn struct {
	net.Conn
	baseURL string
}

// netHTTPError matches net/http's own error answers (server.go, conn.serve).
var netHTTPError = regexp.MustCompile(`\AHTTP/1\.1 ([1-5][0-9][0-9]) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n[^\r\n]*\z`)

func (c *problemConn) Write(b []byte) (int, error) {
	m := netHTTPError.FindSubmatch(b)
	if m == nil {
		return c.Conn.Write(b)
	}
	status, _ := strconv.Atoi(string(m[1]))
	if _, err := c.Conn.Write(c.problemResponse(status)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// problemResponse is a whole HTTP/1.1 response carrying the problem for status.
func (c *problemConn) problemResponse(status int) []byte {
	id := uuid.NewString()
	title := http.StatusText(status)
	if status == http.StatusBadRequest {
		title = "Malformed request"
	}
	var body bytes.Buffer
	_ = jsonEncode(&body, problemBody{Type: c.baseURL + "/problems/" + kindClientError, Title: title, Status: status, RequestID: id})
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	out.WriteString("Content-Type: application/problem+json\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(body.Len()) + "\r\n")
	out.WriteString("Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n")
	out.WriteString("X-Request-Id: " + id + "\r\nConnection: close\r\n\r\n")
	out.Write(body.Bytes())
	return out.Bytes()
}
