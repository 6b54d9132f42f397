package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aptix-dev/aptix/pkg/netguard"
)

// stdioTerminate is how long closing a stdio server waits for it to exit after
// its stdin is closed, and again after SIGTERM, before SIGKILL.
const stdioTerminate = 2 * time.Second

// newTransport builds the go-sdk transport for one resolved server entry. For
// stdio it also returns the command, so the registry can tell whether the
// child is still alive.
func newTransport(label string, sc ServerConfig, log *slog.Logger) (sdk.Transport, *exec.Cmd, error) {
	switch sc.Type {
	case TypeHTTP:
		c, err := httpClient(sc.URL, sc.Headers)
		if err != nil {
			return nil, nil, err
		}
		return &sdk.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: c}, nil, nil
	case TypeSSE:
		c, err := httpClient(sc.URL, sc.Headers)
		if err != nil {
			return nil, nil, err
		}
		return &sdk.SSEClientTransport{Endpoint: sc.URL, HTTPClient: c}, nil, nil
	case TypeStdio:
		cmd := exec.Command(sc.Command, sc.Args...)
		cmd.Env = os.Environ()
		keys := make([]string, 0, len(sc.Env))
		for k := range sc.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cmd.Env = append(cmd.Env, k+"="+sc.Env[k]) // later entries win in exec
		}
		cmd.Stderr = &stderrLog{log: log.With("mcp_server", label)}
		return &sdk.CommandTransport{Command: cmd, TerminateDuration: stdioTerminate}, cmd, nil
	}
	return nil, nil, fmt.Errorf("unknown transport type %q", sc.Type)
}

// httpClient returns the client of one MCP server at endpoint: it adds the
// configured headers (typically Authorization) to every request, dials only
// addresses pkg/netguard accepts (link-local, cloud metadata and reserved
// addresses refused, whatever the name resolves to; loopback and private
// ones allowed, as the deployment names these servers), uses no proxy (a
// proxy would dial for it, unchecked), and follows a redirect only to the
// endpoint itself or a path under it: a server allowed by URL must not send
// the toolrunner's JSON-RPC anywhere else. It has no overall timeout: the
// streamable transport keeps long-lived SSE responses open; calls are
// bounded by ctx. See docs/security.md.
func httpClient(endpoint string, headers map[string]string) (*http.Client, error) {
	base, err := url.Parse(endpoint)
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("mcp server url %q: want an http(s) URL", endpoint)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = netguard.Dialer(true, 10*time.Second).DialContext
	var rt http.RoundTripper = tr
	if len(headers) > 0 {
		rt = &headerTransport{base: tr, headers: headers}
	}
	return &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("mcp server: stopped after 10 redirects")
		}
		if !netguard.Within(req.URL, base) {
			return fmt.Errorf("mcp server %s redirected to %s: %w", endpoint, req.URL.Redacted(), errRedirectRefused)
		}
		return nil
	}}, nil
}

// errRedirectRefused is a redirect off an MCP server's origin and path.
var errRedirectRefused = errors.New("a redirect off the server's origin and path is refused")

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not modify its request
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// stderrLog turns a stdio server's stderr into log records, one per line, so
// its diagnostics land in Aptix's structured logs instead of being lost.
type stderrLog struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

// maxStderrLine bounds one buffered line: a server that writes megabytes
// without a newline must not grow memory without limit.
const maxStderrLine = 8 << 10

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStderrLine {
				w.log.Info("mcp server stderr", "line", string(w.buf))
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		if line := bytes.TrimRight(w.buf[:i], "\r"); len(line) > 0 {
			w.log.Info("mcp server stderr", "line", string(line))
		}
		w.buf = w.buf[i+1:]
	}
}
