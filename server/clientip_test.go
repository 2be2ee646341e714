package server

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientIP(t *testing.T) {
	extract := ipExtractor(Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	cases := []struct {
		name, peer, xff, want string
	}{
		{"untrusted peer: header ignored", "203.0.113.9:4000", "198.51.100.1", "203.0.113.9"},
		{"trusted proxy: client from header", "10.1.2.3:4000", "198.51.100.1", "198.51.100.1"},
		{"proxy chain: right-most untrusted hop", "10.1.2.3:4000", "6.6.6.6, 198.51.100.1, 10.9.9.9", "198.51.100.1"},
		{"all hops trusted: the furthest hop", "10.1.2.3:4000", "10.2.2.2", "10.2.2.2"},
		{"loopback peer is not trusted by default", "127.0.0.1:4000", "198.51.100.1", "127.0.0.1"},
		{"private peer is not trusted by default", "192.168.1.1:4000", "198.51.100.1", "192.168.1.1"},
		{"garbage header: the peer", "10.1.2.3:4000", "not-an-ip", "10.1.2.3"},
		{"ipv6 loopback proxy", "[::1]:4000", "2001:db8::7", "2001:db8::7"},
		{"no header", "10.1.2.3:4000", "", "10.1.2.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := extract(r); got != tc.want {
				t.Fatalf("clientIP = %q, want %q", got, tc.want)
			}
		})
	}
}
