package application

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// The response record's life (docs/http-api.md#where-a-response-is-kept).
//
// A stored response (store: true) has a record: its owner, its
// conversation and turn, the parameters its object echoes. The record
// travels in its turn's request (AgentExecuteRequest.GatewayRecord), so
// every event of the turn carries it, and the create writes nothing else
// for it when the response's id says where those events are: a response
// that starts its conversation (a new one, or a branch) runs in the
// conversation named after its turn, and its id is that turn's. GET,
// cancel, delete, input_items, continuation, the deadline and the webhook
// read it from the turn's entry event (derive).
//
// A response that runs in a conversation its id does not name (a
// continuation that kept its conversation, a named conversation, a
// conversation object) also gets its record written to the bucket, but
// concurrently with the submit, not before it: the create waits for both
// before anyone can learn the id (the answer, a streamed response.created,
// a background response's queued answer), so no GET misses a response
// whose id a client holds. A record that cannot be written after its turn
// was stored cancels the turn (recordAfterSubmit).

// derivable reports whether m's record is read from its turn's events by
// its id alone.
func derivable(m *responses.Meta) bool { return startsConversation(m) }

// turnOf is the turn id of response id (newIDs), or "" when id is not one
// the gateway makes.
func turnOf(id string) string {
	h, ok := strings.CutPrefix(id, "resp_")
	if !ok || len(h) != 32 {
		return ""
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return ""
	}
	u, err := uuid.FromBytes(b)
	if err != nil {
		return ""
	}
	return u.String()
}

// carry puts meta in the turn's request, for derive.
func carry(exec *contracts.AgentExecuteRequest, meta *responses.Meta) *responses.Error {
	b, err := jsonv2.Marshal(meta, jsonCodec)
	if err != nil {
		return responses.Internal("record", fmt.Sprintf("encode response record: %v", err))
	}
	exec.GatewayRecord = b
	return nil
}

// carried is the record req carries for response id of turn (conv, turn),
// or nil: none, or one that names another response (a request that did
// not come from this gateway's create).
func carried(req *contracts.AgentExecuteRequest, id, conv, turn string) *responses.Meta {
	if req == nil || len(req.GatewayRecord) == 0 {
		return nil
	}
	var m responses.Meta
	if json.Unmarshal(req.GatewayRecord, &m) != nil || m.ID != id || m.ConversationID != conv || m.TurnID != turn {
		return nil
	}
	return &m
}

// lookup is response id's record: the written one, or the one its turn's
// events carry; nil when there is none (never created, deleted, store
// false, or its events are past retention).
func (a *App) lookup(ctx context.Context, id string) (*responses.Meta, error) {
	m, written, err := a.store.get(ctx, id)
	if err != nil || written {
		return m, err
	}
	turn := turnOf(id)
	if turn == "" {
		return nil, nil
	}
	return a.derive(ctx, id, firstConversation(turn), turn)
}

// lookupIn is lookup for a caller that knows the response's conversation
// and turn (a completion, a deadline): the record the turn's events carry
// stands in for a written one that is missing.
func (a *App) lookupIn(ctx context.Context, id, conv, turn string) (*responses.Meta, error) {
	m, written, err := a.store.get(ctx, id)
	if err != nil || written {
		return m, err
	}
	return a.derive(ctx, id, conv, turn)
}

// derive reads response id's record from the events of its turn.
func (a *App) derive(ctx context.Context, id, conv, turn string) (*responses.Meta, error) {
	req, err := a.request(ctx, conv, turn)
	if err != nil {
		return nil, err
	}
	return carried(req, id, conv, turn), nil
}

// request is the request of turn (conv, turn) as its events carry it: its
// entry into the history (the first event past the queue, stored by the
// gateway at the entry point the turn took, layout.Entries, or by the
// retriever), or the request still in the admission queue, or, when
// neither is there, the latest event (the retriever took the request
// meanwhile, storing retrieved before it let the request go; or the entry
// is past retention while later events remain). Nil when the turn has no
// event.
func (a *App) request(ctx context.Context, conv, turn string) (*contracts.AgentExecuteRequest, error) {
	for _, st := range layout.Entries()[1:] {
		var t contracts.Turn
		found, err := a.lastEvent(ctx, a.stream, contracts.Subject(st, conv, turn), &t, st+" event of "+turn)
		if err != nil {
			return nil, err
		}
		if found {
			return &t.Request, nil
		}
	}
	if a.queue != nil {
		var r contracts.AgentExecuteRequest
		found, err := a.lastEvent(ctx, a.queue, contracts.Subject(contracts.StageRequested, conv, turn), &r, "queued request of "+turn)
		if err != nil {
			return nil, err
		}
		if found {
			return &r, nil
		}
	}
	_, t, _, err := a.turnAt(ctx, conv, turn)
	if t == nil {
		return nil, err
	}
	return &t.Request, nil
}

