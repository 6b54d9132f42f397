package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is what a tool call produced.
type Result struct {
	// Output is the text content parts joined with "\n"; other parts (images,
	// resources…) appear as their compact JSON.
	Output string
	// IsError is the tool's own report of failure (CallToolResult.IsError):
	// Output is then its message, for the model to read.
	IsError bool
	// Structured is the result's structuredContent, if any.
	Structured json.RawMessage
}

// Call runs a tool on the server named label. args is the JSON object of
// arguments (null or empty mean {}). A tool that fails in its own terms is a
// Result with IsError; a Go error means the tool could not be run: unknown
// server, arguments not an object, the server unreachable or rejecting the
// request (a JSON-RPC error such as an unknown tool), or ctx done (the error
// wraps ctx.Err()).
//
// A session found broken (a stdio child that died, an HTTP server that
// restarted and forgot the session) is reopened and the call sent once more;
// a tool whose request reached the server just before the break may thus run
// twice. Calls on one server may run concurrently.
func (r *Registry) Call(ctx context.Context, label, tool string, args json.RawMessage) (Result, error) {
	s, err := r.server(label)
	if err != nil {
		return Result{}, err
	}
	arguments, err := objectArgs(args)
	if err != nil {
		return Result{}, fmt.Errorf("mcp server %q: tool %q: %w", label, tool, err)
	}
	for attempt := 1; ; attempt++ {
		res, cerr := s.call(ctx, tool, arguments)
		if cerr == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("mcp server %q: tool %q: %w", label, tool, ctx.Err())
		}
		if !cerr.retry || attempt == 2 {
			return Result{}, fmt.Errorf("mcp server %q: tool %q: %w", label, tool, cerr.err)
		}
		s.log.Warn("mcp session broke during a call; reconnecting", "tool", tool, "error", cerr.err)
	}
}

// callError says whether a failed call may be retried on a new session.
type callError struct {
	err   error
	retry bool
}

func (s *server) call(ctx context.Context, tool string, args json.RawMessage) (Result, *callError) {
	cs, err := s.session(ctx)
	if err != nil {
		return Result{}, &callError{err: err} // connecting already failed: no second try
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() != nil || isServerAnswer(err) {
			return Result{}, &callError{err: err}
		}
		s.drop(cs)
		return Result{}, &callError{err: err, retry: true}
	}
	out, err := toResult(res)
	if err != nil {
		return Result{}, &callError{err: err}
	}
	return out, nil
}

// objectArgs checks that args is a JSON object; null or nothing means {}.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, fmt.Errorf("arguments must be a JSON object")
	}
	return json.RawMessage(trimmed), nil
}

func toResult(res *sdk.CallToolResult) (Result, error) {
	out := Result{IsError: res.IsError}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			return Result{}, fmt.Errorf("encode %T content: %w", c, err)
		}
		parts = append(parts, string(b))
	}
	out.Output = strings.Join(parts, "\n")
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return Result{}, fmt.Errorf("encode structuredContent: %w", err)
		}
		out.Structured = b
	}
	return out, nil
}
