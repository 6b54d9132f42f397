package history

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Row is one compared field of two turns: its stage, name and each turn's
// value. Timing rows always differ a little and are not marked as changes.
type Row struct{ Stage, Field, A, B string }

// Differs reports whether the row is a change worth marking.
func (r Row) Differs() bool { return r.A != r.B && r.Stage != "timing" }

// DiffRows compares two turns stage by stage: retrieved chunks, backend and
// model, sources, the model call's status, the response, and each hop's time.
func DiffRows(a, b TurnView) []Row {
	var rows []Row
	add := func(stage, field string, f func(v TurnView) string) {
		rows = append(rows, Row{stage, field, f(a), f(b)})
	}
	add("retrieved", "chunks", func(v TurnView) string {
		t, ok := v.Turns[contracts.StageRetrieved]
		if !ok {
			return "-"
		}
		return IDList(ChunkIDs(t))
	})
	add("enveloped", "backend/model", func(v TurnView) string {
		if e := v.Turns[contracts.StageEnveloped].Envelope; e != nil {
			return e.Backend + "/" + e.Model
		}
		return "-"
	})
	add("enveloped", "sources", func(v TurnView) string {
		e := v.Turns[contracts.StageEnveloped].Envelope
		if e == nil {
			return "-"
		}
		return IDList(SourceIDs(e))
	})
	llm := func(f func(*contracts.LLMResult) string) func(v TurnView) string {
		return func(v TurnView) string {
			if l := v.Turns[contracts.StageResponded].LLM; l != nil {
				return f(l)
			}
			return "-"
		}
	}
	add("responded", "status", llm(func(l *contracts.LLMResult) string {
		if l.Error != nil {
			return fmt.Sprintf("%d %s", l.Status, l.Error.Type)
		}
		return fmt.Sprint(l.Status)
	}))
	add("responded", "attempts", llm(func(l *contracts.LLMResult) string { return fmt.Sprint(l.Attempts) }))
	add("responded", "cached", llm(func(l *contracts.LLMResult) string { return fmt.Sprint(l.Cached) }))
	resp := func(f func(r contracts.AgentExecuteResponse) string) func(v TurnView) string {
		return func(v TurnView) string {
			if r := v.Turns[contracts.StageCompleted].Response; r != nil {
				return f(*r)
			}
			return "-"
		}
	}
	add("completed", "kind/finish", resp(func(r contracts.AgentExecuteResponse) string { return r.Kind + "/" + OrNone(r.FinishReason) }))
	add("completed", "model", resp(func(r contracts.AgentExecuteResponse) string { return OrNone(r.ModelId) }))
	add("completed", "tokens in/out", resp(func(r contracts.AgentExecuteResponse) string {
		return fmt.Sprintf("%d/%d", r.Usage.PromptTokens, r.Usage.CompletionTokens)
	}))
	add("completed", "tool calls", resp(func(r contracts.AgentExecuteResponse) string {
		calls := make([]string, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			calls[i] = c.Name + c.ArgumentsJson
		}
		return OrNone(strings.Join(calls, " "))
	}))
	add("completed", "error", resp(func(r contracts.AgentExecuteResponse) string { return OrNone(r.ErrorCode) }))
	add("timing", "retrieval ms", func(v TurnView) string {
		if r := v.Turns[contracts.StageRetrieved].Retrieval; r != nil {
			return fmt.Sprintf("%.1f", r.TookMs)
		}
		return "-"
	})
	add("timing", "llm call ms", llm(func(l *contracts.LLMResult) string { return fmt.Sprintf("%.1f", l.DurationMs) }))
	for i := 1; i < len(Stages); i++ {
		h := [2]string{Stages[i-1], Stages[i]}
		add("timing", h[0]+"→"+h[1]+" ms", func(v TurnView) string {
			t0, ok0 := v.Times[h[0]]
			t1, ok1 := v.Times[h[1]]
			if !ok0 || !ok1 {
				return "-"
			}
			return fmt.Sprintf("%.1f", float64(t1.Sub(t0).Microseconds())/1000)
		})
	}
	return rows
}

