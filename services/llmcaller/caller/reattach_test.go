package caller_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// Re-attach: with capability reattach, a call cut off mid-flight
// (the process dies, the connection breaks) is followed upstream, never
// paid for twice. Every count below is read at the upstream (the sandbox's
// created counter), not inside the caller.

const reattachInstruction = "tell me a fairly long story about retries and crashes"

// reattachSandbox serves a sandbox whose responses take latency to
// generate (spread over the deltas), behind a switch that makes it forget
// every response (GET → 404), as an upstream whose stored response expired.
func reattachSandbox(t *testing.T, latency time.Duration) (*httptest.Server, *sandbox.Server, *atomic.Bool) {
	t.Helper()
	srv := sandbox.New(sandbox.Options{Logger: quiet, Latency: latency})
	var forget atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forget.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/responses/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"Response not found.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, srv, &forget
}

func reattachSet(url string, on bool) *profiles.Set {
	return profileSet(url, func(p *profiles.Profile) { p.Capabilities.Reattach = on })
}

// crashAfter is a DeltaSink that cancels its call (the simulated crash)
// once it has received n text deltas, and keeps every delta it got.
type crashAfter struct {
	recorder
	n      int
	cancel context.CancelFunc
}

func (c *crashAfter) Delta(ctx context.Context, d caller.Delta) {
	c.recorder.Delta(ctx, d)
	if d.Type == caller.DeltaText && c.cancel != nil && c.texts() == c.n {
		c.cancel()
	}
}

func (c *crashAfter) texts() int {
	n := 0
	for _, d := range c.all() {
		if d.Type == caller.DeltaText {
			n++
		}
	}
	return n
}

// deliveredText is what a client that drops deltas it has seen (by
// UpstreamSeq) shows; repeats counts the deltas it dropped.
func deliveredText(deltas []caller.Delta) (text string, repeats int) {
	var b strings.Builder
	last := -1
	for _, d := range deltas {
		if d.Type != caller.DeltaText {
			continue
		}
		if d.UpstreamSeq != 0 && d.UpstreamSeq <= last {
			repeats++
			continue
		}
		last = max(last, d.UpstreamSeq)
		b.WriteString(d.Text)
	}
	return b.String(), repeats
}

// TestReattachAfterCrash: the first delivery is cut off (its context
// cancelled) after two deltas while the model is still generating; the
// redelivery re-attaches to the same upstream response. One upstream
// response is created, the text is right, and no delta is relayed twice
// (the same process remembers what it relayed).
func TestReattachAfterCrash(t *testing.T) {
	for name, newStore := range resultStores(t) {
		t.Run(name, func(t *testing.T) {
			ts, srv, _ := reattachSandbox(t, 600*time.Millisecond)
			c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: newStore(t)})
			in := caller.Input{ConversationID: "c", TurnID: "turn-crash", Body: simpleBody(t, reattachInstruction), Stream: true}

			ctx, cancel := context.WithCancel(context.Background())
			sink := &crashAfter{n: 2, cancel: cancel}
			in.Deltas = sink
			first := c.Call(ctx, in)
			if ctx.Err() == nil || first.Error == nil {
				t.Fatalf("first call was not cut off: %+v", first)
			}
			sink.cancel = nil
			second := c.Call(context.Background(), in)
			if second.Error != nil || second.Cached || len(second.Warnings) != 0 {
				t.Fatalf("second %+v", second)
			}
			st := srv.Snapshot()
			if st.Created != 1 || st.Resumes != 1 {
				t.Fatalf("upstream created %d responses (want 1), resumes %d", st.Created, st.Resumes)
			}
			final := outputText(t, second.Body)
			if !strings.Contains(final, reattachInstruction) {
				t.Fatalf("final text %q", final)
			}
			var text strings.Builder
			seqs := map[int]bool{}
			for _, d := range sink.all() {
				if d.Type == caller.DeltaText {
					if seqs[d.UpstreamSeq] || d.UpstreamSeq == 0 {
						t.Fatalf("delta relayed twice or without upstream sequence: %+v", d)
					}
					seqs[d.UpstreamSeq] = true
					text.WriteString(d.Text)
				}
			}
			if text.String() != final {
				t.Fatalf("deltas %q, final %q", text.String(), final)
			}
			if s := c.Stats(); s.Reattached != 1 || s.Repeated != 0 || s.Lost != 0 {
				t.Fatalf("stats %+v", s)
			}
			// The result replaced the record: a third delivery is served from the store.
			if third := c.Call(context.Background(), in); !third.Cached || srv.Snapshot().Created != 1 {
				t.Fatalf("third %+v", third)
			}
		})
	}
}

