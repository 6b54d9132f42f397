package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestFileSearchStream: the file_search_call item's events in OpenAI's
// order whether the retrieval delta arrives live (once, however often it
// is sent) or never (a resumed stream closes the item from the final
// output); a response without file_search gets none.
func TestFileSearchStream(t *testing.T) {
	meta := Meta{ID: "resp_abc", FileSearch: true}
	fsItem := fileSearchItem(meta, "q", nil, "completed")
	final := func() Response {
		r := base(meta)
		r.Status = StatusCompleted
		r.Output = []json.RawMessage{fsItem,
			json.RawMessage(`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}`)}
		return r
	}
	types := func(evs []Event) string {
		var s []string
		for _, e := range evs {
			s = append(s, strings.TrimPrefix(e.Type, "response."))
		}
		return strings.Join(s, " ")
	}
	fsEvents := "output_item.added file_search_call.in_progress file_search_call.searching file_search_call.completed output_item.done"
	msgEvents := "output_item.added content_part.added output_text.delta output_text.done content_part.done output_item.done completed"

	st := NewStreamer()
	evs := st.FileSearch(meta)
	ret := Delta{Type: DeltaRetrieval, Text: "q", Sources: []contracts.SourceRef{{Id: "c1"}}}
	evs = append(evs, st.Delta(ret)...)
	evs = append(evs, st.Delta(ret)...) // a redelivered turn sends it again
	evs = append(evs, st.Finish(final())...)
	if got := types(evs); got != fsEvents+" "+msgEvents {
		t.Fatalf("live:\n%s", got)
	}
	if got := types(NewStreamer().Finish(final())); got != fsEvents+" "+msgEvents {
		t.Fatalf("resumed:\n%s", got)
	}
	plain := NewStreamer()
	if evs := append(plain.FileSearch(Meta{ID: "resp_x"}), plain.Delta(ret)...); len(evs) != 0 {
		t.Fatalf("no file_search: %v", evs)
	}
}
