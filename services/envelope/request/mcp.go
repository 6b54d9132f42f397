package request

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/netguard"
)

// Server-side tool loop settings (docs/architecture.md#the-server-side-tool-loop).
const (
	// EnvMCPDefaultAll is read by the gateway too (pipeline.EnvMCPDefaultAll):
	// with it set, no turn skips the envelope.
	EnvMCPDefaultAll = "APTIX_MCP_DEFAULT_ALL"
	EnvMaxToolDepth  = "APTIX_MAX_TOOL_DEPTH"
	EnvMCPAllowURLs  = "APTIX_MCP_ALLOW_URLS"
	// DefaultMaxToolDepth is the seed's depth limit; 1–15 are valid.
	DefaultMaxToolDepth = 8
)

// MCPOptions say how a turn's mcp tools become a server-side tool loop.
type MCPOptions struct {
	// DefaultAll offers every configured MCP server to a request with no tools at all.
	DefaultAll bool
	// MaxDepth bounds the rounds of server-side calls (default 8, 1–15).
	MaxDepth int
	// AllowURLs are the URL prefixes a client may name as server_url; none by default.
	AllowURLs []string
}

// MCPOptionsFromEnv reads APTIX_MCP_DEFAULT_ALL, APTIX_MAX_TOOL_DEPTH and APTIX_MCP_ALLOW_URLS.
func MCPOptionsFromEnv() (MCPOptions, error) {
	o := MCPOptions{MaxDepth: DefaultMaxToolDepth}
	if v := os.Getenv(EnvMCPDefaultAll); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("%s=%q: want true or false", EnvMCPDefaultAll, v)
		}
		o.DefaultAll = b
	}
	if v := os.Getenv(EnvMaxToolDepth); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 15 {
			return o, fmt.Errorf("%s=%q: want a number from 1 to 15", EnvMaxToolDepth, v)
		}
		o.MaxDepth = n
	}
	for _, u := range strings.Split(os.Getenv(EnvMCPAllowURLs), ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.AllowURLs = append(o.AllowURLs, u)
		}
	}
	return o, nil
}

var serverLabel = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ServerSide takes the mcp tools out of an encoded /responses body (Build
// does the same to the body it builds, Input.MCP): Aptix runs them (the
// toolrunner lists each server's tools and offers them to the model as
// function tools), so the upstream never sees them. It returns the body
// without them and the turn's tool loop, or a nil loop when the turn has
// no server-side tools. fields are the client's passthrough fields
// (max_tool_calls bounds the loop's calls).
func ServerSide(body, fields json.RawMessage, o MCPOptions) (json.RawMessage, *contracts.ToolLoop, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, nil, fmt.Errorf("read the built body: %w", err)
	}
	var raws []json.RawMessage
	if raw, ok := b["tools"]; ok {
		if err := json.Unmarshal(raw, &raws); err != nil {
			return nil, nil, &tooldef.InvalidError{Field: "tools", Index: -1, Err: err}
		}
	}
	tools := make([]tooldef.Tool, len(raws))
	for i, raw := range raws {
		var t struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &t)
		tools[i] = tooldef.Tool{Type: t.Type, Raw: raw}
	}
	loop, rest, err := toolLoop(tools, fieldsMap(fields)["max_tool_calls"], o)
	if loop == nil || err != nil {
		return body, loop, err
	}
	delete(b, "tools")
	if len(rest) > 0 {
		kept := make([]json.RawMessage, len(rest))
		for i, t := range rest {
			kept[i] = t.Raw // each as the body had it
		}
		if b["tools"], err = json.Marshal(kept); err != nil {
			return nil, nil, fmt.Errorf("encode tools: %w", err)
		}
	}
	out, err := marshal(b)
	if err != nil {
		return nil, nil, fmt.Errorf("encode body: %w", err)
	}
	return out, loop, nil
}

// toolLoop is the server-side tool loop of the tools a body sends: one
// server for each mcp tool (read from its verbatim definition), or every
// configured server for a request without tools when o.DefaultAll; nil
// when there is none. rest are the tools left for the upstream. maxCalls
// is the client's max_tool_calls.
func toolLoop(tools []tooldef.Tool, maxCalls json.RawMessage, o MCPOptions) (loop *contracts.ToolLoop, rest []tooldef.Tool, err error) {
	if o.MaxDepth == 0 {
		o.MaxDepth = DefaultMaxToolDepth
	}
	loop = &contracts.ToolLoop{MaxDepth: o.MaxDepth}
	for i, tool := range tools {
		if tool.Type != "mcp" {
			rest = append(rest, tool)
			continue
		}
		var t struct {
			ServerLabel     string          `json:"server_label"`
			ServerURL       string          `json:"server_url"`
			ConnectorID     string          `json:"connector_id"`
			AllowedTools    json.RawMessage `json:"allowed_tools"`
			RequireApproval json.RawMessage `json:"require_approval"`
		}
		if json.Unmarshal(tool.Raw, &t) != nil {
			rest = append(rest, tool) // not an mcp tool Aptix can read: the upstream judges it
			continue
		}
		use, err := mcpUse(t.ServerLabel, t.ServerURL, t.ConnectorID, t.AllowedTools, t.RequireApproval, o)
		if err != nil {
			return nil, nil, &tooldef.InvalidError{Field: "tools", Index: i, Err: err}
		}
		for _, prev := range loop.Servers {
			if prev.Label == use.Label {
				return nil, nil, &tooldef.InvalidError{Field: "tools", Index: i, Err: fmt.Errorf("mcp server_label %q appears twice: each mcp tool names one server", use.Label)}
			}
		}
		loop.Servers = append(loop.Servers, use)
	}
	if len(loop.Servers) == 0 {
		if !o.DefaultAll || len(tools) > 0 {
			return nil, tools, nil
		}
		loop.AllServers = true
	}
	if len(maxCalls) > 0 && string(maxCalls) != "null" {
		if err := json.Unmarshal(maxCalls, &loop.MaxCalls); err != nil || loop.MaxCalls < 1 {
			return nil, nil, &InvalidRequestError{Field: "max_tool_calls", Reason: "must be a positive integer"}
		}
	}
	return loop, rest, nil
}

