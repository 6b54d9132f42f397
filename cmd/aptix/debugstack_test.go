package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/stack"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// debugStack is the four stages in-process on an embedded NATS, with two
// sandbox backends ("sandbox" and "other", which answer differently) and a
// retrieval index that can be taken down, for the replay, diff and
// dead-letter tests.
type debugStack struct {
	t         *testing.T
	nc        *nats.Conn
	js        jetstream.JetStream
	sb, other *sandbox.Server
	indexDown atomic.Bool
	searches  atomic.Int64
	// profiles are the stages' backend profiles, for an entrance that
	// builds what the envelope builds.
	profiles *profiles.Set
}

func newDebugStack(t *testing.T) *debugStack {
	t.Helper()
	return newDebugStackWith(t, sandbox.Options{})
}

// newDebugStackWith runs the default "sandbox" backend with these options
// (fault injection, say).
func newDebugStackWith(t *testing.T, sbOpts sandbox.Options) *debugStack {
	t.Helper()
	_, url := natstest.Start(t)
	nc, js := natstest.Connect(t, url)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &debugStack{t: t, nc: nc, js: js}
	sbOpts.Logger = quiet
	d.sb = sandbox.New(sbOpts)
	d.other = sandbox.New(sandbox.Options{Logger: quiet, Script: []string{"Answer from the other backend."}})
	hs, ho := httptest.NewServer(d.sb), httptest.NewServer(d.other)
	t.Cleanup(hs.Close)
	t.Cleanup(ho.Close)
	set := &profiles.Set{}
	for name, u := range map[string]string{"sandbox": hs.URL, "other": ho.URL} {
		set.Put(profiles.Profile{Name: name, BaseURL: u + "/v1", DefaultModel: name + "-1", Sandbox: true,
			AttemptTimeout: time.Second, TurnTimeout: 4 * time.Second, MaxRetries: 1, MaxConcurrent: 16,
			Capabilities: profiles.Capabilities{SupportsPreviousResponseID: true, ToolMode: profiles.ToolModeNative}})
	}
	set.Default = "sandbox"
	d.profiles = set
	search := retrieverstage.SearchFunc(func(_ context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
		d.searches.Add(1)
		if d.indexDown.Load() {
			return contracts.Retrieval{}, errors.New("index unavailable: connection refused")
		}
		return contracts.Retrieval{Query: req.Instruction, Chunks: []contracts.RagChunk{
			{Id: "ck_retry", Content: "func retry() { backoff() }", Path: "retry.go"},
			{Id: "ck_backoff", Content: "func backoff() {}", Path: "backoff.go"},
		}}, nil
	})
	cfg := stack.Config{Profiles: set, Searcher: search, Logger: quiet,
		Subscriber: pipeline.SubscriberConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, DrainTimeout: 3 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); _ = stack.Run(ctx, nc, cfg, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("stages not ready")
	}
	return d
}

func (d *debugStack) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

// turn runs one turn and returns its completion.
func (d *debugStack) turn(req contracts.AgentExecuteRequest) contracts.Turn {
	d.t.Helper()
	ctx := d.ctx()
	if err := client.Submit(ctx, d.js, req); err != nil {
		d.t.Fatal(err)
	}
	t, err := client.Await(ctx, d.js, req.ConversationId, req.TurnId)
	if err != nil {
		d.t.Fatal(err)
	}
	if t.Response == nil {
		d.t.Fatalf("completion without a response: %+v", t)
	}
	return t
}

// count is the number of stored events on a subject filter.
func (d *debugStack) count(filter string) uint64 {
	d.t.Helper()
	s, err := d.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		d.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		d.t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}
