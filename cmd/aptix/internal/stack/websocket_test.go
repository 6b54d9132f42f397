package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// WebSocket mode: the seven Open Responses WebSocket compliance
// tests (websocket-response, -sequential-responses, -continuation,
// -reconnect-store-false-recovery, -previous-response-not-found,
// -failed-continuation-evicts-cache, -compact-new-chain) reproduced against
// the gateway over the in-process pipeline, every frame validated against
// the Open Responses schema, plus what the issue adds.

var wsValidator conformance.Validator

// wsDial opens a socket on the gateway at url (http://…).
func wsDial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// wsTurn is what one response.create got back: its events (a response
// stream) or its error event.
type wsTurn struct {
	events []conformance.Event
	final  json.RawMessage // the terminal event's response
	err    json.RawMessage // the error event, when the create was refused
}

func (w wsTurn) errCode() string {
	var ev struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(w.err, &ev)
	return ev.Error.Code
}

func (w wsTurn) response(t *testing.T) wsResponse {
	t.Helper()
	var r wsResponse
	if err := json.Unmarshal(w.final, &r); err != nil {
		t.Fatalf("final response: %v: %s", err, w.final)
	}
	return r
}

type wsResponse struct {
	ID                 string  `json:"id"`
	Status             string  `json:"status"`
	Store              bool    `json:"store"`
	PreviousResponseID *string `json:"previous_response_id"`
	Output             []struct {
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
}

func (r wsResponse) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// wsSend sends one response.create.
func wsSend(t *testing.T, c *websocket.Conn, msg map[string]any) {
	t.Helper()
	if _, ok := msg["type"]; !ok {
		msg["type"] = "response.create"
	}
	if _, ok := msg["model"]; !ok {
		msg["model"] = "sandbox-1"
	}
	b, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// wsRead reads the frames of one response.create, up to its terminal or
// error event, and checks what the compliance suite checks: every frame a
// JSON text frame valid against the schema of its type, sequence_number
// increasing, and a response stream's item lifecycle.
func wsRead(t *testing.T, c *websocket.Conn) wsTurn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var w wsTurn
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d events: %v", len(w.events), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("frame type %v, want text", typ)
		}
		var head struct {
			Type     string          `json:"type"`
			Seq      int64           `json:"sequence_number"`
			Response json.RawMessage `json:"response"`
		}
		_ = json.Unmarshal(data, &head)
		if err := wsValidator.Event(data); err != nil && !(errors.Is(err, conformance.ErrUnknownEvent) && openAIOnlyEvent(head.Type)) {
			t.Fatalf("frame fails the Open Responses schema: %v\n%s", err, data)
		}
		if head.Type == "error" {
			if len(w.events) != 0 {
				t.Fatalf("error event inside a response stream: %s", data)
			}
			w.err = data
			return w
		}
		if n := len(w.events); n > 0 && head.Seq <= w.events[n-1].Seq {
			t.Fatalf("sequence_number %d after %d", head.Seq, w.events[n-1].Seq)
		}
		w.events = append(w.events, conformance.Event{Name: head.Type, Type: head.Type, Seq: head.Seq, Data: data})
		switch head.Type {
		case "response.completed", "response.failed", "response.incomplete":
			w.final = head.Response
			if err := wsValidator.Response(w.final); err != nil {
				t.Fatalf("final response fails the schema: %v", err)
			}
			if err := conformance.CheckLifecycle(conformance.Stream{Events: w.events, Final: w.final}); err != nil {
				t.Fatalf("event lifecycle: %v", err)
			}
			return w
		}
	}
}

