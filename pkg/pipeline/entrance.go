package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/responsesbody"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/tracing"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// A turn pays only for the stages it needs (docs/architecture.md#entry-points).
// The topology declares which leading stages a turn may skip
// (layout.StageSpec.Skippable) and so where it may enter (layout.Entries);
// EntryOf picks the entry point of one request, and the Entrance publishes
// it there with the sections of the skipped stages filled as they fill them
// (FillSkipped) and the event marked contracts.HeaderSkipped: no queue
// write, no hop through a stage with nothing to do. A turn with no
// retrieval enters at aptix.retrieved; a transparent one that starts its
// conversation and asks for nothing the envelope adds enters at
// aptix.enveloped, its /responses body built by the code the envelope
// builds it with (responsesbody).
//
// What the queue and the first stage did for such a turn, the Entrance does
// itself or hands back to them:
//   - validation: an invalid request is submitted on aptix.requested, where
//     the retriever answers it invalid_request as before; so is one whose
//     body cannot be built (the envelope answers it after the retriever);
//   - admission: a turn enters APTIX past the queue only while APTIX is below
//     the mark the retriever admits at (layout.StreamConfig.AdmitBelow, the
//     same admission); otherwise it is queued like any other request, so the
//     queue's cap (429), the admission hold and the at_capacity answer
//     apply to it unchanged;
//   - de-duplication: the entry event carries the Nats-Msg-Id of the stage
//     that would have written it and is stored only while the turn has no
//     event at all (contracts.TurnFilter), as the retriever stores its own,
//     so a turn sent again is stored once and a turn id reused with another
//     request is refused (client.ErrTurnIDReused), as Submit refuses it;
//   - the claim check: an event too large to publish inline goes through the
//     queue, whose first stage claims it.

// Skipping is what the rules of the skippable stages read beyond a
// request: the settings the envelope builds a body with. Its zero value
// lets a turn skip the retriever only.
type Skipping struct {
	// Profiles are the backend profiles the envelope picks a turn's
	// backend, model and price from (APTIX_PROFILES, which the gateway
	// routes models by too); nil: every turn visits the envelope.
	Profiles *profiles.Set
	// MCPDefaultAll is the envelope's APTIX_MCP_DEFAULT_ALL: every
	// configured MCP server is offered to a turn with no tools, which the
	// envelope then sends to the toolrunner, so no turn skips it.
	MCPDefaultAll bool
}

// SkippingFromEnv is the Skipping of a process that reads the envelope's
// settings from the environment the envelope reads them from: the
// profiles given (the process's own, from APTIX_PROFILES) and
// APTIX_MCP_DEFAULT_ALL, where anything but false (or unset) keeps every
// turn on the envelope.
func SkippingFromEnv(p *profiles.Set) Skipping {
	on, err := strconv.ParseBool(cmp.Or(os.Getenv(EnvMCPDefaultAll), "false"))
	return Skipping{Profiles: p, MCPDefaultAll: err != nil || on}
}

// EnvMCPDefaultAll is the envelope's setting that offers every MCP server
// to a turn with no tools (services/envelope/request reads it too).
const EnvMCPDefaultAll = "APTIX_MCP_DEFAULT_ALL"

// EntryOf is the event stage a client's request enters the pipeline at: past
// every leading stage the topology lets a turn skip (layout.Entries) whose
// work the request does not need (needs), and at the first stage's In when
// the request is invalid, so that stage answers it invalid_request.
func EntryOf(req contracts.AgentExecuteRequest, s Skipping) string {
	entry := layout.Stages[0].In
	if req.Validate() != nil {
		return entry
	}
	for _, st := range layout.Stages {
		if st.In != entry || !st.Skippable || needs(st.Name, req, s) {
			break
		}
		entry = st.Out
	}
	return entry
}

// needs says whether a request needs a skippable stage's work; a stage
// without a rule here is never skipped.
func needs(stage string, req contracts.AgentExecuteRequest, s Skipping) bool {
	switch stage {
	case "retriever":
		return req.RagScope != contracts.RagScopeNone
	case "envelope":
		return s.Profiles == nil || s.MCPDefaultAll || needsEnvelope(req)
	}
	return true
}

