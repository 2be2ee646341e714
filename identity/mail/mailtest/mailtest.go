// Package mailtest runs a real SMTP server (github.com/emersion/go-smtp) for tests: it receives
// what Gatehouse sends over the network, decodes each message (headers, the text and HTML
// parts) and hands them to the test, which reads links out of the delivered message. It can
// offer STARTTLS with a certificate of its own (ClientTLS trusts it), require AUTH PLAIN, stop
// (the server is down) and start again on the same port.
package mailtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options configure a Server.
type Options struct {
	// STARTTLS offers STARTTLS with the server's own certificate (for 127.0.0.1).
	STARTTLS bool
	// Username and Password, when set, are required (AUTH PLAIN, after STARTTLS).
	Username, Password string
	// Reject lists recipients refused for good (550 at RCPT TO).
	Reject []string
}

// Server is a running SMTP server that keeps every message it accepts.
type Server struct {
	t    testing.TB
	opts Options
	addr string
	// ClientTLS trusts the server's certificate: hand it to mail.NewSMTPSender.
	ClientTLS *tls.Config
	serverTLS *tls.Config

	mu       sync.Mutex
	srv      *smtp.Server
	ln       net.Listener
	received []Message
	arrived  chan struct{}
}

// Message is one accepted message, decoded.
type Message struct {
	From    string
	To      []string
	Header  mail.Header
	Subject string
	// ContentType is the top-level media type (multipart/alternative).
	ContentType string
	// Text and HTML are the decoded text/plain and text/html parts.
	Text, HTML string
	Raw        []byte
}

// Start runs a server on a free loopback port until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{t: t, opts: opts, arrived: make(chan struct{}, 1)}
	if opts.STARTTLS {
		s.serverTLS, s.ClientTLS = certificate(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's GATEHOUSE_SMTP_URL: smtp://[user:password@]127.0.0.1:port, with
// ?tls=required when it offers STARTTLS.
func (s *Server) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.addr}
	if s.opts.Username != "" {
		u.User = url.UserPassword(s.opts.Username, s.opts.Password)
	}
	if s.opts.STARTTLS {
		u.RawQuery = "tls=required"
	}
	return u.String()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Stop closes the server: connections are refused until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, ln := s.srv, s.ln
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	if srv != nil {
		// The listener too: Serve may not have registered it with the server yet.
		_ = ln.Close()
		_ = srv.Close()
	}
}

// Restart serves again on the same address.
func (s *Server) Restart() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly after Stop
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("mailtest: restart on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

func (s *Server) serve(ln net.Listener) {
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s}, nil
	}))
	srv.Domain = "mailtest.local"
	srv.TLSConfig = s.serverTLS
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = discardLog{}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Messages returns the messages accepted so far, in arrival order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.received...)
}

// Wait waits until at least n messages arrived (failing the test after timeout) and returns
// all of them.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if got := s.Messages(); len(got) >= n {
			return got
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("mailtest: %d messages arrived within %v, want %d", len(s.Messages()), timeout, n)
		}
	}
}

// WaitFor waits until a message to address arrived and returns the last one.
func (s *Server) WaitFor(t testing.TB, address string, timeout time.Duration) Message {
	t.Helper()
	deadline := time.After(timeout)
	for {
		msgs := s.Messages()
		for i := len(msgs) - 1; i >= 0; i-- {
			for _, to := range msgs[i].To {
				if strings.EqualFold(to, address) {
					return msgs[i]
				}
			}
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("mailtest: no message to %s within %v (%d others)", address, timeout, len(msgs))
		}
	}
}

// To returns the messages accepted for address.
func (s *Server) To(address string) []Message {
	var out []Message
	for _, m := range s.Messages() {
		for _, to := range m.To {
			if strings.EqualFold(to, address) {
				out = append(out, m)
			}
		}
	}
	return out
}

var linkPattern = regexp.MustCompile(`https?://[^\s"<>]+`)

// Link returns the first link in the text part that starts with prefix (failing the test when
// there is none).
func (m Message) Link(t testing.TB, prefix string) string {
	t.Helper()
	for _, l := range linkPattern.FindAllString(m.Text, -1) {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("mailtest: no link starting with %s in:\n%s", prefix, m.Text)
	return ""
}

func (s *Server) add(m Message) {
	s.mu.Lock()
	s.received = append(s.received, m)
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
}

type session struct {
	s      *Server
	authed bool
	from   string
	to     []string
}

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != ss.s.opts.Username || password != ss.s.opts.Password {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if ss.s.opts.Username != "" && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	for _, r := range ss.s.opts.Reject {
		if strings.EqualFold(r, to) {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"}
		}
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := decode(raw)
	if err != nil {
		return err
	}
	m.From, m.To = ss.from, ss.to
	ss.s.add(m)
	return nil
}

func (ss *session) Reset() { ss.from, ss.to = "", nil }

func (ss *session) Logout() error { return nil }

// decode parses a message and the text/plain and text/html parts of its body.
func decode(raw []byte) (Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	m := Message{Header: msg.Header, Raw: raw}
	dec := new(mime.WordDecoder)
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return Message{}, err
	}
	media, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return Message{}, err
	}
	m.ContentType = media
	if !strings.HasPrefix(media, "multipart/") {
		body, err := decodePart(msg.Body, msg.Header.Get("Content-Transfer-Encoding"))
		m.Text = body
		return m, err
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return Message{}, err
		}
		body, err := decodePart(p, p.Header.Get("Content-Transfer-Encoding"))
		if err != nil {
			return Message{}, err
		}
		switch ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct {
		case "text/plain":
			m.Text = body
		case "text/html":
			m.HTML = body
		}
	}
}

func decodePart(r io.Reader, encoding string) (string, error) {
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, stripNewlines{r})
	}
	b, err := io.ReadAll(r)
	return string(b), err
}

// stripNewlines drops CR and LF, which base64 bodies are wrapped with.
type stripNewlines struct{ r io.Reader }

func (s stripNewlines) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' {
			p[j] = c
			j++
		}
	}
	return j, err
}

// certificate makes a self-signed certificate for 127.0.0.1 and returns the server's TLS
// configuration and a client configuration that trusts it.
func certificate(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}

type discardLog struct{}

func (discardLog) Printf(string, ...any) {}
func (discardLog) Println(...any)        {}
