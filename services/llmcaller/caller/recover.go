package caller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Conversation recovery: a backend that threads by
// previous_response_id may lose the response a conversation continues from
// (an in-process sandbox restarted, a stored response expired or deleted)
// while Aptix's conversation record still names it. When the backend answers
// previous_response_not_found the caller sends the whole conversation as
// input instead, once, and says so in the turn's warnings.
//
// Nothing is written for this on a turn's path: the conversation's items are
// in its stored events already (each model call's body in its enveloped
// event, its output in the responded or toolround event after it), and
// recovery, which is rare, reads them there (CallLog). Records kept per turn
// by releases before that, in the history store, are still followed where
// the events are gone.

// CallLog is where recovery finds a conversation's earlier model calls. The
// LLM caller stage reads them from the conversation's events in the APTIX
// stream, so they are there for as long as the stream keeps those events.
type CallLog interface {
	// Calls returns the conversation's model calls that have a stored
	// result, oldest first.
	Calls(ctx context.Context, conversationID string) ([]LoggedCall, error)
}

// LoggedCall is one model call as the turn's events keep it.
type LoggedCall struct {
	// Backend is the profile the call went to.
	Backend string
	// Body is the /responses body the call was made with, as it was handed
	// to the caller (Input.Body).
	Body json.RawMessage
	// From is the conversation the call's previous_response_id was made
	// in, when another than the call's own (a branch's first call:
	// contracts.AgentExecuteRequest.ContinuationConversation).
	From string
	// Result is the call's result (contracts.LLMResult: the upstream body,
	// verbatim in UpstreamBody under tool emulation, and how many input
	// items were dropped to fit the context window).
	Result contracts.LLMResult
}

// linkType marks the first item of a record: the response the record's call
// continued from, whose own record holds the earlier items. Records kept by
// earlier releases use it too.
const linkType = "aptix_previous_response"

type link struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// maxChain bounds how many linked records recovery follows.
const maxChain = 1000

// recoverySource returns the records recovery follows for a conversation:
// those rebuilt from its logged calls first (and from those of the
// conversations a branch continued from: from, and each logged call's
// From), then those earlier releases kept in the history store. nil when
// the caller has neither.
func (c *Caller) recoverySource(conversationID, from string) HistoryStore {
	if c.o.Calls == nil && c.o.History == nil {
		return nil
	}
	r := &recoveryRecords{c: c, queued: map[string]bool{}}
	r.queue(conversationID)
	r.queue(from)
	return r
}

// recoveryRecords is a read-only HistoryStore over a conversation's logged
// calls and the history store. The conversation's calls are read at the
// first Get; those of a conversation it branched from only when a chain
// reaches a response its own calls do not hold.
type recoveryRecords struct {
	c *Caller

	pending []string        // conversations whose calls are still to read, in order
	queued  map[string]bool // every conversation ever queued
	calls   []LoggedCall
	byID    map[string]int // response id -> the first call that produced it
}

// queue adds a conversation whose calls may hold the chain.
func (r *recoveryRecords) queue(conv string) {
	if conv != "" && !r.queued[conv] {
		r.queued[conv] = true
		r.pending = append(r.pending, conv)
	}
}

// loadNext reads the calls of the next queued conversation; false when
// none is left.
func (r *recoveryRecords) loadNext(ctx context.Context) (bool, error) {
	if r.c.o.Calls == nil || len(r.pending) == 0 {
		return false, nil
	}
	conv := r.pending[0]
	r.pending = r.pending[1:]
	calls, err := r.c.o.Calls.Calls(ctx, conv)
	if err != nil {
		return false, fmt.Errorf("read the calls of conversation %s: %w", conv, err)
	}
	if r.byID == nil {
		r.byID = make(map[string]int, len(calls))
	}
	for _, call := range calls {
		r.queue(call.From)
		r.calls = append(r.calls, call)
		i := len(r.calls) - 1
		if call.Result.Error != nil {
			continue
		}
		if s, ok := (*bodies)(nil).of(upstreamBody(call.Result)); ok && s.ID != "" {
			if _, seen := r.byID[s.ID]; !seen {
				r.byID[s.ID] = i
			}
		}
	}
	return true, nil
}