func mcpUse(label, url, connector string, allowed, approval json.RawMessage, o MCPOptions) (contracts.MCPServerUse, error) {
	use := contracts.MCPServerUse{Label: label, URL: url}
	switch {
	case connector != "":
		return use, fmt.Errorf("mcp connector_id %q: Aptix runs only MCP servers its deployment configures (APTIX_MCP_CONFIG)", connector)
	case !serverLabel.MatchString(label):
		return use, fmt.Errorf("mcp tool needs a server_label of 1-64 characters [A-Za-z0-9_-] naming a configured server, got %q", label)
	case url != "" && !allowedURL(url, o.AllowURLs):
		return use, fmt.Errorf("mcp server_url %q refused: a client-supplied MCP server URL is allowed only where APTIX_MCP_ALLOW_URLS lists its prefix; name a configured server by server_label instead", url)
	}
	if len(allowed) > 0 && string(allowed) != "null" {
		var names []string
		var filter struct {
			ToolNames []string `json:"tool_names"`
		}
		if json.Unmarshal(allowed, &names) != nil {
			if err := json.Unmarshal(allowed, &filter); err != nil {
				return use, fmt.Errorf("mcp allowed_tools: want a list of tool names or {\"tool_names\": [...]}")
			}
			names = filter.ToolNames
		}
		use.AllowedTools = names
		if use.AllowedTools == nil {
			use.AllowedTools = []string{}
		}
	}
	use.RequireApproval = "never"
	if len(approval) > 0 && string(approval) != "null" {
		if err := approvalPolicy(&use, approval); err != nil {
			return use, err
		}
	}
	return use, nil
}

// approvalPolicy reads require_approval: "always", "never", or a filter
// {"always": {"tool_names": [...]}, "never": {"tool_names": [...]}}.
func approvalPolicy(use *contracts.MCPServerUse, raw json.RawMessage) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "always" && s != "never" {
			return fmt.Errorf("mcp require_approval %q: want \"always\", \"never\" or {\"always\"|\"never\": {\"tool_names\": [...]}}", s)
		}
		use.RequireApproval = s
		return nil
	}
	type names struct {
		ToolNames []string `json:"tool_names"`
		ReadOnly  *bool    `json:"read_only"`
	}
	var f struct {
		Always *names `json:"always"`
		Never  *names `json:"never"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || (f.Always == nil && f.Never == nil) {
		return fmt.Errorf("mcp require_approval %s: want \"always\", \"never\" or {\"always\"|\"never\": {\"tool_names\": [...]}}", raw)
	}
	if f.Always != nil && f.Always.ReadOnly != nil || f.Never != nil && f.Never.ReadOnly != nil {
		return fmt.Errorf("mcp require_approval: read_only filters are not supported (Aptix does not read tool annotations); name the tools in tool_names")
	}
	use.RequireApproval = "filter"
	if f.Always != nil {
		use.ApprovalAlways = f.Always.ToolNames
	}
	if f.Never != nil {
		use.ApprovalNever = f.Never.ToolNames
	}
	return nil
}

// allowedURL compares parsed URLs, not strings: an allowed
// "https://mcp.corp.com" must not admit "https://mcp.corp.com.evil.net" or
// "https://mcp.corp.com@10.0.0.1", and an allowed "http://h/mcp" must not
// admit "/mcpevil" or "/mcp/../admin" (also percent-encoded). Scheme and
// host must be equal, the allowed path a prefix of the cleaned, unescaped
// path segment by segment (netguard.Within), and userinfo is never
// accepted. Where the URL may then connect is checked when it is dialed
// (services/toolrunner/mcp).
func allowedURL(raw string, prefixes []string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if _, ok := netguard.PathSegments(u); !ok {
		return false // even for "*": a path servers may read differently
	}
	for _, p := range prefixes {
		if p == "*" {
			return true
		}
		a, err := url.Parse(p)
		if err != nil || a.Host == "" {
			continue
		}
		if netguard.Within(u, a) {
			return true
		}
	}
	return false
}

func fieldsMap(fields json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(fields) > 0 {
		_ = json.Unmarshal(fields, &m)
	}
	return m
}

// PrependInput puts items at the start of a body's input.
func PrependInput(body json.RawMessage, items []json.RawMessage) (json.RawMessage, error) {
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("read the built body: %w", err)
	}
	var input []json.RawMessage
	if raw, ok := b["input"]; ok {
		if err := json.Unmarshal(raw, &input); err != nil {
			return nil, fmt.Errorf("body input: %w", err)
		}
	}
	all := append(append([]json.RawMessage{}, items...), input...)
	var err error
	if b["input"], err = json.Marshal(all); err != nil {
		return nil, err
	}
	return marshal(b)
}
