package netguard

import (
	"errors"
	"net/netip"
	"net/url"
	"testing"
)

// TestCheck: link-local, metadata and reserved addresses are refused
// always, in every form an IPv6 address can carry them (mapped, compatible,
// NAT64, 6to4, Teredo, ISATAP); loopback and private ones only without
// allowPrivate; public ones never.
func TestCheck(t *testing.T) {
	cases := []struct {
		addr          string
		strict, loose bool // accepted without / with allowPrivate
	}{
		{"93.184.216.34", true, true},
		{"2606:2800:220:1:248:1893:25c8:1946", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"192.168.0.10", false, true},
		{"172.16.5.4", false, true},
		{"100.64.1.1", false, true},
		{"fd12::1", false, true},
		{"169.254.169.254", false, false},
		{"169.254.1.1", false, false},
		{"fe80::1", false, false},
		{"fe80::1%eth0", false, false},
		{"fd00:ec2::254", false, false},
		{"100.100.100.200", false, false},
		{"168.63.129.16", false, false},
		{"0.0.0.0", false, false},
		{"0.1.2.3", false, false},
		{"255.255.255.255", false, false},
		{"240.0.0.1", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		// IPv4-mapped and -compatible.
		{"::ffff:127.0.0.1", false, true},
		{"::ffff:169.254.169.254", false, false},
		{"::ffff:93.184.216.34", true, true},
		{"::169.254.169.254", false, false},
		{"::10.0.0.1", false, true},
		// NAT64, well-known and local-use prefixes.
		{"64:ff9b::169.254.169.254", false, false},
		{"64:ff9b::a9fe:a9fe", false, false},
		{"64:ff9b::10.0.0.1", false, true},
		{"64:ff9b::127.0.0.1", false, true},
		{"64:ff9b::93.184.216.34", true, true},
		{"64:ff9b:1::a9fe:a9fe", false, false},
		// 6to4: 2002:a9fe:a9fe::/48 is 169.254.169.254's.
		{"2002:a9fe:a9fe::1", false, false},
		{"2002:a9fe:a9fe:1:2:3:4:5", false, false},
		{"2002:0a00:0001::1", false, true},
		{"2002:5db8:d822::1", true, true},
		// Teredo: client 169.254.169.254 is stored inverted (5601:5601).
		{"2001:0:4136:e378:8000:63bf:5601:5601", false, false},
		{"2001:0:a9fe:a9fe::1", false, false},
		// ISATAP with a global prefix.
		{"2001:470:1::5efe:a9fe:a9fe", false, false},
		{"2001:470:1:0:200:5efe:a9fe:a9fe", false, false},
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		for _, allow := range []bool{false, true} {
			want := tc.strict
			if allow {
				want = tc.loose
			}
			err := Check(a, allow)
			if (err == nil) != want {
				t.Errorf("%s allowPrivate=%v: err %v, want accepted %v", tc.addr, allow, err, want)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("%s: %v does not wrap ErrRefused", tc.addr, err)
			}
			if err != nil && errors.Is(err, ErrPrivate) != (tc.loose && !allow) {
				t.Errorf("%s allowPrivate=%v: %v: ErrPrivate must mark exactly what allowPrivate admits", tc.addr, allow, err)
			}
		}
	}
}

// TestCheckAddress: the dialer's form, with a port and an IPv6 zone.
func TestCheckAddress(t *testing.T) {
	for addr, ok := range map[string]bool{
		"93.184.216.34:443":        true,
		"[64:ff9b::a9fe:a9fe]:80":  false,
		"[fe80::1%lo]:80":          false,
		"[2002:a9fe:a9fe::1]:80":   false,
		"127.0.0.1:80":             false,
		"not-an-address:80":        false,
		"[2606:2800:220:1::1]:443": true,
	} {
		if err := CheckAddress(addr, false); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", addr, err, ok)
		}
	}
}

// TestWithin: paths compare by cleaned, unescaped segment; anything a
// server might read as another path is refused.
func TestWithin(t *testing.T) {
	base := "http://127.0.0.1:9600/mcp"
	for raw, want := range map[string]bool{
		"http://127.0.0.1:9600/mcp":              true,
		"http://127.0.0.1:9600/mcp/":             true,
		"http://127.0.0.1:9600/mcp/tools":        true,
		"http://127.0.0.1:9600/mcp?x=1":          true,
		"http://127.0.0.1:9600/mcpevil":          false,
		"http://127.0.0.1:9600/mcp/../admin":     false,
		"http://127.0.0.1:9600/mcp/%2e%2e/admin": false,
		"http://127.0.0.1:9600/mcp/%2E%2E/admin": false,
		"http://127.0.0.1:9600/mcp/./x":          false,
		"http://127.0.0.1:9600/mcp%2f..%2fadmin": false,
		"http://127.0.0.1:9600/mcp%2Fx":          false,
		`http://127.0.0.1:9600/mcp/..%5cadmin`:   false,
		"http://127.0.0.1:9600/admin":            false,
		"http://127.0.0.1:9600/":                 false,
		"https://127.0.0.1:9600/mcp":             false,
		"http://127.0.0.1:9601/mcp":              false,
		"http://127.0.0.1/mcp":                   false,
		"http://u:p@127.0.0.1:9600/mcp":          false,
		"http://127.0.0.1:9600@10.0.0.1/mcp":     false,
		"http://127.0.0.1.evil.net:9600/mcp":     false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			if want {
				t.Errorf("%s: %v", raw, err)
			}
			continue
		}
		b, _ := url.Parse(base)
		if got := Within(u, b); got != want {
			t.Errorf("Within(%s, %s) = %v, want %v", raw, base, got, want)
		}
	}
	// Default ports and case.
	u, _ := url.Parse("HTTPS://MCP.Corp.com:443/Tools/x")
	b, _ := url.Parse("https://mcp.corp.com/Tools")
	if !Within(u, b) {
		t.Error("an explicit default port or upper-case host is not within")
	}
	b, _ = url.Parse("https://mcp.corp.com/")
	if !Within(u, b) {
		t.Error("every path is within the root")
	}
}
