package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// upstreamInput is what the model was sent: each input item of the
// sandbox's last request as "role: text" (or its type), and whether the
// request continued an upstream response.
func upstreamInput(t *testing.T, e *env) (items []string, continued bool) {
	t.Helper()
	var body struct {
		Input []struct {
			Type, Role string
			Content    json.RawMessage
		}
		PreviousResponseID string `json:"previous_response_id"`
	}
	if err := json.Unmarshal(e.sb.LastRequest(), &body); err != nil {
		t.Fatal(err)
	}
	for _, it := range body.Input {
		var parts []struct{ Text string }
		var s string
		if json.Unmarshal(it.Content, &s) == nil {
			parts = append(parts, struct{ Text string }{s})
		} else {
			_ = json.Unmarshal(it.Content, &parts)
		}
		var texts []string
		for _, p := range parts {
			texts = append(texts, p.Text)
		}
		items = append(items, it.Role+": "+strings.Join(texts, " "))
	}
	return items, body.PreviousResponseID != ""
}

func say(role, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRole(role))
}

// itemIDs lists a page's item ids.
func itemIDs(data []conversations.ConversationItemUnion) []string {
	var out []string
	for _, it := range data {
		out = append(out, it.ID)
	}
	return out
}

// TestGatewayConversations: OpenAI's Conversations API with openai-go as
// the client: create with items and metadata, get, update, the items
// listed and paged both ways, items added, read and deleted; a response
// created in the conversation is sent its items as prior context (and no
// previous_response_id: the items are the whole history), runs in the
// Aptix conversation of the same id, adds its input and output items, and
// the next response sees them; conversation with previous_response_id is a
// 400; an unknown or deleted conversation is a 404.
func TestGatewayConversations(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)

	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Items:    []responses.ResponseInputItemUnionParam{say("user", "My name is Ada."), say("assistant", "Noted, Ada.")},
		Metadata: shared.Metadata{"topic": "names"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(conv.ID, "conv_") || conv.Object != "conversation" || conv.CreatedAt == 0 || conv.Metadata.(map[string]any)["topic"] != "names" {
		t.Fatalf("created %+v", conv)
	}
	got, err := client.Conversations.Get(ctx, conv.ID)
	if err != nil || got.ID != conv.ID || got.CreatedAt != conv.CreatedAt {
		t.Fatalf("get: %+v %v", got, err)
	}
	upd, err := client.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"topic": "greetings", "lang": "en"}})
	if err != nil || upd.Metadata.(map[string]any)["topic"] != "greetings" || upd.Metadata.(map[string]any)["lang"] != "en" {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if got, _ := client.Conversations.Get(ctx, conv.ID); got.Metadata.(map[string]any)["topic"] != "greetings" {
		t.Fatalf("update not kept: %+v", got.Metadata)
	}

	// A response in the conversation: the model sees the items first.
	r1, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What is my name?")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Conversation.ID != conv.ID || r1.Status != responses.ResponseStatusCompleted {
		t.Fatalf("r1 conversation %+v status %s", r1.Conversation, r1.Status)
	}
	sent, continued := upstreamInput(t, e)
	if continued || len(sent) != 3 || sent[0] != "user: My name is Ada." || sent[1] != "assistant: Noted, Ada." || !strings.Contains(sent[2], "What is my name?") {
		t.Fatalf("the model was sent %q (continued %v)", sent, continued)
	}
	if _, aptixConv := e.lastCompleted(); aptixConv != conv.ID {
		t.Fatalf("the turn ran in Aptix conversation %s, want %s", aptixConv, conv.ID)
	}

	// The second response (conversation as an object) sees the first's
	// input and output too.
	r2, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say it again.")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: conv.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	sent, continued = upstreamInput(t, e)
	if continued || len(sent) != 5 || sent[2] != "user: What is my name?" || sent[3] != "assistant: "+r1.OutputText() || !strings.Contains(sent[4], "Say it again.") {
		t.Fatalf("the second response's model was sent %q (continued %v)", sent, continued)
	}
	if r2.Conversation.ID != conv.ID {
		t.Fatalf("r2 conversation %+v", r2.Conversation)
	}

	// The items: 2 created, r1's input and output, r2's input and output.
	all, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	ids := itemIDs(all.Data)
	if len(ids) != 6 || all.HasMore || ids[3] != r1.Output[0].ID || ids[5] != r2.Output[0].ID || all.Data[2].Role != "user" || all.Data[3].Role != "assistant" {
		t.Fatalf("items %v (has_more %v)", ids, all.HasMore)
	}
	if all.Data[2].AsMessage().Content[0].Text != "What is my name?" {
		t.Fatalf("r1's input item %+v", all.Data[2])
	}
	// Paging: newest first by default, two at a time.
	var paged []string
	page, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: openai.Int(2)})
	for n := 0; err == nil && page != nil; n++ {
		if n > 3 {
			t.Fatal("paging does not end")
		}
		paged = append(paged, itemIDs(page.Data)...)
		if len(page.Data) != 2 || page.HasMore != (len(paged) < 6) || page.LastID != page.Data[1].ID {
			t.Fatalf("page %d: %v has_more %v last_id %s", n, itemIDs(page.Data), page.HasMore, page.LastID)
		}
		page, err = page.GetNextPage()
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if paged[i] != ids[len(ids)-1-i] {
			t.Fatalf("paged desc %v, want the reverse of %v", paged, ids)
		}
	}
	st, _, body := call(t, "GET", url+"/v1/conversations/"+conv.ID+"/items?limit=101", "", nil)
	if param, code := errorOf(t, body); st != 400 || param != "limit" || code != "invalid_value" {
		t.Fatalf("limit 101: %d %s", st, body)
	}
	st, _, body = call(t, "GET", url+"/v1/conversations/"+conv.ID+"/items?include[]=message.output_text.logprobs&order=asc&after="+ids[4], "", nil)
	if st != 200 || !strings.Contains(body, ids[5]) || strings.Contains(body, ids[4]) {
		t.Fatalf("include and after: %d %s", st, body)
	}
	// r2's own input items exclude the conversation's.
	in2, err := client.Responses.InputItems.List(ctx, r2.ID, responses.InputItemListParams{})
	if err != nil || len(in2.Data) != 1 || in2.Data[0].ID != ids[4] {
		t.Fatalf("r2 input items %+v %v", in2.Data, err)
	}

	// Items added, read, deleted.
	added, err := client.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
		Items: []responses.ResponseInputItemUnionParam{say("user", "Also: I like tea."), say("developer", "Be brief.")}})
	if err != nil || added.Object != "list" || len(added.Data) != 2 || added.FirstID != added.Data[0].ID || added.LastID != added.Data[1].ID {
		t.Fatalf("added %+v %v", added, err)
	}
	item, err := client.Conversations.Items.Get(ctx, conv.ID, added.Data[0].ID, conversations.ItemGetParams{})
	if err != nil || item.ID != added.Data[0].ID || item.AsMessage().Content[0].Text != "Also: I like tea." {
		t.Fatalf("item %+v %v", item, err)
	}
	after, err := client.Conversations.Items.Delete(ctx, conv.ID, ids[0])
	if err != nil || after.ID != conv.ID || after.Object != "conversation" {
		t.Fatalf("delete item: %+v %v", after, err)
	}
	_, err = client.Conversations.Items.Get(ctx, conv.ID, ids[0], conversations.ItemGetParams{})
	apiError(t, err, 404, "not_found")
	_, err = client.Conversations.Items.Delete(ctx, conv.ID, ids[0])
	apiError(t, err, 404, "not_found")
	// A deleted item is no longer context; an added one is.
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Third.")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}}); err != nil {
		t.Fatal(err)
	}
	sent, _ = upstreamInput(t, e)
	if len(sent) != 8 || sent[0] != "assistant: Noted, Ada." || sent[5] != "user: Also: I like tea." || sent[6] != "developer: Be brief." {
		t.Fatalf("after the edits the model was sent %q", sent)
	}

	// conversation with previous_response_id: OpenAI's 400.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1", PreviousResponseID: openai.String(r1.ID),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("both")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	if ae := apiError(t, err, 400, "mutually_exclusive"); ae.Param != "conversation" || ae.Type != "invalid_request_error" {
		t.Fatalf("param %q type %q", ae.Param, ae.Type)
	}

	// Delete: answered as OpenAI does, then gone everywhere.
	del, err := client.Conversations.Delete(ctx, conv.ID)
	if err != nil || del.ID != conv.ID || !del.Deleted || del.Object != "conversation.deleted" {
		t.Fatalf("delete: %+v %v", del, err)
	}
	gone := "conv_0000000000000000000000000000dead"
	for _, id := range []string{conv.ID, gone} {
		_, err = client.Conversations.Get(ctx, id)
		apiError(t, err, 404, "not_found")
		_, err = client.Conversations.Items.List(ctx, id, conversations.ItemListParams{})
		apiError(t, err, 404, "not_found")
		_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("into nothing")},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)}})
		apiError(t, err, 404, "not_found")
	}
	// The responses themselves stay.
	if _, err := client.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("r1 after its conversation was deleted: %v", err)
	}
	e.settled()
}

