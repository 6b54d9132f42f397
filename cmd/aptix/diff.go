package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// diff answers "why did these two turns answer differently?" from the
// stored events alone: what each stage saw and produced, side by side, and
// the exact upstream request bodies as a structural JSON diff. It is the
// companion of replay: `aptix diff <orig> <replay>`.
func init() {
	var conv1, conv2 string
	cmd := &cobra.Command{
		Use:   "diff T1 T2 [--conversation C] [--conversation2 C2]",
		Short: "Show what differs between two turns, stage by stage",
		Long: "diff reads both turns' stored events and compares the retrieved chunk ids, the backend and model,\n" +
			"the upstream /responses body (a structural JSON diff), the response text, tool calls, usage and\n" +
			"each stage's timing. Each turn's conversation is found from the stream unless given.",
		Example: `  aptix diff 01a2...e4 01a2...f9
  aptix diff t1 t1-replay --conversation demo`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range append([]string{conv1, conv2}, args...) {
				if id != "" && !contracts.IsToken(id) {
					return usagef("%q: ids are 1-%d characters of [A-Za-z0-9_-]", id, contracts.MaxIDLen)
				}
			}
			if conv2 == "" {
				conv2 = conv1
			}
			return withJS(cmd.Context(), "diff", func(ctx context.Context, js jetstream.JetStream) error {
				a, err := loadTurnView(ctx, js, conv1, args[0])
				if err != nil {
					return err
				}
				b, err := loadTurnView(ctx, js, conv2, args[1])
				if err != nil {
					return err
				}
				return printDiff(cmd.OutOrStdout(), a, b)
			})
		},
	}
	cmd.Flags().StringVar(&conv1, "conversation", "", "conversation of T1 (and of T2 unless --conversation2)")
	cmd.Flags().StringVar(&conv2, "conversation2", "", "conversation of T2")
	root.AddCommand(cmd)
}

// turnView is a turn's stored events by stage; a replay started past the
// first stages has none for them.
type turnView struct {
	Conversation, Turn string
	Turns              map[string]contracts.Turn
	Times              map[string]time.Time
}

var diffStages = []string{contracts.StageRetrieved, contracts.StageEnveloped, contracts.StageResponded, contracts.StageCompleted}

// findConversation returns the conversation a turn id was stored under.
func findConversation(ctx context.Context, js jetstream.JetStream, turn string) (string, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.SubjectPrefix+".*.*."+turn))
	if err != nil {
		return "", fmt.Errorf("stream info: %w", err)
	}
	convs := map[string]bool{}
	for subj := range info.State.Subjects {
		if _, c, _, ok := contracts.ParseSubject(subj); ok {
			convs[c] = true
		}
	}
	switch len(convs) {
	case 0:
		return "", fmt.Errorf("no stored events for turn %s (trimmed from history, or a typo?)", turn)
	case 1:
		for c := range convs {
			return c, nil
		}
	}
	names := make([]string, 0, len(convs))
	for c := range convs {
		names = append(names, c)
	}
	sort.Strings(names)
	return "", usagef("turn %s is in several conversations (%s): give --conversation", turn, strings.Join(names, ", "))
}

func loadTurnView(ctx context.Context, js jetstream.JetStream, conv, turn string) (turnView, error) {
	if conv == "" {
		var err error
		if conv, err = findConversation(ctx, js, turn); err != nil {
			return turnView{}, err
		}
	}
	v := turnView{Conversation: conv, Turn: turn, Turns: map[string]contracts.Turn{}, Times: map[string]time.Time{}}
	for _, stage := range diffStages {
		m, data, err := storedTurnEvent(ctx, js, stage, conv, turn)
		if err != nil {
			continue // not reached, started later (a replay), or trimmed
		}
		var t contracts.Turn
		if err := json.Unmarshal(data, &t); err != nil {
			return v, fmt.Errorf("decode %s: %w", m.Subject, err)
		}
		v.Turns[stage], v.Times[stage] = t, m.Time
	}
	if len(v.Turns) == 0 {
		return v, fmt.Errorf("no stored events for turn %s of conversation %s", turn, conv)
	}
	return v, nil
}

// row is one compared field: its stage, name and each turn's value.
type row struct{ stage, field, a, b string }

