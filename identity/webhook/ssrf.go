package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// ErrPrivateAddress is a receiver address on loopback, a private or link-local network, or a
// cloud metadata address: refused unless private addresses are allowed.
var ErrPrivateAddress = errors.New("resolves to a loopback, private, link-local or metadata address")

// ErrNotHTTPS is a receiver URL whose scheme is not https (http is allowed with private
// addresses, for development).
var ErrNotHTTPS = errors.New("must be an https URL")

// blocked lists the networks a receiver may not be on, beyond what netip's predicates cover.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),         // "this" network
	netip.MustParsePrefix("100.64.0.0/10"),     // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),      // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),     // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),       // reserved
	netip.MustParsePrefix("64:ff9b::/96"),      // NAT64 (may reach IPv4 private space)
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
}

// PublicAddress reports whether a receiver may be at ip: not loopback, private, link-local
// (169.254.0.0/16 holds the cloud metadata address 169.254.169.254), multicast, unspecified
// or another special-purpose block.
func PublicAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Guard checks receiver URLs and the addresses a delivery connects to.
type Guard struct {
	// AllowPrivate allows private addresses and http (GATEHOUSE_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// Resolver resolves host names (net.DefaultResolver when nil).
	Resolver *net.Resolver
}

// CheckURL checks a receiver URL at creation: absolute https (or http with AllowPrivate),
// no user info or fragment, and, unless AllowPrivate, a host whose every address is public.
// The error says what is wrong without echoing the URL.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return errors.New("must be an absolute URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowPrivate:
	default:
		return ErrNotHTTPS
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	if u.Fragment != "" {
		return errors.New("must not have a fragment")
	}
	if g.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !PublicAddress(ip) {
			return ErrPrivateAddress
		}
		return nil
	}
	addrs, err := g.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return errors.New("does not resolve")
	}
	for _, ip := range addrs {
		if !PublicAddress(ip) {
			return ErrPrivateAddress
		}
	}
	return nil
}

func (g Guard) resolver() *net.Resolver {
	if g.Resolver != nil {
		return g.Resolver
	}
	return net.DefaultResolver
}

// Control is a net.Dialer Control hook that refuses a connection to an address that is not
// public (unless AllowPrivate): it runs on the resolved address right before connecting, so
// a name that resolved to a public address at creation and to a private one now (DNS
// rebinding) is refused.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: dial %s: %w", network, err)
	}
	if !PublicAddress(ap.Addr()) {
		return fmt.Errorf("webhook: dial: the receiver %w", ErrPrivateAddress)
	}
	return nil
}
