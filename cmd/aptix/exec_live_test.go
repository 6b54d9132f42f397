package main

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestLiveTextDropsRelayedRepeats: `aptix exec --stream` prints
// each piece of a re-attached call's text once.
func TestLiveTextDropsRelayedRepeats(t *testing.T) {
	var out bytes.Buffer
	l := &liveText{w: &out}
	for _, d := range []string{
		`{"type":"text","text":"a","upstreamSeq":1}`, `{"type":"text","text":"b","upstreamSeq":2}`,
		`{"type":"text","text":"a","upstreamSeq":1}`, `{"type":"text","text":"b","upstreamSeq":2}`, `{"type":"text","text":"c","upstreamSeq":3}`,
		`{"type":"text","text":"!"}`,
	} {
		l.onDelta(&nats.Msg{Data: []byte(d)})
	}
	if out.String() != "abc!" || l.text() != "abc!" {
		t.Fatalf("printed %q", out.String())
	}
}