// openAIOnlyEvent reports whether typ is one of OpenAI's hosted-tool
// progress events (mcp_list_tools, mcp_call, file_search_call), which the
// Open Responses schema does not define and the gateway sends as OpenAI does.
func openAIOnlyEvent(typ string) bool {
	for _, p := range []string{"response.mcp_list_tools.", "response.mcp_call.", "response.mcp_call_arguments.", "response.file_search_call."} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

func wsCreate(t *testing.T, c *websocket.Conn, msg map[string]any) wsTurn {
	t.Helper()
	wsSend(t, c, msg)
	return wsRead(t, c)
}

func wsCompleted(t *testing.T, w wsTurn) wsResponse {
	t.Helper()
	if w.err != nil {
		t.Fatalf("error event: %s", w.err)
	}
	r := w.response(t)
	if r.Status != "completed" || len(r.Output) == 0 {
		t.Fatalf("status %s, %d output items: %s", r.Status, len(r.Output), w.final)
	}
	return r
}

func wsRefused(t *testing.T, w wsTurn, code string) {
	t.Helper()
	if w.err == nil {
		t.Fatalf("want error event %s, got a response: %s", code, w.final)
	}
	if w.errCode() != code {
		t.Fatalf("error code %q, want %q: %s", w.errCode(), code, w.err)
	}
}

// websocket-response, websocket-sequential-responses, and the same events
// as SSE: created, in_progress, item events, completed.
func TestWebSocketResponse(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)

	w := wsCreate(t, c, map[string]any{"input": []any{map[string]any{"type": "message", "role": "user", "content": "Count from 1 to 3."}}})
	r := wsCompleted(t, w)
	if !strings.Contains(r.text(), "Count from 1 to 3.") || !r.Store {
		t.Fatalf("text %q store %v", r.text(), r.Store)
	}
	types := map[string]int{}
	for _, ev := range w.events {
		types[ev.Type]++
	}
	if w.events[0].Type != "response.created" || w.events[0].Seq != 0 || types["response.output_text.delta"] == 0 || types["response.output_item.done"] == 0 {
		t.Fatalf("events %v", types)
	}

	// websocket-sequential-responses: two store:false creates, one after the other.
	for _, word := range []string{"first", "second"} {
		r := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "input": "Reply with exactly: " + word}))
		if r.Store || !strings.Contains(r.text(), word) {
			t.Fatalf("%s: store %v text %q", word, r.Store, r.text())
		}
	}
}

// websocket-continuation: a store:false response continued on the same
// socket with previous_response_id and only the new input.
func TestWebSocketContinuation(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, client := e.gateway()
	c := wsDial(t, url)
	first := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "input": "Remember the code word: cobalt. Reply with OK."}))
	second := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "previous_response_id": first.ID,
		"input": "What is the code word? Reply with only the code word."}))
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID {
		t.Fatalf("previous_response_id %v, want %s", second.PreviousResponseID, first.ID)
	}
	// The model saw the chain: the sandbox continued its own response.
	sent := sentBody(t, e.sb.LastRequest())
	if sent["previous_response_id"] == nil && !strings.Contains(string(e.sb.LastRequest()), "cobalt") {
		t.Fatalf("the continuation reached the model without its history: %s", e.sb.LastRequest())
	}
	// store:false: never readable over HTTP.
	_, err := client.Responses.Get(ctxT(t), second.ID, responses.ResponseGetParams{})
	apiError(t, err, 404, "not_found")
}

// websocket-reconnect-store-false-recovery: a store:false chain does not
// survive a reconnect (previous_response_not_found on the new socket, which
// stays usable for a fresh response).
func TestWebSocketReconnectStoreFalseRecovery(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)
	first := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "input": "Remember the code word: copper. Reply with OK."}))
	_ = c.Close(websocket.StatusNormalClosure, "")

	c2 := wsDial(t, url)
	w := wsCreate(t, c2, map[string]any{"store": false, "previous_response_id": first.ID, "input": "Try to continue after reconnect. Reply with exactly: reconnected"})
	wsRefused(t, w, "previous_response_not_found")
	r := wsCompleted(t, wsCreate(t, c2, map[string]any{"store": false, "input": []any{map[string]any{"type": "message", "role": "user",
		"content": "The previous store:false chain could not continue after reconnect. Start a new response and reply with exactly: recovered"}}}))
	if r.PreviousResponseID != nil {
		t.Fatalf("recovery continued %v", *r.PreviousResponseID)
	}
}

// websocket-previous-response-not-found: an unknown id, as an error event
// in OpenAI's error shape; the socket stays open.
func TestWebSocketPreviousResponseNotFound(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)
	missing := fmt.Sprintf("resp_openresponses_missing_%d", time.Now().UnixNano())
	w := wsCreate(t, c, map[string]any{"store": false, "previous_response_id": missing, "input": "This should fail because the previous response is missing."})
	wsRefused(t, w, "previous_response_not_found")
	var ev struct {
		Status int `json:"status"`
		Error  struct {
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(w.err, &ev)
	if ev.Status != 400 || ev.Error.Type != "invalid_request_error" || ev.Error.Param == nil || *ev.Error.Param != "previous_response_id" || !strings.Contains(ev.Error.Message, missing) {
		t.Fatalf("error event %s", w.err)
	}
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "still open"}))
}

// websocket-failed-continuation-evicts-cache: a continuation that fails
// (a function_call_output answering no call) evicts the id it continued:
// the retry is previous_response_not_found.
func TestWebSocketFailedContinuationEvictsCache(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)
	first := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "input": "Remember the code word: ember. Reply with OK."}))
	failed := wsCreate(t, c, map[string]any{"store": false, "previous_response_id": first.ID, "input": []any{map[string]any{
		"type": "function_call_output", "call_id": "call_openresponses_missing", "output": "No matching tool call exists in the previous response."}}})
	if failed.err == nil && failed.response(t).Status != "failed" {
		t.Fatalf("the continuation did not fail: %s", failed.final)
	}
	retry := wsCreate(t, c, map[string]any{"store": false, "previous_response_id": first.ID, "input": "Try to continue after the failed turn. Reply with exactly: stale"})
	wsRefused(t, retry, "previous_response_not_found")
}

