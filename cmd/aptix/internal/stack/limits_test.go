package stack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestResponseTooLargeEndToEnd: a backend answering more
// than the profile's maxResponseBytes fails the turn with
// response_too_large on the bus (the completion's error code), over HTTP
// (502 with that code) and on a stream (response.failed with it); the
// model is called once per turn (no retry, no redelivery pays again), no
// stage dead-letters the turn, and the stages go on serving.
func TestResponseTooLargeEndToEnd(t *testing.T) {
	big := strings.Repeat("x", 600<<10)
	e := newEnv(t, sandbox.Options{Script: []string{big, big, big}}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.MaxResponseBytes = 256 << 10
		p.AttemptTimeout, p.TurnTimeout = 10*time.Second, 20*time.Second
		c.Profiles.Put(p)
	})
	turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "too-large", TurnId: "t1", Instruction: "say a lot", RagScope: contracts.RagScopeNone})
	if r := turn.Response; r.Kind != contracts.KindError || r.ErrorCode != caller.CodeResponseTooLarge || !strings.Contains(r.ErrorMessage, "maxResponseBytes") {
		t.Fatalf("bus: kind %s, code %q, message %q", r.Kind, r.ErrorCode, r.ErrorMessage)
	}
	if n := e.sb.Requests(); n != 1 {
		t.Fatalf("the model was called %d times for one turn", n)
	}

	_, client := e.gateway()
	ctx := ctxT(t)
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say a lot")}})
	apiError(t, err, 502, caller.CodeResponseTooLarge)

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("say a lot, streamed")}})
	var last responses.ResponseStreamEventUnion
	for stream.Next() {
		last = stream.Current()
	}
	if last.Type != "response.failed" || last.Response.Error.Code != caller.CodeResponseTooLarge {
		t.Fatalf("stream ended with %s %+v (err %v)", last.Type, last.Response.Error, stream.Err())
	}
	if n := e.sb.Requests(); n != 3 {
		t.Fatalf("the model was called %d times for three turns", n)
	}
	for _, st := range []string{"envelope", "llmcaller", "mapper"} {
		if n := e.count(contracts.DeadSubject(st)); n != 0 {
			t.Fatalf("%d dead letters of %s", n, st)
		}
	}
	// The script is used up: the next turn gets the sandbox's own answer.
	if r := e.turn(contracts.AgentExecuteRequest{ConversationId: "after", TurnId: "t1", Instruction: "still there?", RagScope: contracts.RagScopeNone}).Response; r.Kind != contracts.KindOK {
		t.Fatalf("next turn: %s %s %s", r.Kind, r.ErrorCode, r.ErrorMessage)
	}
	e.settled()
}

// TestUpstreamKeyNotRelayed: a backend echoing the Authorization it got
// in its 401 has the profile's key masked before the client (HTTP error,
// bus completion, a count the gateway forwards), the stored events and the
// log see the error.
func TestUpstreamKeyNotRelayed(t *testing.T) {
	const key = "sk-stack-echo-0123456789abcdef"
	t.Setenv("APTIX_TEST_STACK_KEY", key)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key in header Authorization: %s","type":"invalid_request_error","code":"invalid_api_key"}}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(echo.Close)
	var logs logBuf
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.BaseURL, p.APIKeyEnv, p.Sandbox = echo.URL+"/v1", "APTIX_TEST_STACK_KEY", false
		p.Capabilities.InputTokens = true // the gateway forwards counts to the backend itself
		c.Profiles.Put(p)
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	turn := e.turn(contracts.AgentExecuteRequest{ConversationId: "echo", TurnId: "t1", Instruction: "hi", RagScope: contracts.RagScopeNone})
	if r := turn.Response; r.ErrorCode != "invalid_api_key" || strings.Contains(r.ErrorMessage+r.RawResponseJson, key) || !strings.Contains(r.ErrorMessage, "[REDACTED]") {
		t.Fatalf("bus: %s %q %q", r.ErrorCode, r.ErrorMessage, r.RawResponseJson)
	}
	_, client := e.gateway()
	_, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	if ae := apiError(t, err, 401, "invalid_api_key"); strings.Contains(ae.Message+ae.RawJSON(), key) {
		t.Fatalf("HTTP error relays the key: %s", ae.RawJSON())
	}
	// The gateway's own relay to the backend (a forwarded token count).
	_, err = client.Responses.InputTokens.Count(ctxT(t), responses.InputTokenCountParams{Model: openai.String("sandbox-1"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("hi")}})
	if ae := apiError(t, err, 401, "invalid_api_key"); strings.Contains(ae.Message+ae.RawJSON(), key) {
		t.Fatalf("the forwarded count relays the key: %s", ae.RawJSON())
	}
	s, err := e.js.Stream(context.Background(), contracts.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		if m, err := s.GetMsg(context.Background(), seq); err == nil && strings.Contains(string(m.Data), key) {
			t.Fatalf("event %s holds the key", m.Subject)
		}
	}
	if strings.Contains(logs.String(), key) {
		t.Fatalf("the log holds the key:\n%s", logs.String())
	}
}
