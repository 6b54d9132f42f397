package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/app"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
)

// gatewayRun is the HTTP gateway on a loopback port over a running
// pipeline, and an openai-go client with enough idle connections for the
// highest concurrency (a new TCP connection per call would measure the
// kernel, not the gateway).
type gatewayRun struct {
	srv    *httpapi.Server
	hs     *http.Server
	client openai.Client
	base   string // http://host:port
}

func startGateway(ctx context.Context, p *pipelineRun, set *profiles.Set, maxC int) (*gatewayRun, error) {
	// Built as every process builds it; the bench measures the gateway
	// without authentication whatever the environment says.
	gw, err := app.FromEnv(ctx, app.Options{NC: p.client, Profiles: set, Addr: "127.0.0.1:0", Logger: quiet,
		Edit: func(c *httpapi.Config) { c.Auth, c.LimitRPM, c.LimitBackground = nil, 0, 0 }})
	if err != nil {
		return nil, err
	}
	srv := gw.Server
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * maxC, MaxIdleConnsPerHost: 2 * maxC}}
	client := openai.NewClient(option.WithBaseURL("http://"+ln.Addr().String()+"/v1"), option.WithAPIKey("unused"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
	return &gatewayRun{srv: srv, hs: hs, client: client, base: "http://" + ln.Addr().String()}, nil
}

// turn is benchRequest over HTTP: the same boot prompt, tools, instruction
// and workspace (so the same 8 chunks), through POST /v1/responses.
func (g *gatewayRun) turn(ctx context.Context) error {
	_, err := post(ctx, g.client)
	return err
}

// post sends the gateway's request with client and returns the response's
// raw JSON.
func post(ctx context.Context, client openai.Client) ([]byte, error) {
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "sandbox-1",
		Instructions: openai.String("You are a senior Go reviewer. Answer precisely and cite chunk ids."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Explain how the HTTP client reuses connections and where timeouts are enforced.")},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "ddr_document", Strict: openai.Bool(true),
			Description: openai.String("Write a design decision record"),
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}, "body": map[string]any{"type": "string"}},
				"required": []string{"title", "body"}, "additionalProperties": false}}}},
	}, option.WithJSONSet("aptix", map[string]any{"mode": "ANALYZE", "workspaceId": "go"}))
	if err != nil {
		return nil, err
	}
	if r.Status != responses.ResponseStatusCompleted {
		return nil, fmt.Errorf("response %s: %s", r.ID, r.Status)
	}
	return []byte(r.RawJSON()), nil
}

// httpFloor is what the gateway path costs before any of the gateway's own
// work: the same openai-go request over loopback HTTP, answered at once by
// a handler that reads the body and writes a gateway response captured
// earlier (same size, the same decoding in the client).
type httpFloor struct {
	hs     *http.Server
	client openai.Client
}

func startHTTPFloor(canned []byte, maxC int) (*httpFloor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(canned)
	})}
	go func() { _ = hs.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * maxC, MaxIdleConnsPerHost: 2 * maxC}}
	client := openai.NewClient(option.WithBaseURL("http://"+ln.Addr().String()+"/v1"), option.WithAPIKey("unused"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
	return &httpFloor{hs: hs, client: client}, nil
}

func (f *httpFloor) turn(ctx context.Context) error {
	_, err := post(ctx, f.client)
	return err
}

func (f *httpFloor) close() {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.hs.Shutdown(c)
}

func (g *gatewayRun) close() {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.hs.Shutdown(c)
	g.srv.Close()
}
