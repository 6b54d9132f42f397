package application

import (
	"context"
	"encoding/json"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// Record is the caller's response id: its record, or the 404 answering
// for it (another principal's response does not exist for this one), or
// the 503 when the store is unreachable.
func (a *App) Record(ctx context.Context, who auth.Principal, id string) (*responses.Meta, *responses.Error) {
	if !responses.ValidPathID(id) {
		// No response has such an id, and it must not reach a key or a
		// subject (responses.CheckID).
		return nil, responses.NotFoundPath(id)
	}
	meta, err := a.lookup(ctx, id)
	if err != nil {
		return nil, a.BusError(err)
	}
	if meta == nil || meta.Owner != who.ID {
		// Only the principal that created a response reads, cancels,
		// deletes, resumes or continues it: for anyone else it does not
		// exist (404, never 403).
		return nil, responses.NotFound(id)
	}
	return meta, nil
}

// Get is the caller's response id as of now: the record from KV, the
// status and result from the turn's stored events, so any replica answers
// for any response.
func (a *App) Get(ctx context.Context, who auth.Principal, id string) (responses.Response, *responses.Error) {
	meta, e := a.Record(ctx, who, id)
	if e != nil {
		return responses.Response{}, e
	}
	return a.Current(ctx, meta)
}

// Current is meta's response as of now.
func (a *App) Current(ctx context.Context, meta *responses.Meta) (responses.Response, *responses.Error) {
	resp, err := a.current(ctx, meta)
	if err != nil {
		return resp, a.BusError(err)
	}
	return resp, nil
}

// Queued is a background response just submitted: status queued.
func Queued(meta *responses.Meta) responses.Response {
	return responses.Current(*meta, responses.State{})
}

// Cancel cancels the caller's response id: a queued response is cancelled
// and never reaches the model; an in-progress one has its model call
// aborted (the LLM caller watches the cancel records); a terminal one is
// returned unchanged. The cancel is a KV record, so every replica, the LLM
// caller and a redelivery all see it, and a completion that comes later
// never overwrites it.
func (a *App) Cancel(ctx context.Context, who auth.Principal, id string) (responses.Response, *responses.Error) {
	meta, e := a.Record(ctx, who, id)
	if e != nil {
		return responses.Response{}, e
	}
	resp, err := a.cancelMeta(ctx, meta)
	if err != nil {
		return resp, a.BusError(err)
	}
	return resp, nil
}

// Deleted is the answer of a delete.
// Its fields are in the order encoding/json wrote the map it replaces.
type Deleted struct {
	Deleted bool   `json:"deleted"`
	ID      string `json:"id"`
	Object  string `json:"object"`
}

// Delete removes the caller's response id: the record goes, so Get and
// previous_response_id answer 404/400 after it; the turn's events stay in
// the stream's history until its retention removes them. An in-flight
// response is cancelled first: deleting its record must not leave its
// model call running for nobody.
func (a *App) Delete(ctx context.Context, who auth.Principal, id string) (Deleted, *responses.Error) {
	meta, e := a.Record(ctx, who, id)
	if e != nil {
		return Deleted{}, e
	}
	if _, err := a.cancelMeta(ctx, meta); err != nil {
		return Deleted{}, a.BusError(err)
	}
	if err := a.store.Delete(ctx, meta.ID); err != nil {
		return Deleted{}, a.BusError(err)
	}
	return Deleted{ID: meta.ID, Object: "response.deleted", Deleted: true}, nil
}

// Page selects a page of a list: limit, order (asc or desc) and after (an
// item id), as the client sent them.
type Page struct{ Limit, Order, After string }

// InputItems are the items the client sent with the caller's response id,
// read from the turn's stored event (every stage's event carries the
// request) or its request still queued, paged.
func (a *App) InputItems(ctx context.Context, who auth.Principal, id string, pg Page) (responses.List, *responses.Error) {
	var list responses.List
	meta, e := a.Record(ctx, who, id)
	if e != nil {
		return list, e
	}
	// The request as the turn's events carry it (still queued, too).
	req, err := a.request(ctx, meta.ConversationID, meta.TurnID)
	if err != nil {
		return list, a.BusError(err)
	}
	var items []json.RawMessage
	if req != nil && req.OpenAI != nil {
		_ = json.Unmarshal(req.OpenAI.Input, &items)
	}
	// A response in a conversation object was sent the conversation's items
	// first; its input items are its own.
	items = items[min(meta.HistoryItems, len(items)):]
	// A compaction item the turn opened is listed sealed again.
	items = responses.SealCompactions(meta.ID, items, a.cfg.CompactionKeys, meta.Owner)
	return responses.Page(responses.InputItems(meta.ID, items), pg.Limit, pg.Order, pg.After)
}
