package main

import "testing"

func TestHint(t *testing.T) {
	old := invokedAs
	invokedAs = "bin/aptix"
	defer func() { invokedAs = old }()
	for _, c := range []struct{ server, want string }{
		{"", "bin/aptix exec x"},
		{DefaultNATSURL, "bin/aptix exec x"},
		{"nats://127.0.0.1:4333", "bin/aptix --nats nats://127.0.0.1:4333 exec x"},
	} {
		if got := hint(c.server, "exec", "x"); got != c.want {
			t.Errorf("hint(%q) = %q, want %q", c.server, got, c.want)
		}
	}
	for host, want := range map[string]string{"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "127.0.0.1", "10.0.0.5": "10.0.0.5"} {
		if got := clientHost(host); got != want {
			t.Errorf("clientHost(%q) = %q, want %q", host, got, want)
		}
	}
}
