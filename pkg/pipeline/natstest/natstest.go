// Package natstest starts an embedded nats-server with JetStream for tests:
// real streams, consumers and KV, no container, no port conflicts.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Start runs a server for the test's lifetime and returns its client URL.
func Start(t testing.TB) (*server.Server, string) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns, ns.ClientURL()
}

// Connect opens a connection to url, closed at the end of the test.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// JetStream starts a server and returns a connection to it.
func JetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, url := Start(t)
	return Connect(t, url)
}
