package mcp

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	env := envOf(map[string]string{
		"DOCS_TOKEN": "s3cret-token",
		"DOCS_HOST":  "docs.internal:8443",
		"FS_ROOT":    "/srv/code",
		"NODE":       "/usr/bin/node",
	})
	tests := []struct {
		name    string
		json    string
		want    map[string]ServerConfig
		wantErr []string // substrings of the error; nil means success
	}{
		{
			name: "http with expanded url and headers",
			json: `{"mcpServers":{"docs":{"url":"https://${DOCS_HOST}/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}"}}}}`,
			want: map[string]ServerConfig{"docs": {
				Type: TypeHTTP, URL: "https://docs.internal:8443/mcp",
				Headers: map[string]string{"Authorization": "Bearer s3cret-token"},
			}},
		},
		{
			name: "stdio with expanded command, args and env; defaults",
			json: `{"mcpServers":{"fs":{"command":"${NODE}","args":["server.js","${FS_ROOT}","--mode=${MODE:-ro}"],"env":{"TOKEN":"${DOCS_TOKEN}","LEVEL":"${LEVEL:-info}","ROOT":"${FS_ROOT:-/tmp}"}}}}`,
			want: map[string]ServerConfig{"fs": {
				Type: TypeStdio, Command: "/usr/bin/node",
				Args: []string{"server.js", "/srv/code", "--mode=ro"},
				Env:  map[string]string{"TOKEN": "s3cret-token", "LEVEL": "info", "ROOT": "/srv/code"},
			}},
		},
		{
			name: "type spellings and a literal dollar",
			json: `{"mcpServers":{"a":{"type":"streamable-http","url":"http://a/mcp?x=$y"},"b":{"type":"streamableHttp","url":"http://b"},"c":{"type":"sse","url":"http://c/sse"},"d":{"type":"stdio","command":"srv"}}}`,
			want: map[string]ServerConfig{
				"a": {Type: TypeHTTP, URL: "http://a/mcp?x=$y"},
				"b": {Type: TypeHTTP, URL: "http://b"},
				"c": {Type: TypeSSE, URL: "http://c/sse"},
				"d": {Type: TypeStdio, Command: "srv"},
			},
		},
		{
			name: "disabled entry is kept unexpanded and unchecked",
			json: `{"mcpServers":{"old":{"url":"${UNSET_VAR}","disabled":true},"ok":{"url":"http://ok"}}}`,
			want: map[string]ServerConfig{
				"old": {URL: "${UNSET_VAR}", Disabled: true},
				"ok":  {Type: TypeHTTP, URL: "http://ok"},
			},
		},
		{
			name: "unknown fields of other clients are ignored",
			json: `{"mcpServers":{"x":{"url":"http://x","timeout":30,"alwaysAllow":["a"]}},"globalShortcut":"Ctrl+Q"}`,
			want: map[string]ServerConfig{"x": {Type: TypeHTTP, URL: "http://x"}},
		},
		{
			name: "empty mcpServers",
			json: `{"mcpServers":{}}`,
			want: map[string]ServerConfig{},
		},
		{name: "missing variable", json: `{"mcpServers":{"docs":{"url":"http://d","headers":{"Authorization":"Bearer ${MISSING_TOKEN}"}}}}`,
			wantErr: []string{`server "docs"`, "MISSING_TOKEN", "Authorization"}},
		{name: "missing variable in args", json: `{"mcpServers":{"fs":{"command":"x","args":["${NOPE}"]}}}`,
			wantErr: []string{`server "fs"`, "NOPE", "args[0]"}},
		{name: "bad label", json: `{"mcpServers":{"my docs":{"url":"http://d"}}}`, wantErr: []string{`"my docs"`, "label"}},
		{name: "label too long", json: `{"mcpServers":{"` + strings.Repeat("a", 65) + `":{"url":"http://d"}}}`, wantErr: []string{"label"}},
		{name: "both url and command", json: `{"mcpServers":{"x":{"url":"http://d","command":"srv"}}}`, wantErr: []string{`server "x"`, "both url and command"}},
		{name: "neither url nor command", json: `{"mcpServers":{"x":{"args":["a"]}}}`, wantErr: []string{`server "x"`, "neither url nor command"}},
		{name: "not http", json: `{"mcpServers":{"x":{"url":"ftp://d/mcp"}}}`, wantErr: []string{`server "x"`, "http or https"}},
		{name: "no host", json: `{"mcpServers":{"x":{"url":"http:///mcp"}}}`, wantErr: []string{`server "x"`, "no host"}},
		{name: "unknown type", json: `{"mcpServers":{"x":{"type":"websocket","url":"http://d"}}}`, wantErr: []string{`server "x"`, "websocket"}},
		{name: "type contradicts fields", json: `{"mcpServers":{"x":{"type":"stdio","url":"http://d"}}}`, wantErr: []string{`server "x"`, "needs a command"}},
		{name: "headers on stdio", json: `{"mcpServers":{"x":{"command":"srv","headers":{"A":"b"}}}}`, wantErr: []string{`server "x"`, "headers"}},
		{name: "env on url", json: `{"mcpServers":{"x":{"url":"http://d","env":{"A":"b"}}}}`, wantErr: []string{`server "x"`, "env"}},
		{name: "unterminated", json: `{"mcpServers":{"x":{"url":"http://d/${HOST"}}}`, wantErr: []string{`server "x"`, "unterminated"}},
		{name: "no mcpServers", json: `{"servers":{}}`, wantErr: []string{"mcpServers"}},
		{name: "not json", json: `{"mcpServers":`, wantErr: []string{"mcp config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.json), env)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseConfig succeeded with %+v, want an error", got)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if !reflect.DeepEqual(got.Servers, tt.want) {
				t.Errorf("servers:\n got %+v\nwant %+v", got.Servers, tt.want)
			}
		})
	}
}

