package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/envelope/request"
)

// execFlags are the knobs of one turn; each maps onto an AgentExecuteRequest field.
type execFlags struct {
	conversation, turn, mode, toolsFile, toolChoice, system string
	backend, model, workspace, repo, language, scope        string
	activeFiles, tags                                       []string
	stream, asJSON                                          bool
	maxOutputTokens                                         int
	timeout                                                 time.Duration
}

func init() {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] INSTRUCTION",
		Short: "Send one turn to a running Aptix and print its result",
		Long: "exec publishes an AgentExecuteRequest on aptix.requested.<conversation>.<turn> and waits for\n" +
			"the turn's completed event, read from the stream (so a fast answer is never missed). It prints\n" +
			"the text and tool calls, or the whole AgentExecuteResponse with --json. Run it again with the\n" +
			"same --conversation to continue the conversation. Exit status 1 when the turn fails, 2 for bad flags, ids or files.",
		Example: `  aptix exec "Explain what this service does"
  aptix exec --conversation demo --mode DDR --tools examples/ddr-tools.json --tool-choice ddr_document "Document the retry policy"
  aptix exec --conversation demo "Now summarize it in one line"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An id given empty is a mistake (a variable that was not set),
			// not a request for a new one: that is what leaving it out means.
			for _, name := range []string{"conversation", "turn"} {
				if fl := cmd.Flags().Lookup(name); fl.Changed && fl.Value.String() == "" {
					return usagef("--%s is empty: give an id ([A-Za-z0-9_-]{1,%d}), or leave the flag out for a new one", name, contracts.MaxIDLen)
				}
			}
			return runExec(cmd.Context(), f, strings.Join(args, " "), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.conversation, "conversation", "", "conversation id to start or continue (default: a new one)")
	fl.StringVar(&f.turn, "turn", "", "turn id (default: a new UUIDv7); re-sending the same id (with the same --conversation, or none) prints its answer and does not run it again")
	fl.StringVar(&f.mode, "mode", "", "conceptual mode, e.g. DDR, ANALYZE (default: DEFAULT)")
	fl.StringVar(&f.toolsFile, "tools", "", "JSON file with an array of tool definitions (Responses or Chat Completions shape)")
	fl.StringVar(&f.toolChoice, "tool-choice", "", "tool name to force (a new conversation needs --tools), or auto, none, required")
	fl.StringVar(&f.system, "system", "", "boot prompt sent as the system message on the conversation's first turn")
	fl.StringVar(&f.backend, "backend", "", "backend profile name (default: the profile serving --model, else the server's default profile)")
	fl.StringVar(&f.model, "model", "", "model name, alias or profile/model; without --backend it picks the profile serving it (docs/backends.md); default: the profile's")
	fl.StringVar(&f.workspace, "workspace", "", "workspace id: the retrieval index to search")
	fl.StringVar(&f.repo, "repo", "", "repository filter for retrieval")
	fl.StringVar(&f.language, "language", "", "language filter for retrieval")
	fl.StringVar(&f.scope, "scope", "", "retrieval scope: none, activeFiles, repo, workspace (default)")
	fl.StringSliceVar(&f.activeFiles, "active-file", nil, "a file open in the editor (boosted; repeatable)")
	fl.StringSliceVar(&f.tags, "tag", nil, "retrieval tag filter (repeatable)")
	fl.BoolVar(&f.stream, "stream", false, "print the answer as it streams")
	fl.BoolVar(&f.asJSON, "json", false, "print the whole AgentExecuteResponse as JSON")
	fl.IntVar(&f.maxOutputTokens, "max-output-tokens", 0, "cap on the model's output tokens")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the turn to complete")
	root.AddCommand(cmd)
}

// buildRequest turns the flags into an execute request, generating ids the
// user left out.
func buildRequest(f execFlags, instruction string) (contracts.AgentExecuteRequest, error) {
	req := contracts.AgentExecuteRequest{
		ConversationId: f.conversation, TurnId: f.turn, Mode: f.mode, Instruction: instruction,
		ToolChoiceName: f.toolChoice, WorkspaceId: f.workspace, Repo: f.repo, Language: f.language,
		RagScope: f.scope, ActiveFiles: f.activeFiles, Tags: f.tags, Stream: f.stream, MaxOutputTokens: f.maxOutputTokens,
	}
	switch {
	case req.ConversationId == "" && req.TurnId != "":
		// --turn alone names the turn: a re-send of it (a retry) is the same
		// turn and prints its answer, not a new turn run and paid again.
		req.ConversationId, req.NewConversation = contracts.TurnConversation(req.TurnId), true
	case req.ConversationId == "":
		req.ConversationId, req.NewConversation = "c-"+newID(), true
	}
	if req.TurnId == "" {
		req.TurnId = newID()
	}
	// The ids become subject tokens: refuse a wildcard, a dot or an empty id
	// before anything is published or subscribed on them.
	if err := contracts.ValidateIDs(req.ConversationId, req.TurnId); err != nil {
		return req, usagef("%w", err)
	}
	if f.toolsFile != "" {
		tools, err := readToolsFile(f.toolsFile)
		if err != nil {
			return req, err
		}
		req.ToolsJson = tools
	}
	if err := checkToolChoice(f, req.NewConversation); err != nil {
		return req, err
	}
	if f.backend != "" || f.model != "" {
		req.AgentContext = &contracts.AgentContext{Backend: f.backend, Model: f.model}
	}
	if f.system != "" {
		req.ConversationContext = &contracts.ConversationContext{SystemPrompt: f.system}
	}
	if err := req.Validate(); err != nil {
		return req, usagef("%v", err)
	}
	return req, nil
}

// checkToolChoice refuses --tool-choice naming a tool (or "required") on a
// new conversation without --tools: it has no tool to choose, and the turn
// would only fail in the envelope stage. A continued conversation may have
// tools from an earlier turn (they persist), so there the envelope decides,
// and turnError makes its refusal an input error all the same.
func checkToolChoice(f execFlags, newConversation bool) error {
	switch f.toolChoice {
	case "", request.ChoiceAuto, request.ChoiceNone:
		return nil
	}
	if f.toolsFile != "" || !newConversation {
		return nil
	}
	return usagef("--tool-choice %s needs tools to choose from: give them with --tools FILE (a new conversation has none)", f.toolChoice)
}

// inputCodes are the envelope's refusals of what the request asked: a
// failed turn with one of them is an input error (exit 2), not a failure.
var inputCodes = map[string]bool{tooldef.CodeInvalidTools: true, tooldef.CodeUnknownToolChoice: true, request.CodeInvalidRequest: true}

// turnError is the error of a failed turn's response, nil for one that did
// not fail.
func turnError(r contracts.AgentExecuteResponse) error {
	if r.Kind != contracts.KindError {
		return nil
	}
	err := fmt.Errorf("turn failed: %s: %s", r.ErrorCode, r.ErrorMessage)
	if inputCodes[r.ErrorCode] {
		return usageError{err}
	}
	return err
}

// readToolsFile reads --tools. An empty file would silently mean "no
// tools" (ToolsJson ""), and text that is not JSON would only fail on the
// server: both are refused here as input errors.
func readToolsFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", usagef("--tools: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "", usagef("--tools %s: the file is empty (want a JSON array of tool definitions)", path)
	}
	if !json.Valid(data) {
		return "", usagef("--tools %s: not valid JSON (want a JSON array of tool definitions)", path)
	}
	return string(data), nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func runExec(ctx context.Context, f execFlags, instruction string, stdout, stderr io.Writer) error {
	req, err := buildRequest(f, instruction)
	if err != nil {
		return err
	}
	nc, err := connectRunning("exec")
	if err != nil {
		return err
	}
	defer nc.Close()
	// The client's publish span is the root of the turn's trace; its context
	// travels in the event's traceparent header (exported only when OTEL_* says so).
	stopTelemetry, err := pipeline.StartTelemetry(ctx, "aptix-exec")
	if err != nil {
		return err
	}
	defer stopTelemetry()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return bounded(ctx, func(ctx context.Context) error { return execTurnOn(ctx, nc, js, f, req, stdout, stderr) })
}

// execTurnOn sends the turn and prints its answer.
func execTurnOn(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, f execFlags, req contracts.AgentExecuteRequest, stdout, stderr io.Writer) error {
	if _, err := js.Stream(ctx, contracts.StreamName); err != nil {
		return fmt.Errorf("stream %s not found at %s (%w): is the pipeline running? start it with `make run` or `%s`", contracts.StreamName, nc.ConnectedUrl(), err, hint("", "up"))
	}
	warnIfNoStages(nc, stderr)

	var live *liveText
	if f.stream && !f.asJSON {
		live = &liveText{w: stdout}
		sub, err := nc.Subscribe(contracts.DeltaSubject(req.ConversationId, req.TurnId), live.onDelta)
		if err != nil {
			return fmt.Errorf("subscribe to deltas: %w", err)
		}
		defer sub.Unsubscribe()
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	if err := client.Submit(ctx, js, req); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "aptix: conversation %s, turn %s sent\n", req.ConversationId, req.TurnId)
	// A re-sent turn that completed is answered by its own stored answer
	// (never a turn_id_reused answer another request got under its ids);
	// otherwise Await reads the completion, stored before it started or not.
	turn, answered, err := client.Answered(ctx, js, req)
	if err != nil || !answered {
		turn, err = client.Await(ctx, js, req.ConversationId, req.TurnId)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w; the turn stays in the stream: see `%s`", err, hint(clientServer(), "events", "--conversation", req.ConversationId))
		}
		return err
	}
	if turn.Response == nil {
		return fmt.Errorf("completed event of turn %s carries no response", req.TurnId)
	}
	resp := *turn.Response
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(resp); err != nil {
			return err
		}
	} else {
		printResponse(stdout, resp, live)
	}
	summarize(stderr, turn)
	return turnError(resp)
}

// warnIfNoStages pings the stages' micro services: with none running, a turn
// would wait in the stream, which deserves a word before the wait starts.
func warnIfNoStages(nc *nats.Conn, w io.Writer) {
	var missing []string
	for _, st := range layout.MainNames() {
		if _, err := nc.Request("$SRV.PING.aptix-"+st, nil, 500*time.Millisecond); err != nil {
			missing = append(missing, st)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "aptix: warning: no %s stage answers on this NATS; the turn waits in the stream until one starts\n", strings.Join(missing, ", "))
	}
}

// liveText prints text deltas as they arrive and remembers what it printed,
// so the final answer is not printed twice.
// A re-attached call relays its deltas again from the start with
// the same upstreamSeq: those not above the last shown are dropped.
type liveText struct {
	mu      sync.Mutex
	w       io.Writer
	printed strings.Builder
	// lastUp is the highest upstreamSeq printed in round (a tool loop's
	// later calls number their upstream events afresh).
	lastUp, round int
}

func (l *liveText) onDelta(m *nats.Msg) {
	var d struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		UpstreamSeq int    `json:"upstreamSeq"`
		Round       int    `json:"round"`
	}
	if json.Unmarshal(m.Data, &d) != nil || d.Type != "text" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.Round > l.round {
		l.round, l.lastUp = d.Round, 0
	} else if d.Round < l.round {
		return
	}
	if d.UpstreamSeq > 0 {
		if d.UpstreamSeq <= l.lastUp {
			return
		}
		l.lastUp = d.UpstreamSeq
	}
	fmt.Fprint(l.w, d.Text)
	l.printed.WriteString(d.Text)
}

func (l *liveText) text() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.printed.String()
}

// printResponse writes the answer for a human: the text (unless it already
// streamed), then each tool call, then the error if there is one.
func printResponse(w io.Writer, r contracts.AgentExecuteResponse, live *liveText) {
	streamed := live.text()
	switch {
	case streamed != "" && streamed == r.Text:
		fmt.Fprintln(w)
	case streamed != "":
		// A retried attempt streamed twice, or the stream was cut: the stored result is the truth.
		fmt.Fprintf(w, "\n--- final text (the stream differed) ---\n%s\n", r.Text)
	case r.Text != "":
		fmt.Fprintln(w, r.Text)
	}
	for _, c := range r.ToolCalls {
		fmt.Fprintf(w, "tool call %s (%s): %s\n", c.Name, c.CallId, c.ArgumentsJson)
	}
	if r.Kind == contracts.KindError {
		fmt.Fprintf(w, "error %s: %s\n", r.ErrorCode, r.ErrorMessage)
	}
}

// summarize writes one line of metadata to stderr, so stdout stays the answer.
func summarize(w io.Writer, t contracts.Turn) {
	r := t.Response
	parts := []string{"kind " + r.Kind}
	if r.FinishReason != "" {
		parts = append(parts, "finish "+r.FinishReason)
	}
	if t.LLM != nil {
		parts = append(parts, fmt.Sprintf("backend %s, model %s, %d attempt(s), %.0f ms", t.LLM.Backend, r.ModelId, t.LLM.Attempts, t.LLM.DurationMs))
	}
	parts = append(parts, fmt.Sprintf("tokens %d in / %d out", r.Usage.PromptTokens, r.Usage.CompletionTokens), costText(r.Cost))
	if len(r.Sources) > 0 {
		ids := make([]string, len(r.Sources))
		for i, s := range r.Sources {
			ids[i] = s.Id
		}
		parts = append(parts, "sources "+strings.Join(ids, ","))
	}
	fmt.Fprintf(w, "aptix: %s\n", strings.Join(parts, "; "))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "aptix: warning: %s\n", warn)
	}
	if r.Kind != contracts.KindError {
		fmt.Fprintf(w, "aptix: continue with: %s\n", hint(clientServer(), "exec", "--conversation", r.ConversationId, `"..."`))
	}
}
