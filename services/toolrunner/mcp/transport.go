package mcp

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
		return &sdk.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: httpClient(sc.Headers)}, nil, nil
	case TypeSSE:
		return &sdk.SSEClientTransport{Endpoint: sc.URL, HTTPClient: httpClient(sc.Headers)}, nil, nil
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

// httpClient returns a client that adds the configured headers (typically
// Authorization) to every request. It has no overall timeout: the streamable
// transport keeps long-lived SSE responses open; calls are bounded by ctx.
func httpClient(headers map[string]string) *http.Client {
	if len(headers) == 0 {
		return &http.Client{}
	}
	return &http.Client{Transport: &headerTransport{base: http.DefaultTransport, headers: headers}}
}

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
