package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for _, c := range []struct {
		env, gomem string
		want       int64
		wantErr    bool
	}{
		{want: defaultMemoryLimit},
		{env: "2GiB", want: 2 << 30},
		{env: "1500MiB", want: 1500 << 20},
		{env: "123456", want: 123456},
		{env: "off", want: 0},
		{env: "OFF", want: 0},
		{env: "lots", wantErr: true},
		{env: "-1GiB", wantErr: true},
		{gomem: "3GiB", want: 3 << 30},
	} {
		t.Setenv(EnvMemoryLimit, c.env)
		t.Setenv("GOMEMLIMIT", c.gomem)
		if c.gomem != "" {
			// The runtime reads GOMEMLIMIT at start; stand in for it.
			debug.SetMemoryLimit(3 << 30)
		}
		got, err := applyMemoryLimit()
		if (err != nil) != c.wantErr {
			t.Fatalf("%q/%q: err %v", c.env, c.gomem, err)
		}
		if c.wantErr {
			continue
		}
		if got != c.want {
			t.Errorf("%q/%q: limit %d, want %d", c.env, c.gomem, got, c.want)
		}
		runtime := debug.SetMemoryLimit(-1)
		if c.want == 0 && runtime != math.MaxInt64 || c.want != 0 && runtime != c.want {
			t.Errorf("%q/%q: runtime's limit %d", c.env, c.gomem, runtime)
		}
	}
}
