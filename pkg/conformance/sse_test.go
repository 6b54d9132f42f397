package conformance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/conformance"
)

// sse frames events: each is "name|json" ("|json" for no event: line).
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		name, data, _ := strings.Cut(e, "|")
		if name != "" {
			fmt.Fprintf(&b, "event: %s\n", name)
		}
		fmt.Fprintf(&b, "data: %s\n\n", data)
	}
	return b.String()
}

const (
	msgAdded   = `{"type":"response.output_item.added","sequence_number":%d,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`
	partAdded  = `{"type":"response.content_part.added","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}}`
	delta      = `{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q}`
	textDone   = `{"type":"response.output_text.done","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"text":%q}`
	partDone   = `{"type":"response.content_part.done","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hi there","annotations":[],"logprobs":[]}}`
	msgItem    = `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi there","annotations":[],"logprobs":[]}]}`
	itemDone   = `{"type":"response.output_item.done","sequence_number":%d,"output_index":0,"item":` + msgItem + `}`
	lifecycle  = `{"type":"%s","sequence_number":%d,"response":{"id":"resp_1","output":%s}}`
	finalOut   = `[` + msgItem + `]`
	emptyOut   = `[]`
	createdEv  = "response.created"
	progressEv = "response.in_progress"
	doneEv     = "response.completed"
)

// goodStream is a well-formed text stream; edit lets a test break one event.
func goodStream(edit func(evs []string) []string) string {
	evs := []string{
		createdEv + "|" + fmt.Sprintf(lifecycle, createdEv, 0, emptyOut),
		progressEv + "|" + fmt.Sprintf(lifecycle, progressEv, 1, emptyOut),
		"response.output_item.added|" + fmt.Sprintf(msgAdded, 2),
		"response.content_part.added|" + fmt.Sprintf(partAdded, 3),
		"response.output_text.delta|" + fmt.Sprintf(delta, 4, "Hi "),
		"response.output_text.delta|" + fmt.Sprintf(delta, 5, "there"),
		"response.output_text.done|" + fmt.Sprintf(textDone, 6, "Hi there"),
		"response.content_part.done|" + fmt.Sprintf(partDone, 7),
		"response.output_item.done|" + fmt.Sprintf(itemDone, 8),
		doneEv + "|" + fmt.Sprintf(lifecycle, doneEv, 9, finalOut),
	}
	if edit != nil {
		evs = edit(evs)
	}
	return sse(evs...)
}

func TestReadSSEAndLifecycleAcceptAWellFormedStream(t *testing.T) {
	st, err := conformance.ReadSSE(strings.NewReader(goodStream(nil) + "data: [DONE]\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Events) != 10 || st.Events[9].Type != doneEv || st.Final == nil || !st.Done {
		t.Fatalf("events %d final %s done %v", len(st.Events), st.Final, st.Done)
	}
	if without, _ := conformance.ReadSSE(strings.NewReader(goodStream(nil))); without.Done {
		t.Fatal("a stream without data: [DONE] read as done")
	}
	if err := conformance.CheckLifecycle(st); err != nil {
		t.Fatal(err)
	}
}

func TestReadSSERejectsBadFraming(t *testing.T) {
	tests := map[string]struct {
		edit func([]string) []string
		want string
	}{
		"event line differs from type": {func(e []string) []string {
			e[4] = "response.text.delta|" + strings.SplitN(e[4], "|", 2)[1]
			return e
		}, "differs from type"},
		"no event line": {func(e []string) []string {
			e[4] = "|" + strings.SplitN(e[4], "|", 2)[1]
			return e
		}, "no event: line"},
		"sequence number repeats": {func(e []string) []string {
			e[5] = "response.output_text.delta|" + fmt.Sprintf(delta, 4, "there")
			return e
		}, "sequence_number 4 after 4"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := conformance.ReadSSE(strings.NewReader(goodStream(tt.edit)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCheckLifecycleRejectsBadOrder(t *testing.T) {
	drop := func(i int) func([]string) []string {
		return func(e []string) []string { return append(e[:i:i], e[i+1:]...) }
	}
	tests := map[string]struct {
		edit func([]string) []string
		want string
	}{
		"no in_progress":        {drop(1), "must start with response.created then response.in_progress"},
		"no item added":         {drop(2), "before its output_item.added"},
		"no content part added": {drop(3), "not added"},
		"deltas differ from done": {func(e []string) []string {
			e[5] = "response.output_text.delta|" + fmt.Sprintf(delta, 5, "thar")
			return e
		}, "differs from its deltas"},
		"no terminal":     {drop(9), "exactly one terminal event"},
		"item never done": {drop(8), "never done"},
		"final output differs": {func(e []string) []string {
			e[9] = doneEv + "|" + fmt.Sprintf(lifecycle, doneEv, 9, strings.Replace(finalOut, "Hi there", "Hello", 1))
			return e
		}, "differs from its output_item.done"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			st, _ := conformance.ReadSSE(strings.NewReader(goodStream(tt.edit)))
			err := conformance.CheckLifecycle(st)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}
