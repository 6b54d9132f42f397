package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/pkg/conformance"
	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// TestFileSearchStreamEvents: a streamed response with a file_search tool
// shows the search in OpenAI's order and shapes, over SSE (openai-go) and
// WebSocket mode: the file_search_call item added in_progress at
// output_index 0, response.file_search_call.in_progress, .searching,
// .completed, the item done (as the final output has it, results included),
// and only then the model's message at output_index 1.
func TestFileSearchStreamEvents(t *testing.T) {
	e := newEnv(t, sandbox.Options{}, func(c *Config) {
		c.Searcher = retrieverstage.SearchFunc(func(_ context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
			return contracts.Retrieval{Index: req.WorkspaceId, Scope: contracts.RagScopeWorkspace, Query: "retries scheduled", Chunks: []contracts.RagChunk{
				{Id: "ck_retry", Path: "retry.go", StartLine: 19, EndLine: 41, Language: "Go", Content: "func backoff() {}", Score: 0.7}}}, nil
		})
	})
	url, client := e.gateway()
	params := responses.ResponseNewParams{
		Model:   "sandbox-1",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("Where are retries scheduled?")},
		Tools:   []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{"aptix"}}}},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableFileSearchCallResults},
	}
	var sse []conformance.Event
	var final json.RawMessage
	stream := client.Responses.NewStreaming(ctxT(t), params)
	for stream.Next() {
		ev := stream.Current()
		raw := json.RawMessage(ev.RawJSON())
		sse = append(sse, conformance.Event{Name: ev.Type, Type: ev.Type, Seq: ev.SequenceNumber, Data: raw})
		if ev.Type == "response.completed" {
			final = json.RawMessage(ev.Response.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkFileSearchEvents(t, "SSE", sse, final)

	c := wsDial(t, url)
	b, _ := json.Marshal(params)
	var msg map[string]any
	_ = json.Unmarshal(b, &msg)
	msg["type"] = "response.create"
	b, _ = json.Marshal(msg)
	if err := c.Write(ctxT(t), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	var ws []conformance.Event
	final = nil
	for final == nil {
		_, data, err := c.Read(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Type     string          `json:"type"`
			Seq      int64           `json:"sequence_number"`
			Response json.RawMessage `json:"response"`
		}
		_ = json.Unmarshal(data, &head)
		ws = append(ws, conformance.Event{Name: head.Type, Type: head.Type, Seq: head.Seq, Data: data})
		switch head.Type {
		case "error", "response.failed":
			t.Fatalf("%s", data)
		case "response.completed":
			final = head.Response
		}
	}
	checkFileSearchEvents(t, "WebSocket", ws, final)
}

func checkFileSearchEvents(t *testing.T, via string, evs []conformance.Event, final json.RawMessage) {
	t.Helper()
	if err := conformance.CheckLifecycle(conformance.Stream{Events: evs, Final: final}); err != nil {
		t.Fatalf("%s: lifecycle: %v", via, err)
	}
	var got []string
	var fsDone json.RawMessage
	fsID := ""
	for _, ev := range evs {
		var f struct {
			OutputIndex *int            `json:"output_index"`
			ItemID      string          `json:"item_id"`
			Item        json.RawMessage `json:"item"`
		}
		_ = json.Unmarshal(ev.Data, &f)
		var item struct{ ID, Type, Status string }
		_ = json.Unmarshal(f.Item, &item)
		switch {
		case strings.HasPrefix(ev.Type, "response.file_search_call."):
			if f.ItemID != fsID || *f.OutputIndex != 0 {
				t.Fatalf("%s: %s for item %q at %v", via, ev.Type, f.ItemID, f.OutputIndex)
			}
			got = append(got, ev.Type)
		case ev.Type == "response.output_item.added" || ev.Type == "response.output_item.done":
			got = append(got, fmt.Sprintf("%s %s@%d %s", ev.Type, item.Type, *f.OutputIndex, item.Status))
			if item.Type == "file_search_call" {
				fsID = item.ID
				if ev.Type == "response.output_item.done" {
					fsDone = f.Item
				}
			}
		}
	}
	want := []string{
		"response.output_item.added file_search_call@0 in_progress",
		"response.file_search_call.in_progress",
		"response.file_search_call.searching",
		"response.file_search_call.completed",
		"response.output_item.done file_search_call@0 completed",
		"response.output_item.added message@1 in_progress",
		"response.output_item.done message@1 completed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: events\n%s\nwant\n%s", via, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var r struct{ Output []json.RawMessage }
	_ = json.Unmarshal(final, &r)
	if len(r.Output) != 2 || !jsonEqual(r.Output[0], fsDone) || !strings.Contains(string(fsDone), `"file_id":"ck_retry"`) || !strings.Contains(string(fsDone), `"retries scheduled"`) {
		t.Fatalf("%s: the done item\n%s\nthe final output's\n%s", via, fsDone, r.Output[0])
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
