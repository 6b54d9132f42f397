// Package netguard is the one address check for connections a caller can
// aim: webhook deliveries and MCP servers. It is applied to the address a
// connection actually dials, after DNS resolution, so a name that resolves
// (or re-resolves: DNS rebinding) to a refused address is refused too, and
// to every IPv4 address an IPv6 address embeds (IPv4-mapped and -compatible,
// NAT64, 6to4, Teredo, ISATAP), so 64:ff9b::169.254.169.254 is refused like
// 169.254.169.254. See docs/security.md.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal.
var ErrRefused = errors.New("address refused")

// ErrPrivate is wrapped (with ErrRefused) by a refusal that allowPrivate
// would have accepted: loopback, private, shared and similar ranges.
var ErrPrivate = errors.New("loopback or private address")

// metadata are cloud metadata and host services, refused always: AWS, GCP,
// Azure and Oracle (169.254.169.254, also link-local), AWS over IPv6,
// Alibaba, and Azure's host endpoint (a public-looking address).
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
}

// never are ranges no caller-aimed connection may reach, whatever the
// deployment allows: "this network", benchmarking, reserved and broadcast.
var never = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("240.0.0.0/4"), // includes 255.255.255.255
	netip.MustParsePrefix("100::/64"),    // discard-only
}

// private are ranges refused unless the deployment allows private
// destinations (a local receiver, an MCP server on the same network).
var private = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("192.0.2.0/24"),  // documentation
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("fec0::/10"), // deprecated site-local
	netip.MustParsePrefix("2001:db8::/32"),
}

// Prefixes whose addresses carry an IPv4 address (RFC 6052, 8215, 3056, 4380).
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	ipv4Compat = netip.MustParsePrefix("::/96")
)

// Check is the rule on one resolved address. Refused always: link-local,
// multicast, unspecified, cloud metadata and reserved addresses. Refused
// unless allowPrivate: loopback, private (RFC 1918, unique local), shared
// and documentation ranges. An IPv6 address that embeds an IPv4 address is
// refused when either is.
func Check(a netip.Addr, allowPrivate bool) error {
	a = a.WithZone("")
	if err := check1(a, allowPrivate); err != nil {
		return err
	}
	for _, v4 := range Embedded(a) {
		if err := check1(v4, allowPrivate); err != nil {
			return fmt.Errorf("%s embeds %s: %w", a, v4, err)
		}
	}
	return nil
}

func check1(a netip.Addr, allowPrivate bool) error {
	a = a.Unmap()
	switch {
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified():
		return fmt.Errorf("%w: %s is link-local, multicast or unspecified", ErrRefused, a)
	case contains(metadata, a):
		return fmt.Errorf("%w: %s is a cloud metadata address", ErrRefused, a)
	case inAny(never, a):
		return fmt.Errorf("%w: %s is a reserved address", ErrRefused, a)
	case allowPrivate:
		return nil
	case a.IsLoopback() || a.IsPrivate() || inAny(private, a):
		return fmt.Errorf("%w: %w: %s", ErrRefused, ErrPrivate, a)
	}
	return nil
}

// Embedded returns the IPv4 addresses an IPv6 address carries: IPv4-mapped
// (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96 and
// 64:ff9b:1::/48, last 32 bits), 6to4 (2002:AABB:CCDD::/48), Teredo (server
// in bits 32-63, client as the inverted last 32 bits) and ISATAP (interface
// id 0000:5efe or 0200:5efe followed by the address).
func Embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	var out []netip.Addr
	switch {
	case a.Is4In6():
		out = append(out, last)
	case ipv4Compat.Contains(a) && !a.IsLoopback() && !a.IsUnspecified():
		out = append(out, last)
	case nat64.Contains(a) || nat64Local.Contains(a):
		out = append(out, last)
	case sixToFour.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case teredo.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}),
			netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	if (b[8]|0x02) == 0x02 && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe {
		out = append(out, last) // ISATAP
	}
	return out
}

func contains(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func inAny(list []netip.Prefix, a netip.Addr) bool {
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddress checks a dialed "host:port" whose host is an IP address, as
// a net.Dialer's Control function receives it.
func CheckAddress(address string, allowPrivate bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRefused, address, err)
	}
	return Check(ap.Addr(), allowPrivate)
}

// Dialer is a net.Dialer that checks every address it connects to, after
// resolution and for each address it tries.
func Dialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		return CheckAddress(address, allowPrivate)
	}}
}
