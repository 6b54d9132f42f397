package chatcompletions

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	json "github.com/go-json-experiment/json/v1"

	"github.com/aptix-dev/aptix/pkg/profiles"
)

// HeaderTranslated marks a response the transport wrote from a Chat
// Completions reply; HeaderUpstreamStatus keeps the server's own status
// where the transport changed it (a 200 whose body is an error).
const (
	HeaderTranslated     = "X-Aptix-Translated-From"
	HeaderUpstreamStatus = "X-Aptix-Upstream-Status"
)

// Transport is an http.RoundTripper that serves a Responses client from a
// Chat Completions server: POST …/responses is sent as POST
// …/chat/completions with the body translated (Request), and the reply
// comes back as the Responses body or event stream (Response, Stream). The
// LLM caller's openai-go client, retries, pay-once and stream reader work
// on top unchanged. What passes through untouched: error statuses with
// their headers (Retry-After) and bodies, a body that is not JSON (the
// caller reports it as malformed). A request that cannot be translated is
// answered 400 without reaching the server.
type Transport struct {
	// Base carries the requests; nil is http.DefaultTransport.
	Base http.RoundTripper
	// Chat are the server's quirks.
	Chat profiles.Chat
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
		return refuse(req, http.StatusNotFound, "not_found", "",
			fmt.Sprintf("%s %s is a Responses API call a Chat Completions backend cannot serve", req.Method, req.URL.Path)), nil
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
	var body []byte
	var err error
	if client := clientBody(req.Context()); client != nil {
		body, err = Forward(client, in, t.Chat) // the client's own chat request (WithClientBody)
	} else {
		body, err = Request(in, t.Chat)
	}
	if err != nil {
		if re, ok := err.(*RequestError); ok {
			return refuse(req, http.StatusBadRequest, re.Code, re.Param, re.Message), nil
		}
		return nil, err
	}
	var stream struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &stream)

	out := req.Clone(req.Context())
	u := *req.URL
	u.Path = strings.TrimSuffix(u.Path, "/responses") + "/chat/completions"
	u.RawPath = ""
	out.URL, out.Host = &u, req.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Type", "application/json")
	out.Header.Del("Content-Length")
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
	if isEventStream(resp.Header) {
		return translateStream(resp), nil
	}
	return translateBody(resp)
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// translateStream answers with a pipe the translator writes Responses
// events into as the server's chunks arrive.
func translateStream(resp *http.Response) *http.Response {
	pr, pw := io.Pipe()
	up := resp.Body
	go func() {
		defer up.Close()
		err := NewStream(pw).Translate(up)
		_ = pw.CloseWithError(err) // nil: a clean EOF
	}()
	resp.Body = pr
	resp.ContentLength = -1
	resp.Header = resp.Header.Clone()
	resp.Header.Del("Content-Length")
	resp.Header.Set(HeaderTranslated, string(profiles.APIChatCompletions))
	return resp
}

// translateBody rewrites a JSON reply as a Responses body. A 200 whose body
// is an error object becomes that error's status (HeaderUpstreamStatus
// says it was 200), so it is retried or reported like any error.
func translateBody(resp *http.Response) (*http.Response, error) {
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read chat completions body: %w", err)
	}
	resp.Header = resp.Header.Clone()
	resp.Header.Del("Content-Length")
	resp.Header.Set(HeaderTranslated, string(profiles.APIChatCompletions))
	if !json.Valid(b) {
		return withBody(resp, b), nil // the caller reports a malformed body
	}
	if status, isErr := ErrorBody(b); isErr {
		resp.Header.Set(HeaderUpstreamStatus, strconv.Itoa(resp.StatusCode))
		resp.StatusCode, resp.Status = status, fmt.Sprintf("%d %s", status, http.StatusText(status))
		return withBody(resp, b), nil
	}
	out, err := Response(b)
	if err != nil {
		resp.Header.Set(HeaderUpstreamStatus, strconv.Itoa(resp.StatusCode))
		resp.StatusCode, resp.Status = http.StatusBadGateway, "502 Bad Gateway"
		return withBody(resp, errorJSON("malformed_response", "", "the Chat Completions server's reply cannot be read: "+err.Error())), nil
	}
	resp.Header.Set("Content-Type", "application/json")
	return withBody(resp, out), nil
}

func withBody(resp *http.Response, b []byte) *http.Response {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	return resp
}

func errorJSON(code, param, msg string) []byte {
	e := map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}
	if param != "" {
		e["param"] = param
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

// refuse answers a request without sending it, in OpenAI's error shape.
func refuse(req *http.Request, status int, code, param, msg string) *http.Response {
	b := errorJSON(code, param, msg)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderTranslated, string(profiles.APIChatCompletions))
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), Request: req}
}
