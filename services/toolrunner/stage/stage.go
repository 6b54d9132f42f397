// Package stage binds the server-side tool loop (package loop) to the bus
// and to MCP: it consumes aptix.toolround events, lists or runs the turn's
// MCP tools, and publishes the next round as aptix.enveloped for the LLM
// caller (docs/architecture.md#the-server-side-tool-loop).
package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/services/toolrunner/loop"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
)

// CodeUnknownServer ends a turn whose mcp tool names no configured server.
// A configured server that is down is reported in its mcp_list_tools item
// and the turn goes on without its tools.
const CodeUnknownServer = "unknown_mcp_server"

// DefaultTimeout is the seed's per-tool timeout (APTIX_TOOL_TIMEOUT).
const DefaultTimeout = 45 * time.Second

// maxOutput caps one tool's output kept on the turn and sent to the model:
// the output travels in the round's events (execution, mcp_call item, next
// body), so a few large ones would make every later event of the turn big.
const maxOutput = 64 << 10

// Tools is what the toolrunner needs of MCP (mcp.Registry).
type Tools interface {
	Labels() []string
	Has(label string) bool
	List(ctx context.Context, labels []string) []mcp.ServerTools
	Call(ctx context.Context, label, tool string, args json.RawMessage) (mcp.Result, error)
}

// Runner runs a turn's server-side tools.
type Runner struct {
	Tools Tools
	// Results records finished calls before a round is published; nil runs
	// without that guarantee (tests of the domain only).
	Results ResultStore
	// Timeout bounds each call (default 45s).
	Timeout time.Duration
	// Cancels makes a cancel stop the loop between and during rounds.
	Cancels *store.Cancels
	// NC publishes the live mcp_* events of a streamed turn; nil disables them.
	NC     *nats.Conn
	Logger *slog.Logger
	// URLTools connects to a client-named server_url (allowed by
	// APTIX_MCP_ALLOW_URLS in the envelope) under the request's label; nil
	// refuses them.
	URLTools func(label, url string) Tools
}

// Stage returns the pipeline stage.
func (r *Runner) Stage() pipeline.Stage {
	return pipeline.Stage{Name: "toolrunner", In: contracts.StageToolRound, Out: contracts.StageEnveloped, Handle: r.Handle, Route: route}
}

// route: a round that ran tools goes back to the LLM caller; a loop that
// ended without another call (a mixed round) goes on to the mapper.
func route(t *contracts.Turn) string {
	if t.LLM != nil {
		return contracts.StageResponded
	}
	return contracts.StageEnveloped
}

// Handle lists the turn's tools (its first visit) or runs a round of calls.
func (r *Runner) Handle(ctx context.Context, t *contracts.Turn) error {
	l := t.Tools
	if l == nil || t.Envelope == nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "toolround event has no tools or envelope section")
	}
	if r.Cancels != nil {
		wctx, release, reason, ok, err := r.Cancels.Watch(ctx, t.ConversationId, t.TurnId)
		if err != nil {
			return err
		} else if ok {
			l.Status = contracts.LoopCancelled
			return pipeline.Reject(reason, "the response was cancelled (%s) during its tool loop, after %d round(s)", reason, l.Round)
		}
		defer release()
		ctx = wctx
	}
	var err error
	if t.LLM == nil {
		err = r.discover(ctx, t)
	} else {
		err = r.round(ctx, t)
	}
	if err == nil {
		l.Step++
	}
	if errors.Is(context.Cause(ctx), store.ErrCancelled) {
		l.Status = contracts.LoopCancelled
		return pipeline.Reject(store.CodeCancelled, "the response was cancelled during round %d of its tool loop; the running tools were stopped", l.Round+1)
	}
	return err
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Runner) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// tools resolves a server the turn names: configured, or a client URL.
func (r *Runner) tools(use contracts.MCPServerUse) (Tools, error) {
	if use.URL != "" {
		if r.URLTools == nil {
			return nil, pipeline.Reject(CodeUnknownServer, "mcp server_url %q: this deployment runs only configured MCP servers", use.URL)
		}
		return r.URLTools(use.Label, use.URL), nil
	}
	if !r.Tools.Has(use.Label) {
		return nil, pipeline.Reject(CodeUnknownServer, "mcp server_label %q names no configured MCP server (configured: %v; APTIX_MCP_CONFIG)", use.Label, r.Tools.Labels())
	}
	return r.Tools, nil
}

