package application

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/aptix-dev/aptix/pkg/netguard"
)

// errRefusedURL marks a webhook URL that no retry can make deliverable.
var errRefusedURL = errors.New("webhook URL refused")

// checkAddr is the webhook rule on a resolved address (pkg/netguard, shared
// with the MCP client), with the setting that relaxes it named.
func checkAddr(a netip.Addr, allowPrivate bool) error {
	if err := netguard.Check(a, allowPrivate); err != nil {
		if errors.Is(err, netguard.ErrPrivate) {
			return fmt.Errorf("%w: %w (APTIX_WEBHOOK_ALLOW_PRIVATE=1 allows it)", errRefusedURL, err)
		}
		return fmt.Errorf("%w: %w", errRefusedURL, err)
	}
	return nil
}

// ssrfSafeClient checks the address each connection actually dials, after
// DNS resolution, so a name that resolves (or re-resolves: DNS rebinding)
// to a refused address is refused. Redirects are not followed.
func ssrfSafeClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", errRefusedURL, address, err)
		}
		return checkAddr(ap.Addr(), allowPrivate)
	}}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = nil // a proxy would dial for us, unchecked
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