// TestGatewayConversationHostileIDs: a conversation or item id that is no
// subject token is a 404 on every path (a 400 naming the field in a create
// body), and the gateway's NATS connection still serves afterwards.
func TestGatewayConversationHostileIDs(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	long := "conv_" + strings.Repeat("a", 5000)
	for _, id := range []string{long, "conv_a.b", "conv_a*", "conv_%3E", "conv_", "thread-7"} {
		for _, p := range []struct{ method, path, body string }{
			{"GET", "/v1/conversations/" + id, ""},
			{"POST", "/v1/conversations/" + id, `{"metadata":{}}`},
			{"DELETE", "/v1/conversations/" + id, ""},
			{"GET", "/v1/conversations/" + id + "/items", ""},
			{"POST", "/v1/conversations/" + id + "/items", `{"items":[{"role":"user","content":"x"}]}`},
			{"GET", "/v1/conversations/" + id + "/items/msg_1", ""},
			{"DELETE", "/v1/conversations/" + id + "/items/msg_1", ""},
			{"GET", "/v1/conversations/" + conv.ID + "/items/" + strings.Replace(id, "conv_", "msg_", 1), ""},
			{"DELETE", "/v1/conversations/" + conv.ID + "/items/" + strings.Replace(id, "conv_", "msg_", 1), ""},
		} {
			st, _, body := call(t, p.method, url+p.path, p.body, nil)
			if _, code := errorOf(t, body); st != http.StatusNotFound || code != "not_found" {
				t.Fatalf("%s %.60s: %d %s, want 404 not_found", p.method, p.path, st, code)
			}
		}
	}
	for _, tc := range []struct{ id, code string }{{long, "string_above_max_length"}, {"conv_a.b", "invalid_value"}} {
		st, _, body := call(t, "POST", url+"/v1/responses", `{"model":"sandbox-1","input":"x","conversation":"`+tc.id+`"}`, nil)
		if param, code := errorOf(t, body); st != 400 || param != "conversation" || code != tc.code {
			t.Fatalf("create with conversation %.20s: %d %s %s", tc.id, st, param, code)
		}
	}
	if !e.nc.IsConnected() {
		t.Fatalf("the NATS connection is %s", e.nc.Status())
	}
	if _, err := client.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
		Items: []responses.ResponseInputItemUnionParam{say("user", "still there?")}}); err != nil {
		t.Fatalf("after the hostile ids: %v", err)
	}
}

