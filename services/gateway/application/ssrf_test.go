package application

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestCheckAddr: the webhook rule is pkg/netguard's (whose table test
// covers every address form); what the gateway adds is that a refusal is
// errRefusedURL, so no retry is spent on it, and that a private address
// names the setting that allows it.
func TestCheckAddr(t *testing.T) {
	cases := []struct {
		addr         string
		allowPrivate bool
		refused      bool
		hint         bool // the error names APTIX_WEBHOOK_ALLOW_PRIVATE
	}{
		{"93.184.216.34", false, false, false},
		{"10.1.2.3", false, true, true},
		{"10.1.2.3", true, false, false},
		{"169.254.169.254", true, true, false},
		{"64:ff9b::169.254.169.254", true, true, false},
	}
	for _, tc := range cases {
		err := checkAddr(netip.MustParseAddr(tc.addr), tc.allowPrivate)
		if (err != nil) != tc.refused {
			t.Errorf("%s allowPrivate=%v: err %v, want refused %v", tc.addr, tc.allowPrivate, err, tc.refused)
			continue
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, errRefusedURL) {
			t.Errorf("%s: %v does not wrap errRefusedURL", tc.addr, err)
		}
		if got := strings.Contains(err.Error(), "APTIX_WEBHOOK_ALLOW_PRIVATE"); got != tc.hint {
			t.Errorf("%s: %q names the setting: %v, want %v", tc.addr, err, got, tc.hint)
		}
	}
}