// discover lists the turn's servers' tools and offers them to the model as
// function tools; the output starts with one mcp_list_tools item a server.
func (r *Runner) discover(ctx context.Context, t *contracts.Turn) error {
	l := t.Tools
	if l.StartedAtMs == 0 {
		l.StartedAtMs = time.Now().UnixMilli()
	}
	uses := l.Servers
	if l.AllServers {
		uses = nil
		for _, label := range r.Tools.Labels() {
			uses = append(uses, contracts.MCPServerUse{Label: label})
		}
	}
	var listed []mcp.ServerTools
	for _, use := range uses {
		src, err := r.tools(use)
		if err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, r.timeout())
		got := src.List(lctx, []string{use.Label})
		cancel()
		if err := ctx.Err(); err != nil {
			return err // shutting down or cancelled: not a server that is down
		}
		for i := range got {
			got[i].Tools = allowed(got[i].Tools, use.AllowedTools)
		}
		listed = append(listed, got...)
	}
	reserved, err := functionNames(t.Envelope.Body)
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "toolround body: %v", err)
	}
	exposed := mcp.Expose(listed, reserved)
	l.Tools, l.Items = nil, nil
	defs := make([]json.RawMessage, 0, len(exposed))
	for _, e := range exposed {
		l.Tools = append(l.Tools, contracts.LoopTool{Name: e.Name, Server: e.Tool.Server, Tool: e.Tool.Name})
		def, _ := json.Marshal(map[string]any{"type": "function", "name": e.Name, "description": e.Tool.Description,
			"parameters": e.Tool.InputSchema, "strict": false})
		defs = append(defs, def)
	}
	for i, s := range listed {
		var tools []loop.ListedTool
		for _, tl := range s.Tools {
			tools = append(tools, loop.ListedTool{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema, Annotations: json.RawMessage("null")})
		}
		errMsg := ""
		if s.Err != nil {
			errMsg = s.Err.Error()
			r.log().Warn("MCP server unavailable; its tools are not offered", "server", s.Server, "turn", t.TurnId, "err", s.Err)
		}
		item := loop.ListItem(fmt.Sprintf("mcpl_%s_%d", t.TurnId, i), s.Server, tools, errMsg)
		l.Items = append(l.Items, item)
		r.live(t, liveDelta{Type: "mcp_list_tools", Item: item})
	}
	body, err := withTools(t.Envelope.Body, defs)
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "toolround body: %v", err)
	}
	if l.Template, err = loop.Template(body); err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "toolround body: %v", err)
	}
	t.Envelope.Body = body
	if len(l.Resume) > 0 {
		return r.resume(ctx, t)
	}
	return nil
}

// round runs the server-side calls of the latest LLM result in parallel and
// builds the next call's body with their outputs.
func (r *Runner) round(ctx context.Context, t *contracts.Turn) error {
	l := t.Tools
	res, err := loop.Read(t.LLM.Body, l)
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "%v", err)
	}
	if err := loop.CheckDepth(l); err != nil {
		// The last call's usage is the gateway's to add (t.LLM), as on any
		// other end of the loop.
		l.Status = contracts.LoopMaxDepthExceeded
		l.DurationMs = time.Now().UnixMilli() - l.StartedAtMs
		return pipeline.Reject(contracts.LoopMaxDepthExceeded, "%v", err)
	}
	// Calls whose server requires approval wait for the client; the rest
	// run, as far as max_tool_calls allows: those past it do not, and are
	// left out of the response.
	run, ask := loop.Split(l, res.Server)
	run, over := loop.Limit(l, run)
	if len(over) > 0 {
		res = withoutCalls(res, over)
	}
	execs := make([]contracts.ToolExecution, len(run))
	errs := make([]error, len(run))
	var wg sync.WaitGroup
	for i, c := range run {
		r.live(t, liveDelta{Type: "mcp_call", Item: loop.CallItem(c, contracts.ToolExecution{})})
		wg.Add(1)
		go func() {
			defer wg.Done()
			execs[i], errs[i] = r.run(ctx, t, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err // a result could not be recorded: redelivered, finished calls are not re-run
	}
	byCall := map[string]contracts.ToolExecution{}
	outs := make([]loop.Output, 0, len(run))
	for i, c := range run {
		byCall[c.CallID] = execs[i]
		r.live(t, liveDelta{Type: "mcp_call_done", Item: loop.CallItem(c, execs[i])})
		outs = append(outs, loop.Output{CallID: c.CallID, Output: modelOutput(execs[i])})
	}
	for _, c := range over {
		outs = append(outs, loop.Output{CallID: c.CallID, Output: loop.OverOutput(l)})
	}
	asked := map[string]contracts.PendingApproval{}
	for _, c := range ask {
		asked[c.CallID] = loop.Pending(c)
	}
	round := loop.RoundItems(res, byCall, asked)
	l.Executions = append(l.Executions, execs...)
	l.Round++
	if len(res.Client) > 0 || len(ask) > 0 {
		// The mapper adds this call's usage, as for any last call.
		for _, c := range ask {
			l.Approvals = append(l.Approvals, asked[c.CallID])
		}
		return r.endMixed(t, res, round, outs)
	}
	l.Items = append(l.Items, round...)
	l.Usage = l.Usage.Plus(res.Usage)
	body, err := loop.Next(l.Template, res.ResponseID, outs, loop.Exhausted(l))
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "%v", err)
	}
	t.Envelope.Body, t.LLM = body, nil
	return nil
}

