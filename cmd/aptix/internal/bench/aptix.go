package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/stack"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sandboxServer serves a sandbox on a loopback port, as a real upstream.
type sandboxServer struct {
	*sandbox.Server
	URL string
	hs  *http.Server
}

func startSandbox(latency time.Duration) (*sandboxServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sb := sandbox.New(sandbox.Options{Latency: latency, Logger: quiet})
	hs := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return &sandboxServer{Server: sb, URL: "http://" + ln.Addr().String() + "/v1", hs: hs}, nil
}

func (s *sandboxServer) close() { _ = s.hs.Close() }

// upstream is a sandbox the pipeline calls: in this process or its own.
type upstream interface {
	baseURL() string
	requests() (n, maxInFlight int, err error)
	close()
}

func (s *sandboxServer) baseURL() string { return s.URL }

func (s *sandboxServer) requests() (int, int, error) { return s.Requests(), s.MaxInFlight(), nil }

// fixtureChunks are the 8 RAG chunks every benchmark turn carries: real
// source (the first 40 lines of 8 files of net/http from GOROOT), served by a
// fixed searcher so the figures are the pipeline's, not the index's (the
// index has its own benchmark: make bench-retriever).
func fixtureChunks() ([]contracts.RagChunk, error) {
	dir := filepath.Join(goroot(), "src", "net", "http")
	names := []string{"client.go", "server.go", "transport.go", "request.go", "response.go", "header.go", "cookie.go", "fs.go"}
	chunks := make([]contracts.RagChunk, 0, len(names))
	for i, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("benchmark fixture: %w", err)
		}
		lines := strings.SplitN(string(data), "\n", 41)
		chunks = append(chunks, contracts.RagChunk{
			Id: fmt.Sprintf("net-http-%s-1", strings.TrimSuffix(n, ".go")), Path: "src/net/http/" + n,
			StartLine: 1, EndLine: 40, Language: "Go", Content: strings.Join(lines[:min(40, len(lines))], "\n"),
			Score: float64(8 - i),
		})
	}
	return chunks, nil
}

func goroot() string {
	if g := os.Getenv("GOROOT"); g != "" {
		return g
	}
	return runtimeGOROOT()
}

// pipelineRun is one all-in-one Aptix (all four stages on one connection)
// plus a client on its own connection.
type pipelineRun struct {
	set    *profiles.Set
	stop   context.CancelFunc
	done   chan error
	client *nats.Conn
	js     jetstream.JetStream
	comp   *client.Completions
	nc     *nats.Conn
}

func startPipeline(ctx context.Context, url string, sb upstream, chunks []contracts.RagChunk, inFlight int) (*pipelineRun, error) {
	return startPipelineAPI(ctx, url, sb, chunks, inFlight, profiles.APIResponses)
}

// startPipelineAPI is startPipeline with the sandbox profile speaking api:
// with chat-completions the same sandbox is called on its chat endpoint,
// every request and reply translated (docs/backends.md).
func startPipelineAPI(ctx context.Context, url string, sb upstream, chunks []contracts.RagChunk, inFlight int, api profiles.API) (*pipelineRun, error) {
	set := &profiles.Set{}
	set.Put(profiles.Profile{Name: "sandbox", BaseURL: sb.baseURL(), DefaultModel: "sandbox-1", Sandbox: true, API: api,
		AttemptTimeout: 30 * time.Second, TurnTimeout: 60 * time.Second, MaxRetries: 2, MaxConcurrent: inFlight,
		Capabilities: profiles.Capabilities{SupportsPreviousResponseID: api != profiles.APIChatCompletions, ToolMode: profiles.ToolModeNative}})
	set.Default = "sandbox"
	nc, err := nats.Connect(url, nats.Name("aptix bench stages"))
	if err != nil {
		return nil, err
	}
	search := retrieverstage.SearchFunc(func(context.Context, contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
		return contracts.Retrieval{Scope: contracts.RagScopeWorkspace, Chunks: chunks}, nil
	})
	cfg := stack.Config{Profiles: set, Searcher: search, Logger: quiet,
		Subscriber: pipeline.SubscriberConfig{MaxAckPending: inFlight}}
	rctx, cancel := context.WithCancel(ctx)
	p := &pipelineRun{set: set, stop: cancel, done: make(chan error, 1), nc: nc}
	ready := make(chan struct{})
	go func() { p.done <- stack.Run(rctx, nc, cfg, ready) }()
	select {
	case <-ready:
	case err := <-p.done:
		cancel()
		return nil, err
	case <-time.After(30 * time.Second):
		cancel()
		return nil, fmt.Errorf("stages not ready after 30s")
	}
	if p.client, err = nats.Connect(url, nats.Name("aptix bench client")); err != nil {
		return nil, err
	}
	if p.js, err = jetstream.New(p.client); err != nil {
		return nil, err
	}
	if p.comp, err = client.WatchCompletions(ctx, p.js, "*"); err != nil {
		return nil, err
	}
	return p, nil
}