// TestGatewayConversationsPerPrincipal: under APTIX_AUTH=keys a
// conversation is its creator's: for another principal every endpoint,
// and a response created in it, is a 404, and nothing of it changes.
func TestGatewayConversationsPerPrincipal(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, _, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := keys.Create(ctx, "bob", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	ca, cb := as(url, alice), as(url, bob)
	conv, err := ca.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{say("user", "Alice's secret")},
		Metadata: shared.Metadata{"owner": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	if err != nil || len(first.Data) != 1 {
		t.Fatalf("alice's items: %v", err)
	}
	itemID := first.Data[0].ID

	_, err = cb.Conversations.Get(ctx, conv.ID)
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Update(ctx, conv.ID, conversations.ConversationUpdateParams{Metadata: shared.Metadata{"owner": "bob"}})
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Delete(ctx, conv.ID)
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{say("user", "Bob was here")}})
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Items.Get(ctx, conv.ID, itemID, conversations.ItemGetParams{})
	apiError(t, err, 404, "not_found")
	_, err = cb.Conversations.Items.Delete(ctx, conv.ID, itemID)
	apiError(t, err, 404, "not_found")
	_, err = cb.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("read Alice's")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	apiError(t, err, 404, "not_found")
	// The same 404 as a conversation that never existed.
	_, never := cb.Conversations.Get(ctx, "conv_0000000000000000000000000000dead")
	if a, b := apiError(t, never, 404, "not_found").Message, apiError(t, err, 404, "not_found").Message; strings.ReplaceAll(a, "conv_0000000000000000000000000000dead", conv.ID) != b {
		t.Fatalf("another's conversation must read as unknown: %q vs %q", b, a)
	}

	// Alice's conversation is as she left it, and hers to use.
	got, err := ca.Conversations.Get(ctx, conv.ID)
	if err != nil || got.Metadata.(map[string]any)["owner"] != "alice" {
		t.Fatalf("alice's conversation: %+v %v", got, err)
	}
	r, err := ca.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What did I say?")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	if err != nil || r.Conversation.ID != conv.ID {
		t.Fatalf("alice's response: %v", err)
	}
	if sent, _ := upstreamInput(t, e); len(sent) != 2 || sent[0] != "user: Alice's secret" {
		t.Fatalf("the model was sent %q", sent)
	}
	items, err := ca.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{})
	if err != nil || len(items.Data) != 3 {
		t.Fatalf("alice's items after her response: %d %v", len(items.Data), err)
	}
}