// resume acts on the client's answers to the calls the conversation's last
// turn left for approval, before this turn's first LLM call: an approved
// call runs (an mcp_call item naming its approval request), a denied one
// does not, and the model reads each one's output (or that it was denied)
// at the start of the input.
func (r *Runner) resume(ctx context.Context, t *contracts.Turn) error {
	l := t.Tools
	outs := make([]json.RawMessage, len(l.Resume))
	execs := make([]contracts.ToolExecution, len(l.Resume))
	errs := make([]error, len(l.Resume))
	var wg sync.WaitGroup
	for i, d := range l.Resume {
		c := loop.Resumed(d.PendingApproval)
		if !d.Approve {
			execs[i] = contracts.ToolExecution{Tool: d.Tool, Server: d.Server, CallID: d.CallID, Status: contracts.ExecDenied}
			continue
		}
		r.live(t, liveDelta{Type: "mcp_call", Item: loop.ApprovedCallItem(c, contracts.ToolExecution{}, d.ID)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			execs[i], errs[i] = r.run(ctx, t, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, d := range l.Resume {
		out := loop.DeniedOutput(d)
		if d.Approve {
			c := loop.Resumed(d.PendingApproval)
			item := loop.ApprovedCallItem(c, execs[i], d.ID)
			r.live(t, liveDelta{Type: "mcp_call_done", Item: item})
			l.Items = append(l.Items, item)
			l.Executions = append(l.Executions, execs[i])
			out = modelOutput(execs[i])
		}
		outs[i], _ = json.Marshal(map[string]string{"type": "function_call_output", "call_id": d.CallID, "output": out})
	}
	body, err := prependInput(t.Envelope.Body, outs)
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "toolround body: %v", err)
	}
	t.Envelope.Body = body
	return nil
}

// run executes one call, or returns its recorded result when an earlier
// delivery of this round finished it.
func (r *Runner) run(ctx context.Context, t *contracts.Turn, c loop.Call) (contracts.ToolExecution, error) {
	key := ResultKey(t.ConversationId, t.TurnId, t.Tools.Round, c.CallID)
	if r.Results != nil {
		if prev, err := r.Results.Get(ctx, key); err != nil {
			return contracts.ToolExecution{}, err
		} else if prev != nil {
			return *prev, nil
		}
	}
	// The execution's id stays within its turn (the key less the conversation).
	id := "toolexec_" + strings.TrimPrefix(key, t.ConversationId+".")
	e := contracts.ToolExecution{ID: id, Tool: c.Tool.Tool, Server: c.Tool.Server, CallID: c.CallID, Round: t.Tools.Round + 1}
	e.Input = json.RawMessage(c.Arguments)
	if !json.Valid(e.Input) || len(e.Input) == 0 {
		e.Input, _ = json.Marshal(c.Arguments)
	}
	timeout := r.timeout()
	src := r.Tools
	for _, use := range t.Tools.Servers {
		if use.URL != "" && use.Label == c.Tool.Server && r.URLTools != nil {
			src = r.URLTools(use.Label, use.URL)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	out, err := src.Call(cctx, c.Tool.Server, c.Tool.Tool, argsOrEmpty(c.Arguments))
	cancel()
	e.DurationMs = time.Since(start).Milliseconds()
	switch {
	case err != nil && ctx.Err() != nil:
		// Cancelled or shutting down: not a result of the tool. Nothing is
		// recorded, so a redelivery runs it again unless the turn was cancelled.
		e.Status, e.Error = contracts.ExecCancelled, "cancelled"
		return e, ctx.Err()
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		e.Status, e.Error = contracts.ExecTimeout, fmt.Sprintf("tool %s timed out after %s (APTIX_TOOL_TIMEOUT)", c.Tool.Tool, timeout)
	case err != nil:
		e.Status, e.Error = contracts.ExecFailed, fmt.Sprintf("tool %s on MCP server %s failed: %v", c.Tool.Tool, c.Tool.Server, err)
	case out.IsError:
		e.Status, e.Output, e.Error = contracts.ExecFailed, capped(out.Output), capped(out.Output)
	default:
		e.Status, e.Output = contracts.ExecCompleted, capped(out.Output)
	}
	if r.Results != nil {
		if err := r.Results.Put(ctx, key, e); err != nil {
			return e, err
		}
	}
	return e, nil
}

// endMixed ends the loop on a round where the model called the client's
// functions too: the client runs those, so the response is this round. Its
// server-side calls are shown as mcp_call items before the rest of the
// round (the LLM body, which keeps the text and the client's calls), and
// their function_call_output items wait on the turn for the client's
// continuation (the mapper records them with the conversation).
func (r *Runner) endMixed(t *contracts.Turn, res loop.Result, round []json.RawMessage, outs []loop.Output) error {
	l := t.Tools
	var keep []json.RawMessage
	for _, raw := range round {
		var it struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &it)
		if it.Type == "mcp_call" || it.Type == "mcp_approval_request" {
			l.Items = append(l.Items, raw)
		} else {
			keep = append(keep, raw)
		}
	}
	body, err := replaceOutput(t.LLM.Body, keep)
	if err != nil {
		return pipeline.Reject(pipeline.CodeInvalidEvent, "%v", err)
	}
	for _, o := range outs {
		b, _ := json.Marshal(map[string]string{"type": "function_call_output", "call_id": o.CallID, "output": o.Output})
		l.Pending = append(l.Pending, b)
	}
	t.LLM.Body = body
	return nil
}