// TestReattachAfterCrashOtherProcess: the redelivery lands on another
// process (a new Caller over the same store), which knows nothing of what
// was relayed: it re-attaches all the same (one upstream response), and the
// deltas it relays again carry their upstream sequence numbers, so a client
// that drops repeats shows the text exactly once.
func TestReattachAfterCrashOtherProcess(t *testing.T) {
	_, js := startJetStream(t)
	store, err := caller.NewKVResultStore(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	ts, srv, _ := reattachSandbox(t, 600*time.Millisecond)
	in := caller.Input{ConversationID: "c", TurnID: "turn-kill9", Body: simpleBody(t, reattachInstruction), Stream: true}

	ctx, cancel := context.WithCancel(context.Background())
	sink := &crashAfter{n: 2, cancel: cancel}
	in.Deltas = sink
	caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store}).Call(ctx, in)
	sink.cancel = nil

	restarted := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store})
	res := restarted.Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 0 {
		t.Fatalf("after restart %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 1 {
		t.Fatalf("upstream created %d responses, want 1", st.Created)
	}
	text, repeats := deliveredText(sink.all())
	if final := outputText(t, res.Body); text != final || repeats != 2 {
		t.Fatalf("client shows %q (dropped %d repeats), final %q", text, repeats, final)
	}
	if s := restarted.Stats(); s.Reattached != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// resetAfter is an http.Client whose first POST's event stream breaks
// with a connection reset after n text delta events.
func resetAfter(n int) *http.Client {
	var once sync.Once
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil || r.Method != http.MethodPost {
			return resp, err
		}
		once.Do(func() { resp.Body = &breakingBody{rc: resp.Body, br: bufio.NewReader(resp.Body), deltas: n} })
		return resp, nil
	})}
}

// breakingBody passes SSE lines through and fails with ECONNRESET after
// the nth output_text.delta event.
type breakingBody struct {
	rc     io.ReadCloser
	br     *bufio.Reader
	deltas int
	buf    bytes.Buffer
	broken bool
}