// TestWebSocketConversation: response.create with conversation over a
// WebSocket shares the create path: the second response on the socket sees
// the first's input and output, and both land in the conversation.
func TestWebSocketConversation(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	ctx := ctxT(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{say("user", "The code word is plum.")}})
	if err != nil {
		t.Fatal(err)
	}
	c := wsDial(t, url)
	wsSend(t, c, map[string]any{"input": "What is the code word?", "conversation": conv.ID})
	w1 := wsRead(t, c)
	if w1.err != nil {
		t.Fatalf("first create: %s", w1.err)
	}
	r1 := w1.response(t)
	wsSend(t, c, map[string]any{"input": "Once more.", "conversation": map[string]string{"id": conv.ID}})
	w2 := wsRead(t, c)
	if w2.err != nil {
		t.Fatalf("second create: %s", w2.err)
	}
	var echo struct {
		Conversation struct{ ID string } `json:"conversation"`
	}
	_ = json.Unmarshal(w2.final, &echo)
	if echo.Conversation.ID != conv.ID {
		t.Fatalf("conversation echo %s", w2.final)
	}
	sent, continued := upstreamInput(t, e)
	if continued || len(sent) != 4 || sent[0] != "user: The code word is plum." || sent[1] != "user: What is the code word?" ||
		sent[2] != "assistant: "+r1.text() || !strings.Contains(sent[3], "Once more.") {
		t.Fatalf("the second response's model was sent %q (continued %v)", sent, continued)
	}
	items, err := client.Conversations.Items.List(context.Background(), conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil || len(items.Data) != 5 || items.Data[4].Role != "assistant" {
		t.Fatalf("items %v %v", itemIDs(items.Data), err)
	}
	// An unknown conversation is an error event, and the socket goes on.
	wsSend(t, c, map[string]any{"input": "x", "conversation": "conv_0000000000000000000000000000dead"})
	if w := wsRead(t, c); w.errCode() != "not_found" {
		t.Fatalf("unknown conversation over the socket: %s", w.err)
	}
	wsSend(t, c, map[string]any{"input": "x", "conversation": conv.ID, "previous_response_id": r1.ID})
	if w := wsRead(t, c); w.errCode() != "mutually_exclusive" {
		t.Fatalf("conversation and previous_response_id over the socket: %s", w.err)
	}
}

// TestGatewayConversationConcurrentReplicas: two gateway replicas adding
// to one conversation at once lose nothing (compare-and-set on the
// record), and either lists what both added.
func TestGatewayConversationConcurrentReplicas(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	_, c1 := e.gateway()
	_, c2 := e.gateway()
	ctx := ctxT(t)
	conv, err := c1.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	const each = 8
	errs := make(chan error, 2*each+2)
	var wg sync.WaitGroup
	for i := 0; i < each; i++ {
		for n, c := range []openai.Client{c1, c2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{
					Items: []responses.ResponseInputItemUnionParam{say("user", fmt.Sprintf("replica %d item %d", n+1, i))}})
				errs <- err
			}()
		}
	}
	for n, c := range []openai.Client{c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("question via replica %d", n+1))},
				Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			var ae *openai.Error
			if errors.As(err, &ae) {
				t.Fatal(ae.Message)
			}
			t.Fatal(err)
		}
	}
	for _, c := range []openai.Client{c1, c2} {
		items, err := c.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Limit: openai.Int(100)})
		if err != nil || len(items.Data) != 2*each+4 {
			t.Fatalf("%d items (%v), want %d: %v", len(items.Data), err, 2*each+4, itemIDs(items.Data))
		}
		seen := map[string]bool{}
		for _, id := range itemIDs(items.Data) {
			if seen[id] {
				t.Fatalf("item %s listed twice", id)
			}
			seen[id] = true
		}
	}
}

