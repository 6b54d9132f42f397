package httpapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// errRefusedURL marks a webhook URL that no retry can make deliverable.
var errRefusedURL = errors.New("webhook URL refused")

// metadataAddrs are cloud metadata services, refused always.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// checkAddr is the SSRF rule on a resolved address: link-local, multicast,
// unspecified and cloud metadata addresses are refused always; loopback and
// private ranges only with allowPrivate.
func checkAddr(a netip.Addr, allowPrivate bool) error {
	a = a.Unmap()
	switch {
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is link-local, multicast or unspecified", errRefusedURL, a)
	case containsAddr(metadataAddrs, a):
		return fmt.Errorf("%w: %s is a cloud metadata address", errRefusedURL, a)
	case (a.IsLoopback() || a.IsPrivate() || isSharedOrReserved(a)) && !allowPrivate:
		return fmt.Errorf("%w: %s is loopback or private (APTIX_WEBHOOK_ALLOW_PRIVATE=1 allows it)", errRefusedURL, a)
	}
	return nil
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

// isSharedOrReserved: carrier-grade NAT (100.64.0.0/10) and 0.0.0.0/8.
func isSharedOrReserved(a netip.Addr) bool {
	return netip.MustParsePrefix("100.64.0.0/10").Contains(a) || netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

// ssrfSafeClient checks the address each connection actually dials, after
// DNS resolution, so a name that resolves (or re-resolves: DNS rebinding)
// to a refused address is refused. Redirects are not followed.
func ssrfSafeClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errRefusedURL, address, err)
		}
		return checkAddr(ap.Addr(), allowPrivate)
	}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil // a proxy would dial for us, unchecked
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
