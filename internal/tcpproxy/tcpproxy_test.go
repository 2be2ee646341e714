package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// namedServer answers every line it reads with its name and the line.
func namedServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(name + ":" + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return client{c, bufio.NewReader(c)}
}

// ask sends line and returns the answer, or "" and the error when the connection ended.
func (cl client) ask(line string) (string, error) {
	_ = cl.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := cl.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return cl.r.ReadString('\n')
}

// TestProxySwitchDropRefuse: connections reach the target; Switch moves only new connections;
// DropAll ends the old ones (the client reads an error); Refuse closes new connections at once
// and, lifted, forwards again, all on the same address.
func TestProxySwitchDropRefuse(t *testing.T) {
	a, b := namedServer(t, "a"), namedServer(t, "b")
	p, err := Listen("127.0.0.1:0", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	old := dial(t, p.Addr())
	if got, err := old.ask("1"); got != "a:1\n" || err != nil {
		t.Fatalf("through the proxy: %q, %v; want a:1", got, err)
	}
	p.Switch(b)
	if p.Target() != b {
		t.Fatalf("Target() = %s, want %s", p.Target(), b)
	}
	if got, _ := old.ask("2"); got != "a:2\n" {
		t.Fatalf("an existing connection after Switch: %q, want a:2 (it keeps its target)", got)
	}
	moved := dial(t, p.Addr())
	if got, _ := moved.ask("3"); got != "b:3\n" {
		t.Fatalf("a new connection after Switch: %q, want b:3", got)
	}

	if n := p.DropAll(); n != 2 {
		t.Errorf("DropAll closed %d connections, want 2", n)
	}
	for _, cl := range []client{old, moved} {
		if got, err := cl.ask("4"); err == nil {
			t.Errorf("a dropped connection still answers %q", got)
		}
	}

	p.Refuse(true)
	refused := dial(t, p.Addr())
	if got, err := refused.ask("5"); err == nil {
		t.Errorf("a connection while refusing answers %q", got)
	}
	p.Refuse(false)
	again := dial(t, p.Addr())
	if got, err := again.ask("6"); got != "b:6\n" || err != nil {
		t.Fatalf("after Refuse(false): %q, %v; want b:6", got, err)
	}
	if p.Accepted() != 4 {
		t.Errorf("Accepted() = %d, want 4", p.Accepted())
	}
}
