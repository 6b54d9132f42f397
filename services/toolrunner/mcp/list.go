package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// defaultSchema is the input schema of a tool that declares none usable.
var defaultSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// listTools returns the server's tools from the cache while it is fresh, else
// asks the server. Only one tools/list runs at a time per server; the others
// wait for it and take its result from the cache.
func (s *server) listTools(ctx context.Context) ([]Tool, error) {
	if tools, ok := s.cached(); ok {
		return tools, nil
	}
	select {
	case s.listing <- struct{}{}:
		defer func() { <-s.listing }()
	case <-ctx.Done():
		return nil, fmt.Errorf("mcp server %q: list tools: %w", s.label, ctx.Err())
	}
	if tools, ok := s.cached(); ok {
		return tools, nil
	}
	tools, err := s.fetchTools(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: list tools: %w", s.label, err)
	}
	return tools, nil
}

func (s *server) cached() ([]Tool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools != nil && time.Since(s.toolsAt) < s.opts.TTL {
		return slices.Clone(s.tools), true // callers may reorder or append
	}
	return nil, false
}

func (s *server) fetchTools(ctx context.Context) ([]Tool, error) {
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	gen := s.gen // read after session(): connecting bumps it
	s.mu.Unlock()

	tools := []Tool{} // non-nil: nil means "not cached"
	if res := cs.InitializeResult(); res != nil && res.Capabilities != nil && res.Capabilities.Tools == nil {
		s.store(gen, tools) // a server without the tools capability has none
		return tools, nil
	}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !isServerAnswer(err) {
				s.drop(cs) // the session broke: reconnect on the next use
			}
			return nil, err
		}
		tools = append(tools, Tool{
			Server:      s.label,
			Name:        t.Name,
			Description: t.Description,
			InputSchema: normalizeSchema(t.InputSchema),
		})
	}
	s.store(gen, tools)
	return tools, nil
}

// store caches tools unless list_changed arrived (or the session changed)
// while they were being listed: that list may predate the change.
func (s *server) store(gen uint64, tools []Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == gen {
		s.tools, s.toolsAt = slices.Clone(tools), time.Now()
	}
}

// isServerAnswer reports whether err is a JSON-RPC error the server sent, as
// opposed to a failure to reach it: the session is still fine. The SDK
// reports a request its HTTP transport could not deliver (a kept-alive
// connection the restarted server closed: EOF) as a JSON-RPC error too,
// code -32005 "rejected by transport"; that one is not an answer.
func isServerAnswer(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code != codeRejectedByTransport
}

// codeRejectedByTransport is the go-sdk's jsonrpc2.ErrRejected code.
const codeRejectedByTransport = -32005

// normalizeSchema makes a tool's input schema acceptable as the parameters of
// a function tool: a JSON object with "type":"object" and "properties".
// Servers may omit either; a schema of another type is replaced.
func normalizeSchema(schema any) json.RawMessage {
	if schema == nil {
		return defaultSchema
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return defaultSchema
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return defaultSchema
	}
	changed := false
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
		changed = true
	}
	if !bytes.Equal(bytes.TrimSpace(m["type"]), []byte(`"object"`)) {
		// MCP requires an object schema and OpenAI rejects a whole request
		// over one tool whose parameters are not one.
		return defaultSchema
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = json.RawMessage(`{}`)
		changed = true
	}
	if !changed {
		return raw
	}
	if out, err := json.Marshal(m); err == nil {
		return out
	}
	return defaultSchema
}
