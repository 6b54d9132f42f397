// Package fsync is when the embedded nats-server forces its file store to
// disk: the one durability setting a single-node Aptix has.
//
// A process crash (kill -9 of aptix up, an OOM kill) loses nothing under
// any policy: the server hands every write to the kernel before it
// acknowledges it, and the kernel keeps it whatever happens to the process.
// What the policy decides is a power loss or a kernel crash: with Always
// every acknowledged write is on disk first (about 0.6 ms per write on a
// typical disk, paid by each of a turn's sequential writes), with an
// interval the writes of at most the last interval can be lost. Shipped is
// the interval, as Redis's appendfsync everysec and NATS's own default
// (2 minutes) choose; a cluster's replicas cover a node's power loss.
package fsync

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Env overrides the policy for aptix up: "always" or an interval (1s, 200ms).
const Env = "APTIX_SYNC"

// Policy is an fsync on every write (Always) or one every Every.
type Policy struct {
	Always bool
	Every  time.Duration
}

// Shipped is what aptix up stores with unless told otherwise.
var Shipped = Policy{Every: time.Second}

// Parse reads "always" or a Go duration of at least 10ms.
func Parse(s string) (Policy, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "always") {
		return Policy{Always: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Policy{}, fmt.Errorf("fsync policy %q: want always or an interval such as 1s", s)
	}
	if d < 10*time.Millisecond {
		return Policy{}, fmt.Errorf("fsync policy %q: an interval under 10ms costs more than always; say always", s)
	}
	return Policy{Every: d}, nil
}

// FromEnv is APTIX_SYNC, or Shipped when it is unset.
func FromEnv() (Policy, error) {
	v := os.Getenv(Env)
	if v == "" {
		return Shipped, nil
	}
	p, err := Parse(v)
	if err != nil {
		return Policy{}, fmt.Errorf("%s: %w", Env, err)
	}
	return p, nil
}

// Apply sets the policy on a server's options.
func (p Policy) Apply(o *server.Options) {
	o.SyncAlways, o.SyncInterval = p.Always, 0
	if !p.Always {
		o.SyncInterval = p.Every
	}
}

// String is the policy as Parse reads it.
func (p Policy) String() string {
	if p.Always {
		return "always"
	}
	return p.Every.String()
}

// Describe says what the policy risks, for banners and tables.
func (p Policy) Describe() string {
	if p.Always {
		return "fsync on every write"
	}
	return "fsync every " + p.Every.String() + " (a power loss can lose the last " + p.Every.String() + "; a process crash loses nothing)"
}