// TestGatewayConversationFull: a conversation's record is one KV value, so
// it holds at most one NATS message (1 MiB here). Output that no longer
// fits is still listed (not kept); a response or items that would add to a
// full conversation are refused with 400 conversation_too_large, and the
// conversation stays readable.
func TestGatewayConversationFull(t *testing.T) {
	big := strings.Repeat("y", 600<<10)
	e := newEnv(t, sandbox.Options{Script: []string{big, big}}, func(c *Config) {
		p, _ := c.Profiles.Get("sandbox")
		p.AttemptTimeout, p.TurnTimeout = 15*time.Second, 30*time.Second
		c.Profiles.Put(p)
	})
	_, client := e.gateway(func(c *httpapi.Config) { c.MaxBodyBytes = 512 << 10 }) // the default: half the max payload
	ctx := ctxT(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(text string) error {
		_, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
		return err
	}
	if err := ask("first"); err != nil {
		t.Fatal(err)
	}
	if err := ask("second"); err != nil { // its 600 KiB of history fit; its output does not
		t.Fatal(err)
	}
	items, err := client.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc})
	if err != nil || len(items.Data) != 4 || len(items.Data[3].AsMessage().Content[0].Text) != len(big) {
		t.Fatalf("items of a full conversation: %d %v", len(items.Data), err)
	}
	apiError(t, ask("third"), 400, "conversation_too_large")
	_, err = client.Conversations.Items.New(ctx, conv.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{say("user", strings.Repeat("z", 450<<10))}})
	apiError(t, err, 400, "conversation_too_large")
	if _, err := client.Conversations.Get(ctx, conv.ID); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayConversationStreamAndBackground: a streamed create and a
// background one in a conversation add their items too. A background
// response's input is listed at once and its output once it has ended,
// with nothing waiting for it: the read that finds it ended puts it in.
func TestGatewayConversationStreamAndBackground(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 400 * time.Millisecond})
	_, client := e.gateway()
	ctx := ctxT(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	in := conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc}
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("streamed question")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
	final := ""
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" {
			final = ev.Response.OutputText()
			if ev.Response.Conversation.ID != conv.ID {
				t.Fatalf("streamed response's conversation %+v", ev.Response.Conversation)
			}
		}
	}
	if err := stream.Err(); err != nil || final == "" {
		t.Fatalf("stream: %v (final %q)", err, final)
	}
	items, err := client.Conversations.Items.List(ctx, conv.ID, in)
	if err != nil || len(items.Data) != 2 || items.Data[1].AsMessage().Content[0].Text != final {
		t.Fatalf("after the stream: %v %v", itemIDs(items.Data), err)
	}

	params := bgParams("background question")
	params.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
	bg, err := client.Responses.New(ctx, params)
	if err != nil || bg.Status != responses.ResponseStatusQueued {
		t.Fatalf("background: %v", err)
	}
	items, err = client.Conversations.Items.List(ctx, conv.ID, in)
	if err != nil || len(items.Data) != 3 || items.Data[2].AsMessage().Content[0].Text != "background question" {
		t.Fatalf("while the background response runs: %v %v", itemIDs(items.Data), err)
	}
	done, _ := waitStatus(t, client, bg.ID, "completed")
	items, err = client.Conversations.Items.List(ctx, conv.ID, in)
	if err != nil || len(items.Data) != 4 || items.Data[3].ID != done.Output[0].ID {
		t.Fatalf("after the background response: %v %v", itemIDs(items.Data), err)
	}
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("last")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}}); err != nil {
		t.Fatal(err)
	}
	if sent, _ := upstreamInput(t, e); len(sent) != 5 || sent[3] != "assistant: "+done.OutputText() {
		t.Fatalf("the model was sent %q", sent)
	}
}

// TestGatewayConversationChatBackend: a conversation object works on a
// Chat Completions backend, which keeps nothing: its items are the
// messages each turn sends.
func TestGatewayConversationChatBackend(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, chatProfile("", nil, "sandbox-1"))
	_, client := e.gateway()
	ctx := ctxT(t)
	conv, err := client.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{say("user", "My name is Ada.")}})
	if err != nil {
		t.Fatal(err)
	}
	var r1 *responses.Response
	for _, q := range []string{"What is my name?", "Again?"} {
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "sandbox-1",
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(q)},
			Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}})
		if err != nil {
			t.Fatal(err)
		}
		if r1 == nil {
			r1 = r
		}
	}
	var body struct{ Messages []fakeMsg }
	if err := json.Unmarshal(e.sb.LastRequest(), &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range body.Messages {
		got = append(got, m.Role+": "+m.text())
	}
	if len(got) != 4 || got[0] != "user: My name is Ada." || got[1] != "user: What is my name?" || got[2] != "assistant: "+r1.OutputText() || !strings.Contains(got[3], "Again?") {
		t.Fatalf("the chat backend was sent %q", got)
	}
}