// lastEvent decodes into v the last message on subject in s, its body
// fetched when claim-checked; found is false when there is none. what
// names it in errors.
func (a *App) lastEvent(ctx context.Context, s jetstream.Stream, subject string, v any, what string) (found bool, err error) {
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", what, err)
	}
	data, err := claim.EventData(ctx, a.js, m.Header, m.Data)
	if err != nil {
		return false, err
	}
	if err := jsonv2.Unmarshal(data, v, jsonCodec); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return true, nil
}

// writeRecord starts writing meta's record to the bucket and returns the
// wait for it: the write runs while the turn is submitted.
func (a *App) writeRecord(ctx context.Context, meta responses.Meta) func() error {
	done := make(chan error, 1)
	go func() { done <- a.putRecord(ctx, meta) }()
	var err error
	waited := false
	return func() error {
		if !waited {
			err, waited = <-done, true
		}
		return err
	}
}

// putRecord writes a record (Store.Put; tests replace it to fail).
func (a *App) putRecord(ctx context.Context, meta responses.Meta) error {
	if a.putHook != nil {
		return a.putHook(ctx, meta)
	}
	return a.store.Put(ctx, meta)
}

// recordRetries bound the writes of a record whose first write failed
// after its turn was stored, and recordRetryDelay spaces them.
const (
	recordRetries    = 3
	recordRetryDelay = 100 * time.Millisecond
)

// recordAfterSubmit waits for meta's record, which was written while its
// turn was submitted, before the caller answers with the id. A write that
// failed is made again (a few times, the turn is stored: its answer is
// worth the wait); one that still fails cancels the turn, so no model
// call runs for a response nobody can read, and the create answers the
// error. The turn's events carry the record even then, so its completion
// still reads as cancelled and its webhook (if any) says so.
func (a *App) recordAfterSubmit(ctx context.Context, meta *responses.Meta, recorded func() error) *responses.Error {
	err := recorded()
	for i := 0; err != nil && i < recordRetries; i++ {
		time.Sleep(recordRetryDelay)
		err = a.putRecord(ctx, *meta)
	}
	if err == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, cerr := a.cancels.Cancel(cctx, meta.ConversationID, meta.TurnID); cerr != nil {
		a.log.Warn("a response whose record could not be written runs on uncancelled", "response", meta.ID, "err", cerr)
	}
	a.withdraw(ctx, meta, true)
	return a.BusError(err)
}

// completionRecord is response id's record for the webhook consumer,
// which holds the turn's completion m: the written record, or the one the
// completion carries (no read) when its id names its conversation. A
// response whose record was neither written nor derivable by id has
// nobody who knows its id (recordAfterSubmit cancelled it): nil.
func (a *App) completionRecord(ctx context.Context, id, conv, turn string, m jetstream.Msg) (*responses.Meta, error) {
	meta, written, err := a.store.get(ctx, id)
	if err != nil || written || conv != firstConversation(turn) {
		return meta, err
	}
	data, err := claim.EventData(ctx, a.js, m.Headers(), m.Data())
	if err != nil {
		return nil, fmt.Errorf("read completion of %s: %w", turn, err)
	}
	var doc struct {
		Request struct {
			GatewayRecord json.RawMessage `json:"gatewayRecord"`
		} `json:"request"`
	}
	if err := jsonv2.Unmarshal(data, &doc, jsonCodec); err != nil {
		return nil, fmt.Errorf("decode completion of %s: %w", turn, err)
	}
	return carried(&contracts.AgentExecuteRequest{GatewayRecord: doc.Request.GatewayRecord}, id, conv, turn), nil
}