func (b *breakingBody) Read(p []byte) (int, error) {
	for b.buf.Len() == 0 {
		if b.broken {
			return 0, &netError{syscall.ECONNRESET}
		}
		line, err := b.br.ReadString('\n')
		b.buf.WriteString(line)
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"response.output_text.delta"`) {
			if b.deltas--; b.deltas == 0 {
				b.buf.WriteString("\n")
				_, _ = b.br.ReadString('\n') // the blank line that ends the event
				b.broken = true
			}
		}
		if err != nil && b.buf.Len() == 0 {
			return 0, err
		}
	}
	return b.buf.Read(p)
}

func (b *breakingBody) Close() error { return b.rc.Close() }

type netError struct{ err error }

func (e *netError) Error() string { return "read tcp: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// TestReattachResumesBrokenStream: the stream breaks mid-way (connection
// reset); the caller resumes the upstream response instead of calling
// again, and relays no delta twice.
func TestReattachResumesBrokenStream(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 300*time.Millisecond)
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: caller.NewMemResultStore(), HTTPClient: resetAfter(2)})
	sink := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "turn-reset", Body: simpleBody(t, reattachInstruction), Stream: true, Deltas: sink})
	if res.Error != nil || len(res.Warnings) != 0 || res.Attempts != 1 {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 1 || st.Resumes != 1 {
		t.Fatalf("upstream: created %d (want 1), resumes %d (want 1)", st.Created, st.Resumes)
	}
	text, repeats := deliveredText(sink.all())
	var raw strings.Builder
	for i, d := range sink.all() {
		if d.Seq != i {
			t.Fatalf("delta %d has seq %d", i, d.Seq)
		}
		if d.Type == caller.DeltaText {
			raw.WriteString(d.Text)
		}
	}
	if final := outputText(t, res.Body); text != final || raw.String() != final || repeats != 0 {
		t.Fatalf("deltas %q (%d repeats), final %q", raw.String(), repeats, final)
	}
	if s := c.Stats(); s.Resumed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestReattachLostUpstream: the upstream no longer has the response the
// first delivery started (404 on re-attach, as after OpenAI's ~10 minutes):
// exactly one new call, and the result says the turn was paid twice.
func TestReattachLostUpstream(t *testing.T) {
	ts, srv, forget := reattachSandbox(t, 400*time.Millisecond)
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: caller.NewMemResultStore()})
	in := caller.Input{TurnID: "turn-lost", Body: simpleBody(t, reattachInstruction), Stream: true}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &crashAfter{n: 1, cancel: cancel}
	in.Deltas = sink
	c.Call(ctx, in)
	sink.cancel = nil

	forget.Store(true)
	res := c.Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "paid for twice") || !strings.Contains(res.Warnings[0], "404") {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 2 {
		t.Fatalf("upstream created %d responses, want 2", st.Created)
	}
	if s := c.Stats(); s.Lost != 1 || s.Reattached != 1 {
		t.Fatalf("stats %+v", s)
	}
	if !strings.Contains(outputText(t, res.Body), reattachInstruction) {
		t.Fatalf("body %s", res.Body)
	}
	// The new call's deltas all reach a client that drops repeats: their
	// upstream sequence numbers go on above the lost call's.
	var firstPart, newText strings.Builder
	last, lostCall := 0, true
	for _, d := range sink.all() {
		if d.Type == caller.DeltaDone {
			lostCall = false
			continue
		}
		if d.Type != caller.DeltaText {
			continue
		}
		if lostCall {
			firstPart.WriteString(d.Text)
			last = d.UpstreamSeq
			continue
		}
		if d.UpstreamSeq <= last {
			t.Fatalf("new call's delta %+v not above the lost call's %d", d, last)
		}
		newText.WriteString(d.Text)
	}
	if shown, _ := deliveredText(sink.all()); firstPart.Len() == 0 || newText.String() != outputText(t, res.Body) || shown != firstPart.String()+newText.String() {
		t.Fatalf("lost call showed %q, new call %q, client %q", firstPart.String(), newText.String(), shown)
	}
}

// TestRepeatWithoutReattachWarns: a backend without the capability gets the
// cut-off call again (today's behaviour), but never silently.
func TestRepeatWithoutReattachWarns(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 400*time.Millisecond)
	c := caller.New(reattachSet(ts.URL, false), caller.Options{Logger: quiet, Results: caller.NewMemResultStore()})
	in := caller.Input{TurnID: "turn-repeat", Body: simpleBody(t, reattachInstruction)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if r := c.Call(ctx, in); r.Error == nil {
		t.Fatalf("first call not cut off: %+v", r)
	}
	res := c.Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "may have been paid for twice") ||
		!strings.Contains(res.Warnings[0], "reattach") {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 2 {
		t.Fatalf("upstream created %d, want 2", st.Created)
	}
	if s := c.Stats(); s.Repeated != 1 {
		t.Fatalf("stats %+v", s)
	}
	// A call that was never interrupted carries no warning.
	if r := c.Call(context.Background(), caller.Input{TurnID: "turn-clean", Body: simpleBody(t, "clean")}); len(r.Warnings) != 0 {
		t.Fatalf("clean call warned: %q", r.Warnings)
	}
}

// TestReattachNonStreaming: a turn that does not stream is created in
// background mode all the same, so it too can be re-attached.
func TestReattachNonStreaming(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 400*time.Millisecond)
	store := caller.NewMemResultStore()
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store})
	in := caller.Input{TurnID: "turn-plain", Body: simpleBody(t, reattachInstruction)}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	c.Call(ctx, in)
	res := c.Call(context.Background(), in)
	if res.Error != nil || res.Streamed || len(res.Warnings) != 0 {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 1 || st.Background != 1 {
		t.Fatalf("upstream %+v", st)
	}
	if !bytes.Contains(srv.LastRequest(), []byte(`"background":true`)) {
		t.Fatalf("request %s", srv.LastRequest())
	}
}

// TestCancelUpstreamDuringReattachedCall: a cancel of the turn reaches the
// upstream (POST /responses/{id}/cancel) while a redelivery follows the
// re-attached call; the call ends with the cancelled response, and no new
// upstream response is created.
func TestCancelUpstreamDuringReattachedCall(t *testing.T) {
	ts, srv, _ := reattachSandbox(t, 3*time.Second)
	store := caller.NewMemResultStore()
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store})
	in := caller.Input{TurnID: "turn-cancel", Body: simpleBody(t, reattachInstruction), Stream: true}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &crashAfter{n: 1, cancel: cancel}
	in.Deltas = sink
	c.Call(ctx, in) // cut off after its first delta
	sink.cancel = nil

	done := make(chan struct{})
	var res struct{ status, body string }
	go func() {
		defer close(done)
		r := c.Call(context.Background(), in) // re-attaches and follows
		res.body = r.Body
		if r.Error != nil {
			res.status = "error: " + r.Error.Message
		}
	}()
	time.Sleep(300 * time.Millisecond)
	id, err := c.CancelUpstream(context.Background(), "turn-cancel")
	if err != nil || id == "" {
		t.Fatalf("cancel: %q %v", id, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the re-attached call did not end after the cancel")
	}
	if res.status != "" || !strings.Contains(res.body, `"status":"cancelled"`) {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 1 || st.Cancels != 1 {
		t.Fatalf("upstream %+v", st)
	}
	if s := c.Stats(); s.Reattached != 1 || s.Lost != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Nothing left to cancel once the result is stored.
	if id, err := c.CancelUpstream(context.Background(), "turn-cancel"); id != "" || err != nil {
		t.Fatalf("second cancel %q %v", id, err)
	}
}

// TestReattachEmulatedStreamResumes: with tool-call emulation the resumed
// stream rebuilds the hold-back filters from the start of the response, so
// a stream broken inside a <tool_call> block still shows no part of it as
// text, repeats nothing, and yields the call once.
func TestReattachEmulatedStreamResumes(t *testing.T) {
	srv := sandbox.New(sandbox.Options{Logger: quiet, Latency: 300 * time.Millisecond, Script: []string{weatherScript}})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, HTTPClient: resetAfter(4)})
	sink := &recorder{}
	res := c.Call(context.Background(), caller.Input{TurnID: "turn-emu", Body: simpleBody(t, "Weather?"), Stream: true, Deltas: sink, Emulation: weatherEmulation})
	if res.Error != nil {
		t.Fatal(res.Error)
	}
	if st := srv.Snapshot(); st.Created != 1 || st.Resumes != 1 {
		t.Fatalf("upstream %+v", st)
	}
	var text strings.Builder
	args := 0
	for _, d := range sink.all() {
		switch d.Type {
		case caller.DeltaText:
			if strings.ContainsAny(d.Text, "<>") || strings.Contains(d.Text, "Paris") {
				t.Fatalf("text delta %q shows part of the tool call", d.Text)
			}
			text.WriteString(d.Text)
		case caller.DeltaArguments:
			args++
		}
	}
	if text.String() != "Let me check the weather.  One moment." || args != 1 || len(functionCalls(t, res.Body)) != 1 {
		t.Fatalf("text %q, %d argument deltas, body %s", text.String(), args, res.Body)
	}
}

// TestReattachPollsWhereTheStreamIsGone: an upstream that keeps the
// response but not its event stream (GET ?stream=true → 400, as for a
// response whose events expired) is read with GET until it is terminal:
// still one upstream response, and the whole text reaches the client.
func TestReattachPollsWhereTheStreamIsGone(t *testing.T) {
	srv := sandbox.New(sandbox.Options{Logger: quiet, Latency: 600 * time.Millisecond})
	var gets atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("stream") == "true" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"This response's events are no longer available.","type":"invalid_request_error","param":"stream","code":null}}`)
			return
		}
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: caller.NewMemResultStore()})
	in := caller.Input{TurnID: "turn-poll", Body: simpleBody(t, reattachInstruction), Stream: true}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &crashAfter{n: 1, cancel: cancel}
	in.Deltas = sink
	c.Call(ctx, in)
	sink.cancel = nil
	res := c.Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 0 {
		t.Fatalf("result %+v", res)
	}
	if st := srv.Snapshot(); st.Created != 1 || gets.Load() < 2 {
		t.Fatalf("upstream created %d, plain GETs %d", st.Created, gets.Load())
	}
	if final := outputText(t, res.Body); !strings.Contains(final, reattachInstruction) {
		t.Fatalf("final %q", final)
	}
}