// websocket-compact-new-chain: /responses/compact output starts a new chain
// over the socket (no previous_response_id).
func TestWebSocketCompactNewChain(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	body := `{"model":"sandbox-1","input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Remember the compaction code word: slate."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"OK."}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Compress this conversation for later continuation."}]}]}`
	resp, err := http.Post(url+"/v1/responses/compact", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var compacted struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&compacted); err != nil || resp.StatusCode != 200 || len(compacted.Output) == 0 {
		t.Fatalf("compact: %d %v %v", resp.StatusCode, err, compacted)
	}
	input := make([]any, 0, len(compacted.Output)+1)
	for _, it := range compacted.Output {
		input = append(input, it)
	}
	input = append(input, map[string]any{"type": "message", "role": "user", "content": "Continue from here. Reply with exactly: compacted"})
	c := wsDial(t, url)
	r := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "input": input, "tools": []any{}}))
	if r.PreviousResponseID != nil || !strings.Contains(r.text(), "Compacted history:") {
		t.Fatalf("previous %v text %q", r.PreviousResponseID, r.text())
	}
}

// The field a socket refuses, named; a message of another type; the
// socket stays open after each. stream and stream_options are ignored
// (Codex sends "stream": true).
func TestWebSocketRefusedFields(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)
	for _, f := range []string{"background"} {
		w := wsCreate(t, c, map[string]any{"input": "x", f: true})
		wsRefused(t, w, "unknown_parameter")
		if !strings.Contains(string(w.err), `"param":"`+f+`"`) {
			t.Fatalf("%s: %s", f, w.err)
		}
	}
	wsRefused(t, wsCreate(t, c, map[string]any{"type": "response.cancel"}), "unknown_event_type")
	wsRefused(t, wsCreate(t, c, map[string]any{"input": "x", "bogus": 1}), "unknown_parameter")
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "fine"}))
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "fine", "stream": true, "stream_options": map[string]any{"include_obfuscation": false}}))
}