// turn submits one request and waits for its completion; an error result
// counts as a failure.
func (p *pipelineRun) turn(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Turn, error) {
	if err := client.Submit(ctx, p.js, req); err != nil {
		return contracts.Turn{}, err
	}
	t, err := p.comp.Wait(ctx, req.ConversationId, req.TurnId)
	if err != nil {
		return t, err
	}
	if t.Response == nil || t.Response.Kind == contracts.KindError {
		msg := "no response"
		if t.Response != nil {
			msg = t.Response.ErrorCode + ": " + t.Response.ErrorMessage
		}
		return t, fmt.Errorf("turn %s: %s", req.TurnId, msg)
	}
	return t, nil
}

func (p *pipelineRun) close() error {
	p.comp.Stop()
	p.client.Close()
	p.stop()
	err := <-p.done
	p.nc.Close()
	return err
}

// benchRequest is the turn every benchmark sends: a first turn with a boot
// prompt, the DDR tools and an instruction; the 8 chunks come from retrieval.
func benchRequest(run string, i int) contracts.AgentExecuteRequest {
	id := fmt.Sprintf("%s-%d", run, i)
	return contracts.AgentExecuteRequest{
		ConversationId: "bench-" + id, NewConversation: true, TurnId: id, Mode: "ANALYZE",
		Instruction:         "Explain how the HTTP client reuses connections and where timeouts are enforced.",
		ConversationContext: &contracts.ConversationContext{SystemPrompt: "You are a senior Go reviewer. Answer precisely and cite chunk ids."},
		ToolsJson:           benchTools,
		WorkspaceId:         "go",
	}
}

const benchTools = `[{"type":"function","name":"ddr_document","description":"Write a design decision record","parameters":{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}},"required":["title","body"],"additionalProperties":false},"strict":true}]`

// eventSizes reads the stored size of each of a turn's five events.
func eventSizes(ctx context.Context, js jetstream.JetStream, conv, turn string) ([5]int, error) {
	var sizes [5]int
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return sizes, err
	}
	for i, st := range contracts.Stages[1:] {
		m, err := s.GetLastMsgForSubject(ctx, contracts.Subject(st, conv, turn))
		if err != nil {
			return sizes, fmt.Errorf("read %s event: %w", st, err)
		}
		sizes[i+1] = len(m.Data)
		if st == contracts.StageRetrieved {
			// The request left the queue when the retriever took it; every
			// later event records it, so its size is the request's encoding.
			var t contracts.Turn
			if err := json.Unmarshal(m.Data, &t); err != nil {
				return sizes, fmt.Errorf("decode retrieved event: %w", err)
			}
			req, err := json.Marshal(t.Request)
			if err != nil {
				return sizes, err
			}
			sizes[0] = len(req)
		}
	}
	return sizes, nil
}

// envelopeBody reads the /responses body Aptix sent for a turn from its
// enveloped event (later events no longer carry it): the direct floor posts
// exactly these bytes.
func envelopeBody(ctx context.Context, js jetstream.JetStream, conv, turn string) ([]byte, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	m, err := s.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageEnveloped, conv, turn))
	if err != nil {
		return nil, fmt.Errorf("read enveloped event: %w", err)
	}
	var t contracts.Turn
	if err := json.Unmarshal(m.Data, &t); err != nil {
		return nil, fmt.Errorf("decode enveloped event: %w", err)
	}
	if t.Envelope == nil || len(t.Envelope.Body) == 0 {
		return nil, fmt.Errorf("enveloped event of %s has no body", turn)
	}
	return t.Envelope.Body, nil
}