// A config error must not leak what a variable held: it may be a secret.
func TestParseConfigErrorsHideValues(t *testing.T) {
	env := envOf(map[string]string{"URL": "ftp://user:hunter2@host/mcp", "BAD": "http://user:hunter2@[::1"})
	for _, js := range []string{
		`{"mcpServers":{"x":{"url":"${URL}"}}}`,
		`{"mcpServers":{"x":{"url":"${BAD}"}}}`,
	} {
		_, err := ParseConfig([]byte(js), env)
		if err == nil {
			t.Fatalf("%s: no error", js)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error leaks the secret: %v", err)
		}
	}
}

func TestLoadConfigAndConfigFromEnv(t *testing.T) {
	t.Setenv(EnvConfig, "")
	cfg, err := ConfigFromEnv()
	if err != nil || len(cfg.Servers) != 0 {
		t.Fatalf("unset %s: got %+v, %v; want an empty config", EnvConfig, cfg, err)
	}

	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers":{"docs":{"url":"http://d/mcp","headers":{"X-Key":"${APTIX_TEST_MCP_KEY}"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvConfig, path)
	t.Setenv("APTIX_TEST_MCP_KEY", "k1")
	cfg, err = ConfigFromEnv()
	if err != nil {
		t.Fatalf("ConfigFromEnv: %v", err)
	}
	if got := cfg.Servers["docs"].Headers["X-Key"]; got != "k1" {
		t.Errorf("header = %q, want k1", got)
	}

	t.Setenv("APTIX_TEST_MCP_KEY", "")
	if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "APTIX_TEST_MCP_KEY") {
		t.Errorf("missing key: error %v should name the file and the variable", err)
	}

	if _, err := LoadConfig(filepath.Join(t.TempDir(), "nope.json"), nil); err == nil {
		t.Error("LoadConfig of a missing file succeeded")
	}
}