// needsEnvelope says whether the envelope has more to do for req than the
// transparent rule's body (responsesbody.Plain), its backend's profile and
// price. It has, and the turn goes through it, for any request that:
//   - is framed (AGN-003: the [MODE]/[INSTRUCTION] message, a system prompt,
//     conversation contexts) or retrieves (a context block);
//   - continues its conversation (NewConversation unset): the envelope reads
//     the conversation's record for the response to continue, the calls and
//     approvals waiting, the tools kept and the history's size;
//   - names a conversation context, tools or a tool choice (tool parsing,
//     emulation, the server-side tool loop and its route to the toolrunner);
//   - has budgets and no output limit (the envelope sets the profile's);
//   - sends a conversation object's whole history (WholeHistory: a turn of
//     a named conversation, which the envelope continues);
//   - has no input items (the envelope answers invalid_request) or may hold
//     an mcp_approval_response, which only the envelope takes out: the
//     words, or the \u escape of a letter they could hide behind;
//   - names no backend (the envelope routes the model itself).
func needsEnvelope(req contracts.AgentExecuteRequest) bool {
	p := req.OpenAI
	return req.Framed() || req.RagScope != contracts.RagScopeNone || !req.NewConversation ||
		req.ConversationContext != nil || req.ConversationContextId != "" ||
		req.ToolsJson != "" || req.ToolChoiceName != "" ||
		len(req.Budgets) > 0 && req.MaxOutputTokens == 0 ||
		req.AgentContext == nil || req.AgentContext.Backend == "" ||
		p == nil || len(p.Input) == 0 || p.WholeHistory || mayAnswerApproval(p.Input)
}

// mayAnswerApproval reports whether input may hold an mcp_approval_response
// item: it has the words, or a \u escape of a character they are made of
// (a-z and _, U+005F to U+007A), behind which a type could hide them.
func mayAnswerApproval(input []byte) bool {
	return bytes.Contains(input, []byte("mcp_approval_response")) ||
		bytes.Contains(input, []byte(`\u005`)) || bytes.Contains(input, []byte(`\u006`)) || bytes.Contains(input, []byte(`\u007`))
}

// FillSkipped writes the section a skipped stage writes for a turn that
// needs none of its work, so the stages after it read the turn as if it had
// run: the retriever's for ragScope none, the envelope's for a turn EntryOf
// lets skip it (services/retriever/stage and services/envelope/stage check
// each writes the same). An error says the section cannot be written (an
// unknown backend, input items that are no JSON array): the turn is to go
// through the stage, which answers it.
func FillSkipped(stage string, t *contracts.Turn, s Skipping) error {
	switch stage {
	case "retriever":
		t.Retrieval = &contracts.Retrieval{Scope: contracts.RagScopeNone, Chunks: []contracts.RagChunk{}}
		return nil
	case "envelope":
		if s.Profiles == nil {
			return errors.New("no backend profiles to build the envelope with")
		}
		return fillEnvelope(t, s.Profiles)
	}
	return fmt.Errorf("stage %s writes nothing a turn may skip", stage)
}

// fillEnvelope is the envelope's Handle for a turn that needs nothing of it
// but its body: the profile its agent context picks (profiles.Set.ForAgent),
// the model (the agent's, else the profile's default), the body, the
// (empty) tools, and the chunk list dropped as the envelope drops it.
func fillEnvelope(t *contracts.Turn, set *profiles.Set) error {
	p, ac, err := set.ForAgent(t.Request.AgentContext)
	if err != nil {
		return err
	}
	req := t.Request
	req.AgentContext = ac
	var named string
	if ac != nil {
		named = ac.Model
	}
	model := cmp.Or(named, p.DefaultModel, profiles.DefaultModel)
	body, err := responsesbody.Plain(req, model)
	if err != nil {
		return err
	}
	t.Envelope = &contracts.Envelope{Backend: p.Name, Model: model, Body: body, Sources: []contracts.SourceRef{},
		Tools: json.RawMessage("null"), Price: p.Price(model)}
	if t.Retrieval != nil {
		t.Retrieval.Chunks = nil
	}
	return nil
}

// Entrance submits turns at their entry point (EntryOf). One per process:
// its admission reads APTIX's size at most every 100 ms for all its turns.
type Entrance struct {
	js        jetstream.JetStream
	skip      Skipping
	admit     *admission
	maxInline int
	maxEvent  int
	source    string
	// entered counts turns by the entry point they took; queued the ones
	// that could skip but were queued (no room past the queue, too large).
	entered map[string]*atomic.Int64
	queued  atomic.Int64
}

// NewEntrance returns the entrance of a client on nc: source names it in
// the events it writes (ce-source "aptix/<source>"); c is the deployment's
// stream limits, the ones its first stage admits by; s the envelope's
// settings (SkippingFromEnv).
func NewEntrance(nc *nats.Conn, c layout.StreamConfig, source string, s Skipping) (*Entrance, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	e := &Entrance{js: js, skip: s, admit: newAdmission(js, c), maxInline: claim.Threshold(nc), maxEvent: MaxEventBytes(),
		source: "aptix/" + source, entered: map[string]*atomic.Int64{}}
	for _, entry := range layout.Entries() {
		e.entered[entry] = &atomic.Int64{}
	}
	return e, nil
}