// One response in flight per socket: a second response.create while the
// first runs gets an error event, and the first stream is not interleaved.
func TestWebSocketOneInFlight(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 400 * time.Millisecond})
	url, _ := e.gateway()
	c := wsDial(t, url)
	wsSend(t, c, map[string]any{"input": "the first"})
	wsSend(t, c, map[string]any{"input": "the second"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var refused, completed int
	var seqs []int64
	for completed == 0 {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := wsValidator.Event(data); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		var head struct {
			Type     string `json:"type"`
			Seq      int64  `json:"sequence_number"`
			Response struct {
				ID     string `json:"id"`
				Output []struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			} `json:"response"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &head)
		switch head.Type {
		case "error":
			if head.Error.Code != "response_in_progress" {
				t.Fatalf("error %s", data)
			}
			refused++
			continue
		case "response.completed":
			completed++
			if !strings.Contains(string(data), "the first") || strings.Contains(string(data), "the second") {
				t.Fatalf("completed %s", data)
			}
		}
		if n := len(seqs); n > 0 && head.Seq != seqs[n-1]+1 {
			t.Fatalf("sequence %d after %d: interleaved", head.Seq, seqs[n-1])
		}
		seqs = append(seqs, head.Seq)
	}
	if refused != 1 {
		t.Fatalf("%d refusals, want 1", refused)
	}
	// The socket is free again.
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "the third"}))
}

// A socket dropped mid-response with store:true: the turn completes and
// GET returns it.
func TestWebSocketDroppedSocketKeepsStoredResponse(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 300 * time.Millisecond})
	url, client := e.gateway()
	c := wsDial(t, url)
	wsSend(t, c, map[string]any{"input": "I will hang up"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, data, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Type     string `json:"type"`
		Response struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &created); created.Type != "response.created" {
		t.Fatalf("first frame %s", data)
	}
	_ = c.CloseNow() // no close handshake: the TCP connection just goes
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := client.Responses.Get(context.Background(), created.Response.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == responses.ResponseStatusCompleted {
			if !strings.Contains(got.OutputText(), "I will hang up") {
				t.Fatalf("output %q", got.OutputText())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 10s", got.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.settled()
}

// The connection limit (short here): an idle socket gets
// websocket_connection_limit_reached and is closed; a busy one finishes
// its response first.
func TestWebSocketConnectionLimit(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 500 * time.Millisecond})
	url, _ := e.gateway(func(c *httpapi.Config) { c.WSMaxAge = 300 * time.Millisecond })

	idle := wsDial(t, url)
	w := wsRead(t, idle)
	wsRefused(t, w, "websocket_connection_limit_reached")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := idle.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the limit: %v, want a normal close", err)
	}

	busy := wsDial(t, url)
	wsCompleted(t, wsCreate(t, busy, map[string]any{"input": "a slow one"})) // outlives the limit
	wsRefused(t, wsRead(t, busy), "websocket_connection_limit_reached")
	if _, _, err := busy.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("after the limit: %v, want a normal close", err)
	}
}

// A plain GET /v1/responses (no Upgrade) is told what the path is for.
func TestWebSocketPlainGet(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	resp, err := http.Get(url + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
}

// A client-side tool loop of 20 rounds on one socket: each round sends the
// previous call's function_call_output with previous_response_id (and a
// user line the sandbox turns into the next call); every continuation is
// served from the socket's memory.
func TestWebSocketToolLoop(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	c := wsDial(t, url)
	tools := []any{map[string]any{"type": "function", "name": "lookup", "description": "Look something up", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}}}}
	r := wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "tools": tools, "input": `Look it up [call:lookup {"q":"round 0"}]`}))
	const rounds = 20
	for i := 1; i <= rounds; i++ {
		if len(r.Output) == 0 || r.Output[len(r.Output)-1].Type != "function_call" || r.Output[len(r.Output)-1].Name != "lookup" {
			t.Fatalf("round %d: no call: %+v", i, r.Output)
		}
		call := r.Output[len(r.Output)-1].CallID
		input := []any{map[string]any{"type": "function_call_output", "call_id": call, "output": fmt.Sprintf(`{"answer":%d}`, i)}}
		if i < rounds {
			input = append(input, map[string]any{"type": "message", "role": "user", "content": fmt.Sprintf(`[call:lookup {"q":"round %d"}]`, i)})
		}
		prev := r.ID
		r = wsCompleted(t, wsCreate(t, c, map[string]any{"store": false, "tools": tools, "previous_response_id": prev, "input": input}))
		if r.PreviousResponseID == nil || *r.PreviousResponseID != prev {
			t.Fatalf("round %d: previous %v", i, r.PreviousResponseID)
		}
	}
	if last := r.Output[len(r.Output)-1]; last.Type != "message" {
		t.Fatalf("after %d rounds: %+v", rounds, r.Output)
	}
	e.settled()
}

// Keep-alive: a client that reads answers the gateway's pings and keeps its
// socket; one that stops reading (no pongs) is closed within two intervals.
func TestWebSocketKeepAlive(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway(func(c *httpapi.Config) { c.WSPingInterval = 50 * time.Millisecond })

	live2 := wsDial(t, url)
	frames := make(chan error, 1)
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	go func() {
		_, _, err := live2.Read(rctx)
		frames <- err
	}()
	time.Sleep(400 * time.Millisecond)
	select {
	case err := <-frames:
		t.Fatalf("a reading client lost its socket: %v", err)
	default:
	}
	rcancel()

	mute := wsDial(t, url)
	time.Sleep(400 * time.Millisecond) // no Read: no pongs
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := mute.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("a client that never answered pings still has its socket (read: %v)", err)
	}
}

// TestWebSocketAuthAtHandshake: with API keys required, an upgrade without
// a key (or with a revoked one) is refused with 401 before any socket
// exists; with a key the socket works, and its responses belong to the
// key's principal (another caller's GET is a 404).
func TestWebSocketAuthAtHandshake(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, arec, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob, _, _ := keys.Create(ctx, "bob", "", 0)
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	wsURL := "ws" + strings.TrimPrefix(url, "http") + "/v1/responses"
	dial := func(key string) (*websocket.Conn, *http.Response, error) {
		o := &websocket.DialOptions{HTTPHeader: http.Header{}}
		if key != "" {
			o.HTTPHeader.Set("Authorization", "Bearer "+key)
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return websocket.Dial(dctx, wsURL, o)
	}
	if _, resp, err := dial(""); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: err %v, response %v", err, resp)
	}
	c, _, err := dial(alice)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	r := wsCompleted(t, wsCreate(t, c, map[string]any{"model": "sandbox-1", "input": "hello over an authenticated socket"}))
	if st, _, _ := call(t, "GET", url+"/v1/responses/"+r.ID, "", bearer(bob)); st != http.StatusNotFound {
		t.Fatalf("bob read alice's socket response: %d", st)
	}
	if st, _, _ := call(t, "GET", url+"/v1/responses/"+r.ID, "", bearer(alice)); st != http.StatusOK {
		t.Fatalf("alice GET: %d", st)
	}
	if _, err := keys.Revoke(ctx, arec.ID); err != nil {
		t.Fatal(err)
	}
	if _, resp, err := dial(alice); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key: err %v, response %v", err, resp)
	}
}