// TestReattachLostAfterRestart: the redelivery lands on another process
// and the upstream lost the response: one new call, and a client dropping
// repeats by upstreamSeq still shows all of the new call's text (its
// numbers are lifted above the lost call's, which this process never saw).
func TestReattachLostAfterRestart(t *testing.T) {
	ts, srv, forget := reattachSandbox(t, 400*time.Millisecond)
	store := caller.NewMemResultStore()
	in := caller.Input{TurnID: "turn-lost-restart", Body: simpleBody(t, reattachInstruction), Stream: true}
	ctx, cancel := context.WithCancel(context.Background())
	sink := &crashAfter{n: 3, cancel: cancel}
	in.Deltas = sink
	caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store}).Call(ctx, in)
	sink.cancel = nil
	seen := len(sink.all())

	forget.Store(true)
	res := caller.New(reattachSet(ts.URL, true), caller.Options{Logger: quiet, Results: store}).Call(context.Background(), in)
	if res.Error != nil || len(res.Warnings) != 1 || srv.Snapshot().Created != 2 {
		t.Fatalf("result %+v, created %d", res, srv.Snapshot().Created)
	}
	first, _ := deliveredText(sink.all()[:seen])
	shown, repeats := deliveredText(sink.all())
	if repeats != 0 || shown != first+outputText(t, res.Body) {
		t.Fatalf("client shows %q (%d dropped), lost call showed %q", shown, repeats, first)
	}
}