// Entered is how many submissions this entrance stored at each entry point
// (a turn sent again counts again), and how many of those at the first
// could have skipped a stage but were queued (APTIX above its admission
// mark, an event too large to inline, a body the envelope is to answer).
func (e *Entrance) Entered() (byEntry map[string]int64, queued int64) {
	byEntry = map[string]int64{}
	for k, v := range e.entered {
		byEntry[k] = v.Load()
	}
	return byEntry, e.queued.Load()
}

// Submit brings the request in at its entry point and returns the event
// stage it entered at, once JetStream stored it. Its errors are Submit's: a
// full queue or stream wraps backpressure.ErrAtCapacity, a turn id used by
// another request client.ErrTurnIDReused.
func (e *Entrance) Submit(ctx context.Context, req contracts.AgentExecuteRequest) (string, error) {
	first := layout.Stages[0].In
	entry := EntryOf(req, e.skip)
	if entry == first {
		return e.queue(ctx, req)
	}
	skipped, _ := layout.SkippedAt(entry)
	t := contracts.NewTurn(req)
	for _, st := range skipped {
		if FillSkipped(st, &t, e.skip) != nil {
			e.queued.Add(1)
			return e.queue(ctx, req)
		}
	}
	data, err := turncodec.Marshal(&t)
	if err != nil {
		return "", fmt.Errorf("encode turn: %w", err)
	}
	if len(data) > min(e.maxInline, e.maxEvent) || !e.admit.now(ctx) {
		e.queued.Add(1)
		return e.queue(ctx, req)
	}
	if err := e.publish(ctx, entry, strings.Join(skipped, ","), &t, data); err != nil {
		return "", err
	}
	e.entered[entry].Add(1)
	return entry, nil
}

// queue submits the request on aptix.requested, the way every client does.
func (e *Entrance) queue(ctx context.Context, req contracts.AgentExecuteRequest) (string, error) {
	if err := client.Submit(ctx, e.js, req); err != nil {
		return "", err
	}
	e.entered[contracts.StageRequested].Add(1)
	return contracts.StageRequested, nil
}

// publish stores the turn's entry event: the stage's own CloudEvents headers
// and Nats-Msg-Id (those of the skipped stage's output), the trace context,
// the skipped stages, and the expectation that the turn holds no event yet.
func (e *Entrance) publish(ctx context.Context, entry, skipped string, t *contracts.Turn, data []byte) error {
	subject := contracts.Subject(entry, t.ConversationId, t.TurnId)
	id := contracts.EventMsgID(t, entry)
	ctx, span := tracing.Tracer().Start(ctx, "send aptix."+entry, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.MessagingAttrs("send", subject, id)...),
		trace.WithAttributes(attribute.String("aptix.conversation_id", t.ConversationId), attribute.String("aptix.turn_id", t.TurnId),
			attribute.String("aptix.skipped", skipped)))
	defer span.End()
	h := nats.Header{}
	h.Set(contracts.HeaderMsgID, id)
	h[contracts.HeaderCESpecVersion] = []string{contracts.CESpecVersion}
	h[contracts.HeaderCEID] = []string{id}
	h[contracts.HeaderCEType] = []string{contracts.CEType(entry)}
	h[contracts.HeaderCESource] = []string{e.source}
	h[contracts.HeaderCETime] = []string{time.Now().UTC().Format(time.RFC3339Nano)}
	h[contracts.HeaderCEContentType] = []string{contracts.CEContentTypeJSON}
	h[contracts.HeaderSkipped] = []string{skipped}
	h[jetstream.ExpectedLastSubjSeqHeader] = []string{"0"}
	h[jetstream.ExpectedLastSubjSeqSubjHeader] = []string{contracts.TurnFilter(t.ConversationId, t.TurnId)}
	otel.GetTextMapPropagator().Inject(ctx, tracing.HeaderCarrier(h))
	ack, err := e.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: h})
	err = notFirst(ack, err)
	if errors.Is(err, errNotFirst) {
		// Sent before: the same request again (a retry) is in already; a
		// different one under this turn id is refused, as Submit refuses it.
		prev, rerr := turnreuse.RecordedRequest(ctx, e.js, t.ConversationId, t.TurnId)
		if rerr != nil {
			return fmt.Errorf("publish %s: %w (and reading the turn's first request: %w)", subject, err, rerr)
		}
		if prev != nil && !turnreuse.SameRequest(*prev, t.Request) {
			return fmt.Errorf("%w: turn %s of conversation %s was already sent with a different request, whose answer stands: use a new turn id", client.ErrTurnIDReused, t.TurnId, t.ConversationId)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", subject, backpressure.Wrap(err))
	}
	return nil
}
