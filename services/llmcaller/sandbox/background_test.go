package sandbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

const bgInput = `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: BG]\n\n[INSTRUCTION]\nrun in the background please"}]}]`

type bgEvent struct {
	Type     string `json:"type"`
	Seq      int    `json:"sequence_number"`
	Delta    string `json:"delta"`
	Response struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
}

// readEvents reads SSE events until the body ends (or n events, n > 0).
// A stream read to its end must end with data: [DONE], and nothing after it.
func readEvents(t *testing.T, body io.Reader, n int) []bgEvent {
	t.Helper()
	var out []bgEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if done {
			t.Fatalf("data after [DONE]: %s", line)
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var e bgEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, e)
		if n > 0 && len(out) == n {
			return out
		}
	}
	if !done {
		t.Fatalf("the stream ended without data: [DONE] after %d events", len(out))
	}
	return out
}

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func stats(t *testing.T, url string) sandbox.Stats {
	t.Helper()
	resp, err := http.Get(url + "/v1/_sandbox/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st sandbox.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBackgroundNeedsStore(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	resp, b, err := post(t, ts.URL, `{"model":"m","background":true,"store":false,`+bgInput+`}`, "")
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("%v %d %s", err, resp.StatusCode, b)
	}
	var e errBody
	if json.Unmarshal(b, &e) != nil || e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != "background" {
		t.Fatalf("error body %s", b)
	}
	if st := stats(t, ts.URL); st.Created != 0 {
		t.Fatalf("a refused request created a response: %+v", st)
	}
}

