package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestResponseTooLargeEndToEnd (issue 42 item 4): a backend answering more
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
