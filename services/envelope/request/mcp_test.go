package request

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func TestServerSide(t *testing.T) {
	const fn = `{"type":"function","name":"lookup","parameters":{"type":"object"},"strict":false}`
	for _, tc := range []struct {
		name, tools, fields string
		o                   MCPOptions
		wantLoop            bool
		wantTools           string // the tools left in the body, "" for none
		wantErr             string
		check               func(t *testing.T, servers string)
	}{
		{name: "no tools", tools: ``, wantLoop: false},
		{name: "function tools only", tools: `[` + fn + `]`, wantTools: `[` + fn + `]`},
		{name: "an mcp tool is Aptix's", tools: `[{"type":"mcp","server_label":"docs","allowed_tools":["search"],"require_approval":"never"},` + fn + `]`,
			wantLoop: true, wantTools: `[` + fn + `]`,
			check: func(t *testing.T, s string) {
				if s != `[{"label":"docs","allowedTools":["search"],"requireApproval":"never"}]` {
					t.Fatalf("servers %s", s)
				}
			}},
		{name: "allowed_tools filter object", tools: `[{"type":"mcp","server_label":"docs","allowed_tools":{"tool_names":["a","b"]}}]`, wantLoop: true,
			check: func(t *testing.T, s string) {
				if !strings.Contains(s, `"allowedTools":["a","b"]`) {
					t.Fatalf("servers %s", s)
				}
			}},
		{name: "default all on a request without tools", o: MCPOptions{DefaultAll: true}, wantLoop: true,
			check: func(t *testing.T, s string) {
				if s != "null" {
					t.Fatalf("servers %s", s)
				}
			}},
		{name: "default all leaves a request with tools alone", tools: `[` + fn + `]`, o: MCPOptions{DefaultAll: true}, wantTools: `[` + fn + `]`},
		{name: "server_url refused", tools: `[{"type":"mcp","server_label":"x","server_url":"http://169.254.169.254/"}]`, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url allowed by prefix", tools: `[{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com/a"}]`,
			o: MCPOptions{AllowURLs: []string{"https://mcp.example.com/"}}, wantLoop: true},
		{name: "server_url on a look-alike host", tools: `[{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com.evil.net/a"}]`,
			o: MCPOptions{AllowURLs: []string{"https://mcp.example.com"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url with userinfo", tools: `[{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com@10.0.0.1/a"}]`,
			o: MCPOptions{AllowURLs: []string{"https://mcp.example.com"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url outside the allowed path", tools: `[{"type":"mcp","server_label":"x","server_url":"https://mcp.example.com/b"}]`,
			o: MCPOptions{AllowURLs: []string{"https://mcp.example.com/a/"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url on a look-alike path", tools: `[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:9600/mcpevil"}]`,
			o: MCPOptions{AllowURLs: []string{"http://127.0.0.1:9600/mcp"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url on a dot-dot path", tools: `[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:9600/mcp/../admin"}]`,
			o: MCPOptions{AllowURLs: []string{"http://127.0.0.1:9600/mcp"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url on an encoded dot-dot path", tools: `[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:9600/mcp/%2e%2e/admin"}]`,
			o: MCPOptions{AllowURLs: []string{"http://127.0.0.1:9600/mcp"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url on an encoded slash", tools: `[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:9600/mcp%2f..%2fadmin"}]`,
			o: MCPOptions{AllowURLs: []string{"http://127.0.0.1:9600/mcp"}}, wantErr: "APTIX_MCP_ALLOW_URLS"},
		{name: "server_url under the allowed path", tools: `[{"type":"mcp","server_label":"x","server_url":"http://127.0.0.1:9600/mcp/v1"}]`,
			o: MCPOptions{AllowURLs: []string{"http://127.0.0.1:9600/mcp"}}, wantLoop: true},
		{name: "a label twice", tools: `[{"type":"mcp","server_label":"docs"},{"type":"mcp","server_label":"docs","server_url":"https://mcp.example.com/a"}]`,
			o: MCPOptions{AllowURLs: []string{"https://mcp.example.com/"}}, wantErr: "appears twice"},
		{name: "no label", tools: `[{"type":"mcp"}]`, wantErr: "server_label"},
		{name: "connector", tools: `[{"type":"mcp","server_label":"g","connector_id":"connector_gmail"}]`, wantErr: "connector_id"},
		{name: "approval always", tools: `[{"type":"mcp","server_label":"docs","require_approval":"always"}]`, wantLoop: true,
			check: func(t *testing.T, s string) {
				if s != `[{"label":"docs","requireApproval":"always"}]` {
					t.Fatalf("servers %s", s)
				}
			}},
		{name: "approval filter", tools: `[{"type":"mcp","server_label":"docs","require_approval":{"never":{"tool_names":["search"]},"always":{"tool_names":["delete"]}}}]`, wantLoop: true,
			check: func(t *testing.T, s string) {
				if s != `[{"label":"docs","requireApproval":"filter","approvalAlways":["delete"],"approvalNever":["search"]}]` {
					t.Fatalf("servers %s", s)
				}
			}},
		{name: "approval unknown word", tools: `[{"type":"mcp","server_label":"docs","require_approval":"sometimes"}]`, wantErr: "require_approval"},
		{name: "approval unknown filter key", tools: `[{"type":"mcp","server_label":"docs","require_approval":{"maybe":{"tool_names":["x"]}}}]`, wantErr: "require_approval"},
		{name: "max_tool_calls", tools: `[{"type":"mcp","server_label":"docs"}]`, fields: `{"max_tool_calls":3}`, wantLoop: true},
		{name: "bad max_tool_calls", tools: `[{"type":"mcp","server_label":"docs"}]`, fields: `{"max_tool_calls":0}`, wantErr: "max_tool_calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","input":[]`
			if tc.tools != "" {
				body += `,"tools":` + tc.tools
			}
			body += `}`
			out, loop, err := ServerSide(json.RawMessage(body), json.RawMessage(tc.fields), tc.o)
			if tc.wantErr != "" {
				var coded interface{ Code() string }
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &coded) {
					t.Fatalf("err %v, want one naming %q with a code", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (loop != nil) != tc.wantLoop {
				t.Fatalf("loop %+v", loop)
			}
			var b struct {
				Tools json.RawMessage `json:"tools"`
			}
			_ = json.Unmarshal(out, &b)
			if string(b.Tools) != tc.wantTools {
				t.Fatalf("tools sent upstream %s, want %s", b.Tools, tc.wantTools)
			}
			if loop != nil {
				if loop.MaxDepth != DefaultMaxToolDepth {
					t.Fatalf("max depth %d", loop.MaxDepth)
				}
				if tc.fields != "" && loop.MaxCalls != 3 {
					t.Fatalf("max calls %d", loop.MaxCalls)
				}
				s, _ := json.Marshal(loop.Servers)
				if tc.check != nil {
					tc.check(t, string(s))
				}
			}
		})
	}
}

func TestMCPOptionsFromEnv(t *testing.T) {
	t.Setenv(EnvMaxToolDepth, "16")
	if _, err := MCPOptionsFromEnv(); err == nil || !strings.Contains(err.Error(), "1 to 15") {
		t.Fatalf("depth 16: %v", err)
	}
	t.Setenv(EnvMaxToolDepth, "3")
	t.Setenv(EnvMCPDefaultAll, "true")
	t.Setenv(EnvMCPAllowURLs, "https://a/, https://b/")
	o, err := MCPOptionsFromEnv()
	if err != nil || o.MaxDepth != 3 || !o.DefaultAll || len(o.AllowURLs) != 2 || o.AllowURLs[1] != "https://b/" {
		t.Fatalf("%+v %v", o, err)
	}
}

func TestPrependInput(t *testing.T) {
	out, err := PrependInput(json.RawMessage(`{"input":[{"type":"function_call_output","call_id":"b","output":"x"}]}`),
		[]json.RawMessage{json.RawMessage(`{"type":"function_call_output","call_id":"a","output":"3"}`)})
	if err != nil || !strings.Contains(string(out), `"call_id":"a","output":"3"},{"type":"function_call_output","call_id":"b"`) {
		t.Fatalf("%s %v", out, err)
	}
}

// TestNeedsApproval: which calls wait for the client under each policy.
func TestNeedsApproval(t *testing.T) {
	for _, tc := range []struct {
		use  contracts.MCPServerUse
		tool string
		want bool
	}{
		{contracts.MCPServerUse{}, "x", false},
		{contracts.MCPServerUse{RequireApproval: "never"}, "x", false},
		{contracts.MCPServerUse{RequireApproval: "always"}, "x", true},
		{contracts.MCPServerUse{RequireApproval: "filter", ApprovalNever: []string{"read"}}, "read", false},
		{contracts.MCPServerUse{RequireApproval: "filter", ApprovalNever: []string{"read"}}, "write", true},
		{contracts.MCPServerUse{RequireApproval: "filter", ApprovalAlways: []string{"write"}}, "write", true},
		{contracts.MCPServerUse{RequireApproval: "filter", ApprovalAlways: []string{"write"}}, "read", false},
		{contracts.MCPServerUse{RequireApproval: "filter", ApprovalAlways: []string{"write"}, ApprovalNever: []string{"read"}}, "other", true},
	} {
		if got := tc.use.NeedsApproval(tc.tool); got != tc.want {
			t.Errorf("%+v %s: %v, want %v", tc.use, tc.tool, got, tc.want)
		}
	}
}
