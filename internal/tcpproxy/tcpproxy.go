// Package tcpproxy is a loopback TCP proxy for tests: the one address through which Gatehouse
// reaches "the primary" in the supported failover topology (docs/failover.md). It forwards
// each accepted connection to the current target, which can be switched at run time (to a
// promoted standby); it can drop every forwarded connection at once and refuse new ones, as a
// dead host or a proxy failing over does.
package tcpproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards connections accepted on Addr to Target. Its zero value is not usable: call
// Listen. All methods are safe for concurrent use.
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	refuse  bool
	closed  bool
	conns   map[net.Conn]struct{}
	accepts int
}

// Listen starts a proxy on addr ("127.0.0.1:0" for any free port) forwarding to target.
func Listen(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address new connections are forwarded to.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// Switch forwards new connections to target from now on. Connections already forwarded keep
// their old target: call DropAll as well to move every client, as a failover does.
func (p *Proxy) Switch(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Refuse makes the proxy close every connection it accepts at once (refuse true), as a host
// that is down does, or forward them again (refuse false). The listening port stays bound, so
// the address never changes.
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	p.refuse = refuse
	p.mu.Unlock()
}

// DropAll closes every forwarded connection, both sides, and returns how many client
// connections it closed. Clients see their connection end (EOF or a reset) mid-conversation.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.Close()
		n++
	}
	clear(p.conns)
	return n / 2
}

// Accepted is how many connections the proxy has accepted so far (forwarded or refused).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Close stops listening and drops every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropAll()
	return err
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		refuse, target, closed := p.refuse, p.target, p.closed
		p.mu.Unlock()
		if refuse || closed {
			c.Close()
			continue
		}
		go p.forward(c, target)
	}
}

// forward dials target for the client connection c and copies both ways until either side
// ends or DropAll closes them.
func (p *Proxy) forward(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.refuse || p.closed {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	done := func() {
		c.Close()
		up.Close()
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
	}
	go func() { _, _ = io.Copy(up, c); done() }()
	_, _ = io.Copy(c, up)
	done()
}
