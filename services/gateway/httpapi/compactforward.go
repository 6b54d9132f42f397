package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/redact"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// forwardCompact sends the compaction to the backend's own
// /responses/compact and relays its answer, status and body as they are
// (an upstream error keeps its status, as for a turn). The compaction items
// are the backend's, which only it can read back: the next request carries
// them upstream untouched.
func (s *Server) forwardCompact(ctx context.Context, w http.ResponseWriter, p profiles.Profile, model string, req *responses.CreateRequest, input []json.RawMessage) {
	body := map[string]any{"model": model, "input": input}
	if req.Instructions != "" {
		body["instructions"] = req.Instructions
	}
	s.relayToBackend(ctx, w, p, "/responses/compact", "compact", body)
}

// relayToBackend posts body to a backend endpoint of p (its key and
// headers, as a turn's call sends them) and relays the answer, status and
// body as they are: an upstream error keeps its status, as for a turn, with
// credentials redacted from its body.
func (s *Server) relayToBackend(ctx context.Context, w http.ResponseWriter, p profiles.Profile, path, what string, body map[string]any) {
	b, err := json.Marshal(body)
	if err != nil {
		s.fail(w, responses.Internal("encode_"+what, err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		s.fail(w, responses.Internal(what+"_request", err.Error()))
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	if key := p.APIKey(); key != "" {
		hr.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range p.Headers {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		s.fail(w, &responses.Error{Status: http.StatusBadGateway, Type: responses.TypeServer, Code: ptr("upstream_unreachable"),
			Message: fmt.Sprintf("backend %s: %s: %v", p.Name, what, err)})
		return
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		s.fail(w, &responses.Error{Status: http.StatusBadGateway, Type: responses.TypeServer, Code: ptr("upstream_read_failed"),
			Message: fmt.Sprintf("backend %s: %s: %v", p.Name, what, err)})
		return
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Upstream error text enters Aptix here as in the LLM caller: a
		// backend echoing the key it got must not hand it to the client.
		out = []byte(redact.New(p.Credentials()...).String(string(out)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}
