package caller_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// testCap is the maxResponseBytes of the tests below; their backends try
// to send 64 times as much.
const testCap = 1 << 20

// hugeServer answers every request with an endless-looking answer of 64
// caps: a JSON body, or with sse an event stream of text deltas (Chat
// Completions chunks with chat). It counts requests and the bytes it got
// written before the caller hung up.
func hugeServer(t *testing.T, sse, chat bool) (*httptest.Server, *atomic.Int32, *atomic.Int64) {
	t.Helper()
	calls, written := &atomic.Int32{}, &atomic.Int64{}
	piece := strings.Repeat("x", 16<<10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		write := func(s string) bool {
			n, err := io.WriteString(w, s)
			written.Add(int64(n))
			return err == nil
		}
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			if chat {
				write(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`)
			} else {
				write(`{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"`)
			}
			for i := 0; i < 64*testCap/len(piece); i++ {
				if !write(piece) {
					return
				}
			}
			if chat {
				write(`"}}]}`)
			} else {
				write(`"}]}]}`)
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if chat {
			write(`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n")
		} else {
			write(`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}` + "\n\n")
		}
		for i := 0; i < 64*testCap/len(piece); i++ {
			var ev string
			if chat {
				ev = `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}` + "\n\n"
			} else {
				ev = fmt.Sprintf(`data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"m1","content_index":0,"delta":"%s"}`+"\n\n", i+1, piece)
			}
			if !write(ev) {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(ts.Close)
	return ts, calls, written
}

// TestResponseTooLarge: an answer past the profile's maxResponseBytes
// fails the turn with response_too_large, for a Responses and a Chat
// Completions backend, streamed and not: it is not retried (the answer was
// paid for, a retry pays again), none of it is kept as the body, and the
// caller stopped reading near the cap instead of taking all 64 MiB (what
// the server got written is bounded by the cap plus the sockets' buffers).
func TestResponseTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sse, chat bool
	}{{"responses", false, false}, {"responses stream", true, false}, {"chat", false, true}, {"chat stream", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ts, calls, written := hugeServer(t, tc.sse, tc.chat)
			set := profileSet(ts.URL, func(p *profiles.Profile) {
				p.MaxResponseBytes, p.MaxRetries, p.Sandbox = testCap, 3, false
				if tc.chat {
					p.API = profiles.APIChatCompletions
				}
			})
			c := caller.New(set, caller.Options{Logger: quiet})
			rec := &recorder{}
			in := caller.Input{TurnID: "big-" + strings.ReplaceAll(tc.name, " ", "-"), Body: simpleBody(t, "say a lot"), Stream: tc.sse}
			if tc.sse {
				in.Deltas = rec
			}
			res := c.Call(context.Background(), in)
			if res.Error == nil || res.Error.Code != caller.CodeResponseTooLarge || res.Error.Type != caller.CodeResponseTooLarge {
				t.Fatalf("error %+v, want code %s", res.Error, caller.CodeResponseTooLarge)
			}
			if !strings.Contains(res.Error.Message, "maxResponseBytes (1048576 bytes)") {
				t.Fatalf("message %q does not name the cap", res.Error.Message)
			}
			if res.Body != "" {
				t.Fatalf("a %d-byte cut-off body was kept", len(res.Body))
			}
			if n := calls.Load(); n != 1 || res.Attempts != 1 {
				t.Fatalf("%d calls, %d attempts: an answer too large must not be asked for again", n, res.Attempts)
			}
			if w := written.Load(); w > 24*testCap {
				t.Fatalf("the server wrote %d bytes before the caller hung up: read far past the cap", w)
			}
			if tc.sse {
				all := rec.all()
				if last := all[len(all)-1]; last.Type != caller.DeltaDone || last.Status != "error" || !strings.Contains(last.Error, "maxResponseBytes") {
					t.Fatalf("last delta %+v", last)
				}
			}
		})
	}
}

// TestResponseUnderCap: an answer just under the cap is the result as
// sent, streamed or not.
func TestResponseUnderCap(t *testing.T) {
	ts, _ := startSandbox(t, sandbox.Options{})
	for _, stream := range []bool{false, true} {
		set := profileSet(ts.URL, func(p *profiles.Profile) { p.MaxResponseBytes = 64 << 10 })
		c := caller.New(set, caller.Options{Logger: quiet})
		res := c.Call(context.Background(), caller.Input{TurnID: fmt.Sprintf("small-%v", stream), Body: simpleBody(t, "a short answer"), Stream: stream, Deltas: &recorder{}})
		if res.Error != nil || !strings.Contains(outputText(t, res.Body), "a short answer") {
			t.Fatalf("stream %v: %+v", stream, res)
		}
	}
}

// TestResponseTooLargeReattach: a backend that keeps background responses
// (capability reattach) is not asked again for an answer past the cap:
// neither by a resumed stream nor by reading the response with GET (it
// would be as large), and the call is made once.
func TestResponseTooLargeReattach(t *testing.T) {
	big := strings.Repeat("y", 300<<10)
	var gets, posts atomic.Int32
	srv := sandbox.New(sandbox.Options{Logger: quiet, Script: []string{big, big}})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		} else {
			posts.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.Reattach, p.MaxResponseBytes = true, 128<<10 })
	c := caller.New(set, caller.Options{Logger: quiet})
	for _, stream := range []bool{true, false} {
		res := c.Call(context.Background(), caller.Input{TurnID: fmt.Sprintf("big-bg-%v", stream), Body: simpleBody(t, "say a lot"), Stream: stream, Deltas: &recorder{}})
		if res.Error == nil || res.Error.Code != caller.CodeResponseTooLarge || res.Body != "" {
			t.Fatalf("stream %v: %+v", stream, res.Error)
		}
	}
	if g, p := gets.Load(), posts.Load(); g != 0 || p != 2 {
		t.Fatalf("%d GETs and %d POSTs for two calls: an answer too large was asked for again", g, p)
	}
}
