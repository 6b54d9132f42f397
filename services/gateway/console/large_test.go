package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
)

// publishClaimed stores an event too big for one message as the pipeline
// does: whole in the claim store, a stub on the stream (pkg/pipeline/claim).
func (e *env) publishClaimed(stage string, t contracts.Turn) {
	e.t.Helper()
	ctx := context.Background()
	data, err := json.Marshal(t)
	if err != nil {
		e.t.Fatal(err)
	}
	obs, err := e.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: contracts.ClaimBucket})
	if err != nil {
		e.t.Fatal(err)
	}
	subject := contracts.Subject(stage, t.ConversationId, t.TurnId)
	key := claim.Key(subject, t.TurnId+"."+stage)
	if _, err := obs.PutBytes(ctx, key, data); err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Header.Set(contracts.HeaderClaim, key)
	m.Header.Set(contracts.HeaderCEType, contracts.CEType(stage))
	m.Data = claim.Stub(t.ConversationId, t.TurnId, key, len(data))
	if _, err := e.js.PublishMsg(ctx, m); err != nil {
		e.t.Fatal(err)
	}
}

// TestLargeTurnClipped: a turn whose upstream answer is
// 4 MiB (in its responded and completed events, both claimed) renders a
// page of its first 256 KiB per document, not of every copy in full, with
// links that download the whole answer and the whole events.
func TestLargeTurnClipped(t *testing.T) {
	e := newEnv(t)
	text := strings.Repeat("0123456789abcdef", 4<<20/16)
	body, _ := json.Marshal(map[string]any{"id": "resp_big", "status": "completed",
		"output": []any{map[string]any{"type": "message", "content": []any{map[string]any{"type": "output_text", "text": text}}}}})
	turn := contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c-big", TurnId: "t-big", Instruction: "say a lot"})
	e.publish(contracts.StageRetrieved, turn, nil)
	turn.LLM = &contracts.LLMResult{Backend: "sandbox", Status: 200, Body: string(body), Attempts: 1}
	e.publishClaimed(contracts.StageResponded, turn)
	turn.Response = &contracts.AgentExecuteResponse{Kind: contracts.KindOK, ConversationId: "c-big", TurnId: "t-big", Text: text, RawResponseJson: string(body)}
	e.publishClaimed(contracts.StageCompleted, turn)

	c := e.server()
	page := c.do("GET", "/console/turns/t-big?c=c-big", nil)
	if page.status != 200 {
		t.Fatalf("turn page: %d %s", page.status, page.body)
	}
	if len(page.body) > 2<<20 {
		t.Fatalf("the page is %d bytes for a 4 MiB answer: large documents are shown whole", len(page.body))
	}
	if n := strings.Count(page.body, "Shown: the first 256 KiB"); n < 3 {
		t.Fatalf("%d notes of a clipped document, want the upstream response and both large events", n)
	}
	up := c.do("GET", "/console/turns/t-big/upstream?c=c-big", nil)
	if up.status != 200 || up.body != string(body) || !strings.Contains(up.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("upstream download: %d, %d bytes of %d, %q", up.status, len(up.body), len(body), up.header.Get("Content-Disposition"))
	}
	if !strings.Contains(page.body, `href="/console/turns/t-big/upstream?c=c-big"`) {
		t.Fatal("no link to the whole upstream response")
	}
	var seq string
	for _, part := range strings.Split(page.body, `href="/console/events/`)[1:] {
		seq = part[:strings.Index(part, "/")]
		ev := c.do("GET", "/console/events/"+seq+"/raw", nil)
		var got contracts.Turn
		if ev.status != 200 || json.Unmarshal([]byte(ev.body), &got) != nil || got.LLM == nil || got.LLM.Body != string(body) {
			t.Fatalf("event %s download: %d, %d bytes", seq, ev.status, len(ev.body))
		}
	}
	if seq == "" {
		t.Fatal("no link to a whole event")
	}
	if r := c.do("GET", "/console/events/999999/raw", nil); r.status != 404 {
		t.Fatalf("a missing event: %d", r.status)
	}
	// The conversation page shows the reply's start too.
	if conv := c.do("GET", "/console/conversations/c-big", nil); conv.status != 200 || len(conv.body) > 1<<20 || !strings.Contains(conv.body, fmt.Sprintf("%d bytes more", len(text)-maxShown)) {
		t.Fatalf("conversation page: %d, %d bytes", conv.status, len(conv.body))
	}
}
