package anthropicmessages

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// HeaderTranslated marks a response the transport wrote from a Messages
// reply.
const HeaderTranslated = "X-Aptix-Translated-From"

// Transport is an http.RoundTripper that serves the caller's Responses
// client from a Messages server: POST …/responses goes as POST …/messages
// (the Responses body translated, or the Messages client's own body
// forwarded), the key the caller sends as a bearer token goes as x-api-key,
// with anthropic-version (the client's, else the profile's) and the
// client's anthropic-beta; the reply comes back as the Responses body or
// event stream. Error statuses pass through with their headers
// (retry-after) and bodies, so the caller retries 429, 5xx and 529 as it
// does for any backend.
type Transport struct {
	// Base carries the requests; nil is http.DefaultTransport.
	Base http.RoundTripper
	// Anthropic are the profile's settings.
	Anthropic profiles.Anthropic
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/responses") {
		return refuse(req, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("%s %s is a Responses API call a Messages backend cannot serve", req.Method, req.URL.Path)), nil
	}
	var in []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		in = b
	}
	c := clientOf(req.Context())
	var body []byte
	var err error
	if len(c.Body) > 0 {
		body, err = Forward(c.Body, in)
	} else {
		body, err = Request(in, Defaults{MaxTokens: t.Anthropic.MaxTokens})
	}
	if err != nil {
		if re, ok := err.(*RequestError); ok {
			return refuse(req, http.StatusBadRequest, "invalid_request_error", re.Message), nil
		}
		return nil, err
	}
	var stream struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &stream)

	out := req.Clone(req.Context())
	u := *req.URL
	u.Path = strings.TrimSuffix(u.Path, "/responses") + "/messages"
	u.RawPath = ""
	out.URL, out.Host = &u, req.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Type", "application/json")
	out.Header.Del("Content-Length")
	if key, ok := strings.CutPrefix(out.Header.Get("Authorization"), "Bearer "); ok {
		out.Header.Del("Authorization")
		if key != "" {
			out.Header.Set("X-Api-Key", key)
		}
	}
	out.Header.Set("Anthropic-Version", cmp.Or(c.Version, t.Anthropic.Version, profiles.DefaultAnthropicVersion))
	if c.Beta != "" {
		out.Header.Set("Anthropic-Beta", c.Beta)
	}
	if stream.Stream {
		out.Header.Set("Accept", "text/event-stream")
	} else {
		out.Header.Set("Accept", "application/json")
	}
	resp, err := t.base().RoundTrip(out)
	if err != nil {
		return nil, err
	}
	resp.Request = req
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, nil // the server's status, headers and error body, as sent
	}
	resp.Header = resp.Header.Clone()
	resp.Header.Del("Content-Length")
	resp.Header.Set(HeaderTranslated, string(profiles.APIAnthropicMessages))
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		pr, pw := io.Pipe()
		up := resp.Body
		go func() {
			defer up.Close()
			_ = pw.CloseWithError(NewStream(pw).Translate(up))
		}()
		resp.Body, resp.ContentLength = pr, -1
		return resp, nil
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the Messages answer: %w", err)
	}
	if translated, err := Response(b); err == nil {
		b = translated
		resp.Header.Set("Content-Type", "application/json")
	} else {
		resp.StatusCode, resp.Status = http.StatusBadGateway, "502 Bad Gateway"
		b = errorJSON("api_error", "the Messages server's answer cannot be read: "+err.Error())
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	return resp, nil
}

// errorJSON is an error in Anthropic's shape, which also reads as OpenAI's
// (error.message, error.type).
func errorJSON(typ, msg string) []byte {
	b, _ := marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return b
}

// refuse answers a request without sending it.
func refuse(req *http.Request, status int, typ, msg string) *http.Response {
	b := errorJSON(typ, msg)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderTranslated, string(profiles.APIAnthropicMessages))
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req}
}
