package stack

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestGatewayExecuteRetry: a re-sent POST /v1/aptix/execute (a client retry
// after a lost answer) is answered with the turn's stored answer at once
// when it completed, and with its answer when it completes while it runs;
// a turnId alone names the same turn each time. The model is called once
// per turn.
func TestGatewayExecuteRetry(t *testing.T) {
	e := newEnv(t, sandbox.Options{Latency: 500 * time.Millisecond})
	url, _ := e.gateway(func(c *httpapi.Config) { c.SyncTimeout = 6 * time.Second })
	type answer struct{ Kind, Text, ConversationId, TurnId string }
	post := func(query, body string) (a answer, took time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := http.Post(url+"/v1/aptix/execute"+query, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return a, 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		took = time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s after %s", body, resp.StatusCode, b, took)
			return a, took
		}
		if query != "" { // SSE: the last event is the response
			events := strings.Split(strings.TrimSpace(string(b)), "\n\n")
			b = []byte(strings.TrimPrefix(events[len(events)-1], "event: response\ndata: "))
		}
		if err := json.Unmarshal(b, &a); err != nil {
			t.Errorf("%s: %v in %s", body, err, b)
		}
		return a, took
	}
	for _, query := range []string{"", "?stream=true"} {
		body := `{"conversationId":"retry-1","turnId":"t1` + strings.TrimPrefix(query, "?stream=") + `","instruction":"Answer once","ragScope":"none"}`
		first, _ := post(query, body)
		if first.Kind != "ok" || !strings.Contains(first.Text, "Answer once") {
			t.Fatalf("first%s: %+v", query, first)
		}
		again, took := post(query, body)
		if again != first || took > 3*time.Second {
			t.Fatalf("re-sent%s after it completed: %+v after %s, want %+v at once", query, again, took, first)
		}
	}

	// Re-sent while it runs: both requests get its answer.
	running := `{"conversationId":"retry-1","turnId":"t2","instruction":"Answer while running","ragScope":"none"}`
	var wg sync.WaitGroup
	got := make([]answer, 2)
	for i := range got {
		wg.Go(func() { got[i], _ = post("", running) })
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	if got[0] != got[1] || got[0].Kind != "ok" || !strings.Contains(got[0].Text, "Answer while running") {
		t.Fatalf("sent twice while running: %+v", got)
	}

	// A turn id alone names one turn: the re-send finds it.
	alone := `{"turnId":"t3","instruction":"No conversation named","ragScope":"none"}`
	a, _ := post("", alone)
	b, took := post("", alone)
	if a.Kind != "ok" || a != b || took > 3*time.Second {
		t.Fatalf("a turn id alone, sent twice: %+v then %+v after %s", a, b, took)
	}
	e.settled()
	if n := e.sb.Requests(); n != 4 {
		t.Fatalf("the model was called %d times for 4 turns", n)
	}
}
