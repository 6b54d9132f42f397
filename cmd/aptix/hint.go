package main

import (
	"os"
	"strings"
)

// invokedAs is the binary as the user ran it (os.Args[0]: bin/aptix,
// ./aptix or aptix), so a command printed as a hint can be pasted as is:
// `aptix exec` does not run when the binary is bin/aptix and not on PATH.
var invokedAs = os.Args[0]

// hint returns a command line to suggest: the binary as invoked, --nats
// server when server is not the default one (a hint without it would talk
// to another server, or to none), then args.
func hint(server string, args ...string) string {
	parts := []string{invokedAs}
	if server != "" && server != DefaultNATSURL {
		parts = append(parts, "--nats", server)
	}
	return strings.Join(append(parts, args...), " ")
}

// clientServer is the server a client command talks to, for its hints.
func clientServer() string { return serverURL() }

// clientHost is the host a client dials to reach a server listening on
// host: the loopback address for an unspecified one ("", 0.0.0.0, ::).
func clientHost(host string) string {
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		return "127.0.0.1"
	}
	return host
}

// listening tells, for the banner, where the server listens when that is
// not the address clients are given (--listen 0.0.0.0:4222).
func listening(clientURL, listen string) string {
	if clientURL == "nats://"+listen {
		return ""
	}
	return "listening on " + listen + "; "
}