// A background response answers queued at once, spends its latency
// generating, then GET reads it completed with the same text a plain call
// gets; creates and reads are counted apart.
func TestBackgroundQueuedThenCompleted(t *testing.T) {
	ts, _ := start(t, sandbox.Options{Latency: 300 * time.Millisecond})
	began := time.Now()
	resp, b, err := post(t, ts.URL, `{"model":"m","background":true,`+bgInput+`}`, "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %s", err, b)
	}
	if took := time.Since(began); took > 200*time.Millisecond {
		t.Fatalf("background create waited %s: latency belongs to the generation", took)
	}
	var created map[string]any
	_ = json.Unmarshal(b, &created)
	id, _ := created["id"].(string)
	if created["status"] != "queued" || created["background"] != true || id == "" {
		t.Fatalf("created %s", b)
	}
	var last map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; {
		code, m := getJSON(t, ts.URL+"/v1/responses/"+id)
		if code != 200 {
			t.Fatalf("GET %d %v", code, m)
		}
		if m["status"] == "completed" {
			last = m
			break
		}
		if s := m["status"]; s != "queued" && s != "in_progress" {
			t.Fatalf("status %v", s)
		}
		if time.Now().After(deadline) {
			t.Fatal("not completed in 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("completed after %s, before the latency", took)
	}
	out, _ := json.Marshal(last["output"])
	if !strings.Contains(string(out), "Sandbox reply (mode BG) to: run in the background please.") {
		t.Fatalf("output %s", out)
	}
	// It continues like any stored response.
	if r, b, _ := post(t, ts.URL, `{"model":"m","previous_response_id":"`+id+`",`+bgInput+`}`, ""); r.StatusCode != 200 {
		t.Fatalf("continuation %s", b)
	}
	st := stats(t, ts.URL)
	if st.Created != 2 || st.Background != 1 || st.Reads < 2 || st.ByInstruction["run in the background please"] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// The creating stream drops after a few events; the response goes on, and a
// GET with starting_after replays exactly the events after that point, then
// follows the live ones to the end.
func TestBackgroundStreamResumesAfterDrop(t *testing.T) {
	ts, _ := start(t, sandbox.Options{Latency: 400 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/responses",
		strings.NewReader(`{"model":"m","background":true,"stream":true,`+bgInput+`}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := readEvents(t, resp.Body, 5)
	cancel()
	resp.Body.Close()
	if len(first) != 5 || first[0].Type != "response.created" || first[0].Response.Status != "queued" || first[1].Type != "response.queued" {
		t.Fatalf("first events %+v", first)
	}
	id := first[0].Response.ID
	lastSeen := first[len(first)-1].Seq

	r2, err := http.Get(ts.URL + "/v1/responses/" + id + "?stream=true&starting_after=" + itoa(lastSeen))
	if err != nil {
		t.Fatal(err)
	}
	rest := readEvents(t, r2.Body, 0)
	r2.Body.Close()
	if len(rest) == 0 || rest[0].Seq != lastSeen+1 || rest[len(rest)-1].Type != "response.completed" {
		t.Fatalf("resumed events %+v", rest)
	}
	var text strings.Builder
	for i, e := range append(first, rest...) {
		if e.Seq != i {
			t.Fatalf("event %d has sequence_number %d", i, e.Seq)
		}
		if e.Type == "response.output_text.delta" {
			text.WriteString(e.Delta)
		}
	}
	if !strings.HasPrefix(text.String(), "Sandbox reply (mode BG)") {
		t.Fatalf("text %q", text.String())
	}
	// Resuming a finished response replays its events.
	r3, _ := http.Get(ts.URL + "/v1/responses/" + id + "?stream=true&starting_after=" + itoa(rest[len(rest)-2].Seq))
	tail := readEvents(t, r3.Body, 0)
	r3.Body.Close()
	if len(tail) != 1 || tail[0].Type != "response.completed" {
		t.Fatalf("tail %+v", tail)
	}
	// A plain response cannot be streamed with GET; an unknown one is 404.
	_, b, _ := post(t, ts.URL, `{"model":"m",`+bgInput+`}`, "")
	var plain struct{ ID string }
	_ = json.Unmarshal(b, &plain)
	if code, _ := getJSON(t, ts.URL+"/v1/responses/"+plain.ID+"?stream=true"); code != 400 {
		t.Fatalf("stream of a plain response: %d", code)
	}
	if code, _ := getJSON(t, ts.URL+"/v1/responses/resp_nope?stream=true"); code != 404 {
		t.Fatalf("stream of an unknown response: %d", code)
	}
	if st := stats(t, ts.URL); st.Created != 2 || st.Resumes != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBackgroundCancel(t *testing.T) {
	ts, _ := start(t, sandbox.Options{Latency: 2 * time.Second})
	_, b, _ := post(t, ts.URL, `{"model":"m","background":true,`+bgInput+`}`, "")
	var created struct{ ID string }
	_ = json.Unmarshal(b, &created)
	resp, b, err := postPath(t, ts.URL+"/v1/responses/"+created.ID+"/cancel", "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %s", err, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["status"] != "cancelled" {
		t.Fatalf("cancelled %s", b)
	}
	// Cancelling again returns it unchanged; it never completes.
	_, b2, _ := postPath(t, ts.URL+"/v1/responses/"+created.ID+"/cancel", "")
	if _, m2 := getJSON(t, ts.URL+"/v1/responses/"+created.ID); m2["status"] != "cancelled" || !strings.Contains(string(b2), `"cancelled"`) {
		t.Fatalf("after cancel: %v %s", m2, b2)
	}
	if r, _, _ := postPath(t, ts.URL+"/v1/responses/resp_nope/cancel", ""); r.StatusCode != 404 {
		t.Fatalf("cancel unknown: %d", r.StatusCode)
	}
	if st := stats(t, ts.URL); st.Cancels != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBackgroundStreamError(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	resp, b, err := post(t, ts.URL, `{"model":"m","background":true,"stream":true,`+bgInput+`}`, "stream-error")
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
	evs := readEvents(t, strings.NewReader(string(b)), 0)
	if len(evs) != 3 || evs[2].Type != "error" {
		t.Fatalf("events %+v", evs)
	}
	if _, m := getJSON(t, ts.URL+"/v1/responses/"+evs[0].Response.ID); m["status"] != "failed" {
		t.Fatalf("after stream-error: %v", m)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
