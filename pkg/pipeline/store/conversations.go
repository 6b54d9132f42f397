package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/subjectscan"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
)

// ConversationsBucket is the KV bucket of per-conversation state.
const ConversationsBucket = "aptix_conversations"

// Conversation is what the next turn's envelope needs from the last one: the
// response id to continue from and the tools the backend was last given.
// The mapper writes it; the envelope reads it.
type Conversation struct {
	ResponseId string          `json:"responseId"`
	TurnId     string          `json:"turnId"`
	Backend    string          `json:"backend,omitempty"`
	Tools      json.RawMessage `json:"tools,omitempty"`
	// Pending are function_call_output items of server-side tool calls the
	// last turn ran in a round that also called the client's functions
	// (contracts.ToolLoop.Pending): the next turn continuing ResponseId
	// sends them with the client's own outputs.
	Pending []json.RawMessage `json:"pending,omitempty"`
	// Approvals are the server-side calls the last turn left waiting for
	// the client's approval (contracts.ToolLoop.Approvals): the next turn
	// continuing ResponseId answers them with mcp_approval_response items.
	Approvals []contracts.PendingApproval `json:"approvals,omitempty"`
	// ContextTokens bounds what the backend holds under ResponseId: the
	// last turn's input plus output tokens (every round's, for a tool
	// loop). A budget's reservation counts it for the next turn, whose
	// body carries only what is new (contracts.Envelope.HistoryTokens).
	ContextTokens int       `json:"contextTokens,omitempty"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// ConversationOf is the record a completed turn leaves for the next one,
// and whether it leaves one: an error, or an answer without a response id
// to continue from, leaves the conversation where it was. The mapper
// writes what this returns and a reader that finds a completion newer than
// the record derives the same from it, so the two cannot drift. Whether
// a replay may update the record is the caller's to ask (UpdatesConversation,
// or the completion's replay headers).
func ConversationOf(t *contracts.Turn, at time.Time) (Conversation, bool) {
	r := t.Response
	if r == nil || t.Envelope == nil || r.Kind == contracts.KindError || r.ResponseContinuationId == "" {
		return Conversation{}, false
	}
	rec := Conversation{
		ResponseId: r.ResponseContinuationId, TurnId: t.TurnId, Backend: t.Envelope.Backend,
		Tools: t.Envelope.Tools, UpdatedAt: at.UTC(),
		ContextTokens: max(r.Usage.PromptTokens, 0) + max(r.Usage.CompletionTokens, 0),
	}
	if t.Tools != nil {
		rec.Pending = t.Tools.Pending
		rec.Approvals = t.Tools.Approvals
	}
	return rec, true
}

// Conversations stores Conversation records in JetStream KV, so every
// replica of the envelope sees what any mapper replica recorded.
type Conversations struct {
	kv jetstream.KeyValue
	js jetstream.JetStream

	mu     sync.Mutex
	stream jetstream.Stream // APTIX, once found: Get reads its newest completion
}

// OpenConversations creates the bucket if needed.
func OpenConversations(ctx context.Context, js jetstream.JetStream, replicas int) (*Conversations, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ConversationsBucket,
		Description: "Aptix: latest response id and tools per conversation",
		History:     1,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", ConversationsBucket, err)
	}
	return &Conversations{kv: kv, js: js}, nil
}

// Get returns what the conversation's next turn continues from, or nil when
// the conversation has none yet.
//
// The mapper writes the record after it stored the turn's completion, so a
// client that sends its next turn as soon as it reads a completion can get
// here before the record of that completion is written. Get therefore also
// reads the conversation's newest completion (both reads at once: no round
// trip more than the record's alone) and, when that completion is another
// turn's than the record's and one that updates the record, returns the
// record the mapper is about to write. "Another turn's" is enough to know
// it is the newer: a record is only ever written from a completion already
// stored, so the newest stored completion is never older than the
// record's own. This also repairs a record a retried mapper wrote late,
// over a later turn's.
func (c *Conversations) Get(ctx context.Context, conversationID string) (*Conversation, error) {
	var (
		last    *jetstream.RawStreamMsg
		lastErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		last, lastErr = c.newestCompletion(ctx, conversationID)
	}()
	rec, err := c.Record(ctx, conversationID)
	<-done
	if err != nil {
		return nil, err
	}
	if lastErr != nil {
		return nil, lastErr
	}
	if last == nil {
		return rec, nil
	}
	_, _, turnID, ok := contracts.ParseSubject(last.Subject)
	if !ok {
		return rec, nil
	}
	if leaves(last.Header) {
		if rec != nil && rec.TurnId == turnID {
			return rec, nil
		}
		derived, ok, err := c.derive(ctx, last)
		if err != nil || ok {
			return derived, err
		}
	}
	// The newest completion leaves no record (a failed turn, a turn id
	// reused, a replay that does not continue): the conversation is where
	// the newest one between the record's completion and it that does
	// leaves it, which a killed mapper may not have recorded yet, or a
	// redelivered one may have recorded over.
	return c.sinceRecord(ctx, conversationID, rec, last)
}

// leaves says, from its headers, whether a completion may leave the
// conversation a record: not a turn_id_reused answer, nor a replay that
// does not continue the conversation.
func leaves(h nats.Header) bool {
	return contracts.ReplayUpdatesConversation(h.Get(contracts.HeaderReplayOf), h.Get(contracts.HeaderReplayContinue)) && !contracts.IsReusedAnswerID(h.Get(contracts.HeaderMsgID))
}

// derive is the record a stored completion leaves, if it leaves one.
func (c *Conversations) derive(ctx context.Context, m *jetstream.RawStreamMsg) (*Conversation, bool, error) {
	data, err := claim.EventData(ctx, c.js, m.Header, m.Data)
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", m.Subject, err)
	}
	var t contracts.Turn
	if err := turncodec.Unmarshal(data, &t); err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", m.Subject, err)
	}
	derived, ok := ConversationOf(&t, m.Time)
	if !ok {
		return nil, false, nil
	}
	return &derived, true, nil
}

// maxSinceRecord bounds how many completions Get reads past the record's:
// the turns that failed in a row since the last answer, read only by the
// turn after a failed one.
const maxSinceRecord = 32

// sinceRecord is the record the newest completion before last and after
// the record's own leaves, or rec when none does (or more than
// maxSinceRecord completions would have to be read to tell).
func (c *Conversations) sinceRecord(ctx context.Context, conversationID string, rec *Conversation, last *jetstream.RawStreamMsg) (*Conversation, error) {
	s, err := c.completions(ctx)
	if err != nil {
		return nil, err
	}
	from := uint64(1)
	if rec != nil {
		m, err := subjectscan.NewestOn(ctx, s, contracts.Subject(contracts.StageCompleted, conversationID, rec.TurnId), leaves)
		if err != nil {
			return nil, fmt.Errorf("read the recorded completion of %s: %w", conversationID, err)
		}
		if m == nil {
			return rec, nil // trimmed: nothing to start from
		}
		from = m.Sequence + 1
	}
	var found *Conversation
	filter := contracts.Subject(contracts.StageCompleted, conversationID, "*")
	for n := 0; from < last.Sequence && n < maxSinceRecord; n++ {
		m, err := s.GetMsg(ctx, from, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the completions of %s: %w", conversationID, err)
		}
		if m.Sequence >= last.Sequence {
			break
		}
		from = m.Sequence + 1
		if !leaves(m.Header) {
			continue
		}
		derived, ok, err := c.derive(ctx, m)
		if err != nil {
			return nil, err
		}
		if ok {
			found = derived
		}
	}
	if found == nil || from < last.Sequence {
		return rec, nil
	}
	return found, nil
}

// newestCompletion is the conversation's last stored completion, or nil.
func (c *Conversations) newestCompletion(ctx context.Context, conversationID string) (*jetstream.RawStreamMsg, error) {
	if !contracts.IsToken(conversationID) {
		return nil, nil // no completion has such a subject
	}
	s, err := c.completions(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := s.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageCompleted, conversationID, "*"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the newest completion of %s: %w", conversationID, err)
	}
	return m, nil
}

// completions is the APTIX stream's handle, looked up once: a lookup is a
// round trip of its own.
func (c *Conversations) completions(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream != nil {
		return c.stream, nil
	}
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	c.stream = s
	return s, nil
}

// Record returns the stored record alone, or nil when there is none.
func (c *Conversations) Record(ctx context.Context, conversationID string) (*Conversation, error) {
	e, err := c.kv.Get(ctx, conversationID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read conversation %s: %w", conversationID, err)
	}
	var rec Conversation
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("decode conversation %s: %w", conversationID, err)
	}
	return &rec, nil
}

// Put records the conversation's latest turn.
func (c *Conversations) Put(ctx context.Context, conversationID string, rec Conversation) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, conversationID, data); err != nil {
		return fmt.Errorf("record conversation %s: %w", conversationID, err)
	}
	return nil
}
