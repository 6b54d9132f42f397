package fsync

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Policy
		err  bool
	}{
		{"always", Policy{Always: true}, false},
		{" Always ", Policy{Always: true}, false},
		{"1s", Policy{Every: time.Second}, false},
		{"200ms", Policy{Every: 200 * time.Millisecond}, false},
		{"2m", Policy{Every: 2 * time.Minute}, false},
		{"5ms", Policy{}, true},
		{"0", Policy{}, true},
		{"never", Policy{}, true},
		{"", Policy{}, true},
	} {
		got, err := Parse(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestFromEnvAndApply(t *testing.T) {
	t.Setenv(Env, "")
	if p, err := FromEnv(); err != nil || p != Shipped {
		t.Fatalf("unset: %+v, %v; want Shipped", p, err)
	}
	t.Setenv(Env, "bogus")
	if _, err := FromEnv(); err == nil {
		t.Fatal("a bogus APTIX_SYNC was accepted")
	}
	t.Setenv(Env, "always")
	p, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	o := &server.Options{SyncInterval: time.Minute}
	p.Apply(o)
	if !o.SyncAlways || o.SyncInterval != 0 {
		t.Fatalf("always applied as SyncAlways=%v SyncInterval=%s", o.SyncAlways, o.SyncInterval)
	}
	Policy{Every: time.Second}.Apply(o)
	if o.SyncAlways || o.SyncInterval != time.Second {
		t.Fatalf("1s applied as SyncAlways=%v SyncInterval=%s", o.SyncAlways, o.SyncInterval)
	}
}
