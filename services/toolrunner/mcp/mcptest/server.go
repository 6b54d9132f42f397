// Package mcptest is a real MCP server (official go-sdk) for tests, over
// streamable HTTP or stdio, with tools that add, sleep, fail and echo. It
// counts calls per tool so a test can prove a tool was not run twice.
package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioEnv is the environment variable that makes RunStdioIfAsked serve
// stdio: a test binary re-executed with StdioEnv=1 becomes a stdio MCP server.
const StdioEnv = "APTIX_MCPTEST_STDIO"

// FailMessage is the text of the fail tool's error result.
const FailMessage = "fail: this tool always fails"

// Server is an MCP server with the test tools.
type Server struct {
	// URL is the MCP endpoint when the server was made by NewHTTP.
	URL string
	// MCP is the go-sdk server, for tests that need more than AddTool.
	MCP *sdk.Server

	mu    sync.Mutex
	calls map[string]int
}

// New returns a server with the tools add, sleep, fail and echo, not yet
// served: use Handler, NewHTTP or ServeStdio.
func New() *Server {
	s := &Server{
		MCP:   sdk.NewServer(&sdk.Implementation{Name: "aptix-mcptest", Version: "0.1.0"}, nil),
		calls: map[string]int{},
	}

	type addIn struct {
		A float64 `json:"a" jsonschema:"the first addend"`
		B float64 `json:"b" jsonschema:"the second addend"`
	}
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
			s.count("add")
			return text(strconv.FormatFloat(in.A+in.B, 'f', -1, 64)), nil, nil
		})

	type sleepIn struct {
		Ms int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
	}
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "sleep", Description: "Sleeps, then says for how long."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in sleepIn) (*sdk.CallToolResult, any, error) {
			s.count("sleep")
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
				return text(fmt.Sprintf("slept %dms", in.Ms)), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})

	sdk.AddTool(s.MCP, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			s.count("fail")
			res := text(FailMessage)
			res.IsError = true
			return res, nil, nil
		})

	type echoIn struct {
		Text string `json:"text" jsonschema:"the text to return"`
	}
	sdk.AddTool(s.MCP, &sdk.Tool{Name: "echo", Description: "Returns its text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			s.count("echo")
			return text(in.Text), nil, nil
		})
	return s
}

// NewHTTP serves a new Server over streamable HTTP with sessions (clients
// negotiate protocol 2025-11-25) on a local port; URL is its endpoint. The
// server is closed when the test ends.
func NewHTTP(t testing.TB) *Server {
	t.Helper()
	s := New()
	s.URL = serve(t, s.Handler())
	return s
}

// NewStatelessHTTP is NewHTTP without sessions (see StatelessHandler).
func NewStatelessHTTP(t testing.TB) *Server {
	t.Helper()
	s := New()
	s.URL = serve(t, s.StatelessHandler())
	return s
}

func serve(t testing.TB, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections() // streams left open must not stall Close
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// Handler serves the MCP streamable HTTP transport (on any path), with
// sessions: clients negotiate protocol 2025-11-25.
func (s *Server) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.MCP }, nil)
}

// StatelessHandler serves streamable HTTP without sessions, the way servers
// of protocol 2026-07-28 and later work: every request stands alone and
// notifications travel on a subscriptions/listen stream. A client that
// gives up on a call cancels the tool's context, as with sessions.
func (s *Server) StatelessHandler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.MCP },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
}

// ServeStdio runs a new Server over stdin/stdout until the client closes
// stdin or ctx ends.
func ServeStdio(ctx context.Context) error {
	err := New().MCP.Run(ctx, &sdk.StdioTransport{})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("mcptest: serve stdio: %w", err)
	}
	return nil
}

// RunStdioIfAsked serves stdio and exits the process when StdioEnv is "1";
// otherwise it returns at once. Call it first in TestMain.
func RunStdioIfAsked() {
	if os.Getenv(StdioEnv) != "1" {
		return
	}
	if err := ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// AddTool adds (or replaces) a tool that accepts any object and answers with
// what fn returns; an error from fn becomes a tool error result. Connected
// clients receive notifications/tools/list_changed.
func (s *Server) AddTool(name, description string, fn func(ctx context.Context, args json.RawMessage) (string, error)) {
	s.MCP.AddTool(&sdk.Tool{Name: name, Description: description, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.count(name)
			out, err := fn(ctx, req.Params.Arguments)
			if err != nil {
				res := text(err.Error())
				res.IsError = true
				return res, nil
			}
			return text(out), nil
		})
}

// Calls returns how many times the named tool has been called.
func (s *Server) Calls(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func (s *Server) count(name string) {
	s.mu.Lock()
	s.calls[name]++
	s.mu.Unlock()
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}