// OrNone is s, or "none" when empty.
func OrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ChunkIDs are the ids of the chunks the retriever found for t.
func ChunkIDs(t contracts.Turn) []string {
	if t.Retrieval == nil {
		return nil
	}
	ids := make([]string, len(t.Retrieval.Chunks))
	for i, c := range t.Retrieval.Chunks {
		ids[i] = c.Id
	}
	return ids
}

// SourceIDs are the ids of the chunks the envelope put in the context block.
func SourceIDs(e *contracts.Envelope) []string {
	ids := make([]string, len(e.Sources))
	for i, s := range e.Sources {
		ids[i] = s.Id
	}
	return ids
}

// IDList is a table cell for a list of ids: short lists in full, long ones
// as a count and the first id (IDChanges shows what differs).
func IDList(ids []string) string {
	switch {
	case len(ids) == 0:
		return "none"
	case len(ids) <= 2:
		return strings.Join(ids, ",")
	}
	return fmt.Sprintf("%d: %s,…", len(ids), ids[0])
}

// IDChanges lists the ids only a has (removed) and only b has (added);
// reordered is true when both hold the same ids in another order.
func IDChanges(a, b []string) (removed, added []string, reordered bool) {
	if strings.Join(a, ",") == strings.Join(b, ",") {
		return nil, nil, false
	}
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, id := range a {
		inA[id] = true
	}
	for _, id := range b {
		inB[id] = true
	}
	for _, id := range a {
		if !inB[id] {
			removed = append(removed, id)
		}
	}
	for _, id := range b {
		if !inA[id] {
			added = append(added, id)
		}
	}
	if len(a) == len(b) && len(inA) == len(inB) {
		same := true
		for id := range inA {
			same = same && inB[id]
		}
		reordered = same
	}
	return removed, added, reordered
}

// JSONDiff lists how JSON value b differs from a, one line per changed leaf:
// "~ path: old → new", "- path: old" (only in a), "+ path: new" (only in b).
// Objects are compared key by key and arrays index by index, which is what
// two /responses bodies of the same turn need (the same shape, a few changed
// fields or an added input item); it is not a minimal edit script.
func JSONDiff(a, b []byte) ([]string, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return nil, fmt.Errorf("left side is not JSON: %w", err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return nil, fmt.Errorf("right side is not JSON: %w", err)
	}
	var out []string
	diffValue("", va, vb, &out)
	return out, nil
}

func diffValue(path string, a, b any, out *[]string) {
	switch ta := a.(type) {
	case map[string]any:
		if tb, ok := b.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range ta {
				keys[k] = true
			}
			for k := range tb {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				p := k
				if path != "" {
					p = path + "." + k
				}
				va, ina := ta[k]
				vb, inb := tb[k]
				switch {
				case !inb:
					*out = append(*out, "- "+p+": "+short(va))
				case !ina:
					*out = append(*out, "+ "+p+": "+short(vb))
				default:
					diffValue(p, va, vb, out)
				}
			}
			return
		}
	case []any:
		if tb, ok := b.([]any); ok {
			for i := 0; i < max(len(ta), len(tb)); i++ {
				p := path + "[" + strconv.Itoa(i) + "]"
				switch {
				case i >= len(tb):
					*out = append(*out, "- "+p+": "+short(ta[i]))
				case i >= len(ta):
					*out = append(*out, "+ "+p+": "+short(tb[i]))
				default:
					diffValue(p, ta[i], tb[i], out)
				}
			}
			return
		}
	}
	if ja, jb := short(a), short(b); ja != jb {
		if path == "" {
			path = "(root)"
		}
		*out = append(*out, "~ "+path+": "+ja+" → "+jb)
	}
}

// short is a value's compact JSON, cut to 120 runes.
func short(v any) string {
	j, _ := json.Marshal(v)
	if r := []rune(string(j)); len(r) > 120 {
		return string(r[:119]) + "…"
	}
	return string(j)
}