func printDiff(w io.Writer, a, b turnView) error {
	fmt.Fprintf(w, "T1 %s (conversation %s)\nT2 %s (conversation %s)\n\n", a.Turn, a.Conversation, b.Turn, b.Conversation)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tFIELD\tT1\tT2\t")
	for _, r := range diffRows(a, b) {
		mark := ""
		if r.a != r.b && r.stage != "timing" { // timings always differ a little
			mark = "≠"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.stage, r.field, r.a, r.b, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if ta, ok := a.Turns[contracts.StageRetrieved]; ok {
		if tb, ok := b.Turns[contracts.StageRetrieved]; ok {
			printIDDiff(w, "RETRIEVED CHUNKS", chunkIDs(ta), chunkIDs(tb))
		}
	}
	if ea, eb := a.Turns[contracts.StageEnveloped].Envelope, b.Turns[contracts.StageEnveloped].Envelope; ea != nil && eb != nil {
		printIDDiff(w, "CONTEXT SOURCES", sourceIDs(ea), sourceIDs(eb))
	}

	fmt.Fprintln(w, "\nUPSTREAM REQUEST BODY (aptix.enveloped, T1 → T2)")
	ea, eb := a.Turns[contracts.StageEnveloped].Envelope, b.Turns[contracts.StageEnveloped].Envelope
	switch {
	case ea == nil || eb == nil || len(ea.Body) == 0 || len(eb.Body) == 0:
		fmt.Fprintln(w, "  not comparable: a turn has no stored enveloped event (a replay from the mapper, or trimmed)")
	default:
		lines, err := jsonDiff(ea.Body, eb.Body)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			fmt.Fprintln(w, "  identical")
		}
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
	}

	ra, rb := response(a), response(b)
	fmt.Fprintln(w, "\nRESPONSE TEXT")
	if ra.Text == rb.Text {
		fmt.Fprintf(w, "  identical (%d characters)\n", len(ra.Text))
	} else {
		fmt.Fprintf(w, "--- T1\n%s\n+++ T2\n%s\n", ra.Text, rb.Text)
	}
	return nil
}

func response(v turnView) contracts.AgentExecuteResponse {
	if r := v.Turns[contracts.StageCompleted].Response; r != nil {
		return *r
	}
	return contracts.AgentExecuteResponse{}
}

func diffRows(a, b turnView) []row {
	var rows []row
	add := func(stage, field string, f func(v turnView) string) {
		rows = append(rows, row{stage, field, f(a), f(b)})
	}
	add("retrieved", "chunks", func(v turnView) string {
		t, ok := v.Turns[contracts.StageRetrieved]
		if !ok {
			return "-"
		}
		return idList(chunkIDs(t))
	})
	add("enveloped", "backend/model", func(v turnView) string {
		if e := v.Turns[contracts.StageEnveloped].Envelope; e != nil {
			return e.Backend + "/" + e.Model
		}
		return "-"
	})
	add("enveloped", "sources", func(v turnView) string {
		e := v.Turns[contracts.StageEnveloped].Envelope
		if e == nil {
			return "-"
		}
		return idList(sourceIDs(e))
	})
	llm := func(f func(*contracts.LLMResult) string) func(v turnView) string {
		return func(v turnView) string {
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
	resp := func(f func(r contracts.AgentExecuteResponse) string) func(v turnView) string {
		return func(v turnView) string {
			if r := v.Turns[contracts.StageCompleted].Response; r != nil {
				return f(*r)
			}
			return "-"
		}
	}
	add("completed", "kind/finish", resp(func(r contracts.AgentExecuteResponse) string { return r.Kind + "/" + orNone(r.FinishReason) }))
	add("completed", "model", resp(func(r contracts.AgentExecuteResponse) string { return orNone(r.ModelId) }))
	add("completed", "tokens in/out", resp(func(r contracts.AgentExecuteResponse) string {
		return fmt.Sprintf("%d/%d", r.Usage.PromptTokens, r.Usage.CompletionTokens)
	}))
	add("completed", "tool calls", resp(func(r contracts.AgentExecuteResponse) string {
		calls := make([]string, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			calls[i] = c.Name + c.ArgumentsJson
		}
		return orNone(strings.Join(calls, " "))
	}))
	add("completed", "error", resp(func(r contracts.AgentExecuteResponse) string { return orNone(r.ErrorCode) }))
	add("timing", "retrieval ms", func(v turnView) string {
		if r := v.Turns[contracts.StageRetrieved].Retrieval; r != nil {
			return fmt.Sprintf("%.1f", r.TookMs)
		}
		return "-"
	})
	add("timing", "llm call ms", llm(func(l *contracts.LLMResult) string { return fmt.Sprintf("%.1f", l.DurationMs) }))
	hops := [][2]string{{contracts.StageRetrieved, contracts.StageEnveloped}, {contracts.StageEnveloped, contracts.StageResponded}, {contracts.StageResponded, contracts.StageCompleted}}
	for _, h := range hops {
		add("timing", h[0]+"→"+h[1]+" ms", func(v turnView) string {
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

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func chunkIDs(t contracts.Turn) []string {
	if t.Retrieval == nil {
		return nil
	}
	ids := make([]string, len(t.Retrieval.Chunks))
	for i, c := range t.Retrieval.Chunks {
		ids[i] = c.Id
	}
	return ids
}

func sourceIDs(e *contracts.Envelope) []string {
	ids := make([]string, len(e.Sources))
	for i, s := range e.Sources {
		ids[i] = s.Id
	}
	return ids
}

// idList is a table cell for a list of ids: short lists in full, long ones
// as a count and the first id (printIDDiff shows what differs).
func idList(ids []string) string {
	switch {
	case len(ids) == 0:
		return "none"
	case len(ids) <= 2:
		return strings.Join(ids, ",")
	}
	return fmt.Sprintf("%d: %s,…", len(ids), ids[0])
}

// printIDDiff lists the ids only one side has, when the lists differ.
func printIDDiff(w io.Writer, title string, a, b []string) {
	if strings.Join(a, ",") == strings.Join(b, ",") {
		return
	}
	fmt.Fprintf(w, "\n%s (T1 → T2)\n", title)
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, id := range a {
		inA[id] = true
	}
	for _, id := range b {
		inB[id] = true
	}
	for _, id := range a {
		if !inB[id] {
			fmt.Fprintln(w, "  - "+id)
		}
	}
	for _, id := range b {
		if !inA[id] {
			fmt.Fprintln(w, "  + "+id)
		}
	}
	if len(a) == len(b) && len(inA) == len(inB) {
		same := true
		for id := range inA {
			same = same && inB[id]
		}
		if same {
			fmt.Fprintln(w, "  same ids, another order")
		}
	}
}
