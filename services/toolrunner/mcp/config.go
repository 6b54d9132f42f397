package mcp

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
)

// EnvConfig names the environment variable holding the path of the
// mcpServers JSON file.
const EnvConfig = "APTIX_MCP_CONFIG"

// Transport types, as written in a ServerConfig's Type after parsing.
const (
	TypeHTTP  = "http"  // streamable HTTP (MCP 2025-03-26 and later)
	TypeSSE   = "sse"   // the legacy HTTP+SSE transport (MCP 2024-11-05)
	TypeStdio = "stdio" // a subprocess speaking over stdin/stdout
)

// ServerConfig is one entry of "mcpServers", in the format MCP users already
// write for Claude Desktop, Cursor or VS Code. Fields other tools add
// (timeouts, auto-approve lists…) are ignored.
type ServerConfig struct {
	// Type is "http" (also "streamable-http"), "sse" or "stdio"; when empty it
	// is inferred from url vs command. After parsing it is always set.
	Type string `json:"type,omitempty"`
	// URL is the endpoint of an HTTP server.
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request, e.g. "Authorization": "Bearer ${DOCS_TOKEN}".
	Headers map[string]string `json:"headers,omitempty"`
	// Command is the subprocess of a stdio server, found on PATH if not a path.
	Command string `json:"command,omitempty"`
	// Args are the subprocess's arguments.
	Args []string `json:"args,omitempty"`
	// Env is added to Aptix's own environment for the subprocess.
	Env map[string]string `json:"env,omitempty"`
	// Disabled servers are kept in the Config but never connected (nor
	// expanded: a disabled entry may name variables that are not set).
	Disabled bool `json:"disabled,omitempty"`
}

// Config is an mcpServers file: servers by label.
type Config struct {
	Servers map[string]ServerConfig `json:"mcpServers"`
}

// labelRE is what a server label may be: it becomes part of the tool names the
// model sees (<label>__<tool>) and of OpenAI's server_label.
var labelRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ConfigFromEnv loads the file named by APTIX_MCP_CONFIG, expanding variables
// from the process environment. With the variable unset it returns an empty
// Config: a deployment without MCP servers is normal.
func ConfigFromEnv() (Config, error) {
	path := os.Getenv(EnvConfig)
	if path == "" {
		return Config{}, nil
	}
	cfg, err := LoadConfig(path, os.Getenv)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvConfig, err)
	}
	return cfg, nil
}

// LoadConfig reads and parses an mcpServers file; see ParseConfig.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	cfg, err := ParseConfig(data, getenv)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses an mcpServers document, expands ${VAR} and
// ${VAR:-default} in url, headers, command, args and env from getenv
// (os.Getenv when nil), infers each server's Type and validates it. Secrets
// belong in the environment, so errors name variables and fields but never
// print a value.
func ParseConfig(data []byte, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var doc struct {
		Servers *map[string]ServerConfig `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	if doc.Servers == nil {
		return Config{}, fmt.Errorf(`mcp config: no "mcpServers" object`)
	}
	cfg := Config{Servers: make(map[string]ServerConfig, len(*doc.Servers))}
	labels := make([]string, 0, len(*doc.Servers))
	for label := range *doc.Servers {
		labels = append(labels, label)
	}
	sort.Strings(labels) // the first error is the same on every run
	for _, label := range labels {
		sc := (*doc.Servers)[label]
		if !labelRE.MatchString(label) {
			return Config{}, fmt.Errorf("mcp config: server %q: label must match %s", label, labelRE)
		}
		if !sc.Disabled {
			var err error
			if sc, err = resolveServer(sc, getenv); err != nil {
				return Config{}, fmt.Errorf("mcp config: server %q: %w", label, err)
			}
		}
		cfg.Servers[label] = sc
	}
	return cfg, nil
}

// resolveServer expands one enabled entry and checks that it describes
// exactly one transport.
func resolveServer(sc ServerConfig, getenv func(string) string) (ServerConfig, error) {
	var err error
	if sc.URL, err = expand(sc.URL, getenv); err != nil {
		return sc, fmt.Errorf("url: %w", err)
	}
	if sc.Command, err = expand(sc.Command, getenv); err != nil {
		return sc, fmt.Errorf("command: %w", err)
	}
	if len(sc.Args) > 0 {
		args := make([]string, len(sc.Args))
		for i, a := range sc.Args {
			if args[i], err = expand(a, getenv); err != nil {
				return sc, fmt.Errorf("args[%d]: %w", i, err)
			}
		}
		sc.Args = args
	}
	if sc.Headers, err = expandMap(sc.Headers, "headers", getenv); err != nil {
		return sc, err
	}
	if sc.Env, err = expandMap(sc.Env, "env", getenv); err != nil {
		return sc, err
	}

	hasURL, hasCmd := strings.TrimSpace(sc.URL) != "", strings.TrimSpace(sc.Command) != ""
	switch {
	case hasURL && hasCmd:
		return sc, fmt.Errorf("has both url and command: give exactly one")
	case !hasURL && !hasCmd:
		return sc, fmt.Errorf("has neither url nor command: give exactly one")
	}
	typ, err := normalizeType(sc.Type, hasURL)
	if err != nil {
		return sc, err
	}
	sc.Type = typ
	if typ == TypeStdio {
		if !hasCmd {
			return sc, fmt.Errorf(`type "stdio" needs a command`)
		}
		if len(sc.Headers) > 0 {
			return sc, fmt.Errorf("headers apply to url servers only, not to a command")
		}
		return sc, nil
	}
	if !hasURL {
		return sc, fmt.Errorf("type %q needs a url", typ)
	}
	if len(sc.Args) > 0 || len(sc.Env) > 0 {
		return sc, fmt.Errorf("args and env apply to command servers only, not to a url")
	}
	u, err := url.Parse(sc.URL)
	if err != nil {
		// url.Parse quotes the input, which may hold an expanded secret.
		return sc, fmt.Errorf("url does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return sc, fmt.Errorf("url must be http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return sc, fmt.Errorf("url has no host")
	}
	return sc, nil
}

// normalizeType maps the spellings clients use ("http", "streamable-http",
// "streamableHttp", "sse", "stdio") to the Type constants.
func normalizeType(t string, hasURL bool) (string, error) {
	switch strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(strings.TrimSpace(t))) {
	case "":
		if hasURL {
			return TypeHTTP, nil
		}
		return TypeStdio, nil
	case "http", "streamablehttp":
		return TypeHTTP, nil
	case "sse":
		return TypeSSE, nil
	case "stdio":
		return TypeStdio, nil
	}
	return "", fmt.Errorf(`unknown type %q (want "http", "streamable-http", "sse" or "stdio")`, t)
}

func expandMap(m map[string]string, field string, getenv func(string) string) (map[string]string, error) {
	if len(m) == 0 {
		return m, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expand(v, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s[%q]: %w", field, k, err)
		}
		out[k] = x
	}
	return out, nil
}
