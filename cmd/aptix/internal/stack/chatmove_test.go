package stack

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestConversationMovesFromResponsesToChat: a conversation started on a
// Responses backend continues (previous_response_id) on a Chat Completions
// one, whose request carries the earlier turn's input and answer, replayed
// from the turn's stored events; it failed with 502 aptix_history_missing
// naming the upstream response id, while the other direction worked. A
// compaction of the chain on the chat backend works the same way.
func TestConversationMovesFromResponsesToChat(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-chat-1"))
	_, client := e.gateway()
	ctx := ctxT(t)
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox/sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Remember the word heliotrope")}})
	if err != nil {
		t.Fatal(err)
	}
	first := r1.OutputText()
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat/sandbox-chat-1", PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Which word was it?")}})
	if err != nil {
		t.Fatalf("continuing on the chat backend: %v", err)
	}
	if r2.Status != responses.ResponseStatusCompleted {
		t.Fatalf("r2: %s %s", r2.Status, r2.RawJSON())
	}
	sent := string(e.sb.LastRequests()[len(e.sb.LastRequests())-1])
	if !strings.Contains(sent, `"messages"`) || !strings.Contains(sent, "Remember the word heliotrope") ||
		!strings.Contains(sent, jsonText(first)) || !strings.Contains(sent, "Which word was it?") {
		t.Fatalf("the chat request does not carry the conversation:\n%s", sent)
	}
	// On the chat backend from there on: its own record continues it.
	r3, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "chat/sandbox-chat-1", PreviousResponseID: openai.String(r2.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And again?")}})
	if err != nil || r3.Status != responses.ResponseStatusCompleted {
		t.Fatalf("r3: %v", err)
	}
	sent = string(e.sb.LastRequests()[len(e.sb.LastRequests())-1])
	if !strings.Contains(sent, "Remember the word heliotrope") || !strings.Contains(sent, "Which word was it?") {
		t.Fatalf("r3's chat request lost the start of the conversation:\n%s", sent)
	}
	if _, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{Model: "chat/sandbox-chat-1", PreviousResponseID: openai.String(r1.ID)}); err != nil {
		t.Fatalf("compact on the chat backend: %v", err)
	}
}

// jsonText is s as it appears inside a JSON string (quotes escaped).
func jsonText(s string) string {
	return strings.NewReplacer(`"`, `\"`, "\n", `\n`).Replace(s)
}