// Get returns the record of responseID: a link to the response its call
// continued from (when there was one), the input items sent and the output
// items received.
func (r *recoveryRecords) Get(ctx context.Context, responseID string) ([]json.RawMessage, error) {
	for {
		if i, ok := r.byID[responseID]; ok {
			return r.c.record(r.calls[i])
		}
		more, err := r.loadNext(ctx)
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	if r.c.o.History == nil {
		return nil, ErrHistoryNotFound
	}
	return r.c.o.History.Get(ctx, responseID)
}

func (r *recoveryRecords) Put(context.Context, string, []json.RawMessage) error {
	return errors.New("recovery records are read-only")
}

// record rebuilds the items of a logged call as the call sent and received
// them: the input the caller sent (with the oldest items dropped again when
// the call dropped some to fit its context window) and the upstream output.
func (c *Caller) record(call LoggedCall) ([]json.RawMessage, error) {
	b, err := openBody(call.Body)
	if err != nil {
		return nil, err
	}
	if call.Result.TruncatedItems > 0 {
		if prof, err := c.set.Get(call.Backend); err == nil {
			if _, err := truncateAuto(b, prof.ContextWindow); err != nil {
				return nil, err
			}
		}
	}
	s, ok := (*bodies)(nil).of(upstreamBody(call.Result))
	if !ok {
		return nil, errors.New("the call's response body is not JSON")
	}
	rec, err := b.keptItems(s.OutputItems())
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rec, &items); err != nil {
		return nil, fmt.Errorf("decode record of response %s: %w", s.ID, err)
	}
	return items, nil
}

// upstreamBody is the body the backend sent: under tool emulation the
// result's Body is rewritten and the verbatim one is UpstreamBody.
func upstreamBody(r contracts.LLMResult) string {
	if r.UpstreamBody != "" {
		return r.UpstreamBody
	}
	return r.Body
}

// loadChain returns every item of the conversation up to and including
// response id, following the links the records carry.
func loadChain(ctx context.Context, hs HistoryStore, id string) ([]json.RawMessage, error) {
	var records [][]json.RawMessage
	for n := 0; id != ""; n++ {
		if n == maxChain {
			return nil, fmt.Errorf("%w: the conversation is longer than %d stored calls", errHistoryMissing, maxChain)
		}
		items, err := hs.Get(ctx, id)
		if errors.Is(err, ErrHistoryNotFound) {
			return nil, fmt.Errorf("%w: no stored items for response %q", errHistoryMissing, id)
		}
		if err != nil {
			return nil, fmt.Errorf("load history of %q: %w", id, err)
		}
		id = ""
		if len(items) > 0 {
			var l link
			if json.Unmarshal(items[0], &l) == nil && l.Type == linkType {
				id, items = l.ID, items[1:]
			}
		}
		records = append(records, items)
	}
	var all []json.RawMessage
	for i := len(records) - 1; i >= 0; i-- {
		all = append(all, records[i]...)
	}
	return all, nil
}

// recoverable reports whether an upstream error says the response a turn
// continues from is gone.
func recoverable(e *contracts.UpstreamError) bool {
	return e != nil && e.Status == 400 && e.Code == "previous_response_not_found"
}

// recoverBody rewrites a continuation to carry the whole conversation as
// input, without previous_response_id. It returns the encoded body and a
// warning for the client, or the reason it cannot.
func recoverBody(ctx context.Context, hs HistoryStore, r *request, conversationID string) ([]byte, string, error) {
	b := r.b
	prev := b.previousResponseID()
	if hs == nil || prev == "" {
		return nil, "", fmt.Errorf("%w: no history store", errHistoryMissing)
	}
	earlier, err := loadChain(ctx, hs, prev)
	if err != nil {
		return nil, "", err
	}
	input, err := b.inputItems()
	if err != nil {
		return nil, "", err
	}
	all := append(earlier, input...)
	raw, err := json.Marshal(all)
	if err != nil {
		return nil, "", fmt.Errorf("encode recovered input: %w", err)
	}
	delete(b, "previous_response_id")
	b["input"] = raw
	enc, err := r.encode()
	if err != nil {
		return nil, "", err
	}
	warning := fmt.Sprintf("the backend no longer has response %s, which conversation %s continued from: Aptix sent the conversation's %d earlier items, read from its stored events, as input instead (previous_response_id dropped for this turn)",
		prev, conversationID, len(earlier))
	return enc, warning, nil
}

// startOver is the hint an unrecoverable continuation error carries.
func startOver(conversationID string) string {
	return fmt.Sprintf("; Aptix no longer holds the history to recover conversation %q from (a conversation's events are kept for APTIX_HISTORY_MAX_AGE): start a new conversation (another conversation id, e.g. `aptix exec --conversation NEW …`), or send the earlier turns as input items", conversationID)
}
