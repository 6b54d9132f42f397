package httpapi

import (
	"errors"
	"net/netip"
	"testing"
)

// TestCheckAddr: the SSRF rule on resolved addresses: link-local and cloud
// metadata always refused (in every IPv6 form that embeds them), loopback/private/CGNAT only when allowed, public
// addresses accepted.
func TestCheckAddr(t *testing.T) {
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
		{"fd00:ec2::254", false, false},
		{"0.0.0.0", false, false},
		{"::ffff:127.0.0.1", false, true},
		{"224.0.0.1", false, false},
		// Embedded IPv4 forms of the metadata address (NAT64, 6to4,
		// IPv4-mapped and -compatible): refused like the address itself.
		{"64:ff9b::169.254.169.254", false, false},
		{"2002:a9fe:a9fe::1", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"::169.254.169.254", false, false},
		{"64:ff9b::10.0.0.1", false, true},
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		for _, allow := range []bool{false, true} {
			want := tc.strict
			if allow {
				want = tc.loose
			}
			err := checkAddr(a, allow)
			if (err == nil) != want {
				t.Errorf("%s allowPrivate=%v: err %v, want accepted %v", tc.addr, allow, err, want)
			}
			if err != nil && !errors.Is(err, errRefusedURL) {
				t.Errorf("%s: %v does not wrap errRefusedURL", tc.addr, err)
			}
		}
	}
}
