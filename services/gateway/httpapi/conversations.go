package httpapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// OpenAI's Conversations API (docs/http-api.md#conversations). A
// conversation object is one record in the gateway's bucket, key
// "conv.<id>", written with compare-and-set on its revision so replicas
// appending at once never lose an item. A response created with the
// conversation adds its input items when its turn is submitted and keeps a
// place for its output, which is filled in (settled) once the turn is
// terminal: right after a create that waited for it, or by the next read
// of the items, so a background response or a gateway that went away in
// between loses nothing.

func convKey(id string) string { return "conv." + id }

// newConversationObjectID is a conversation object's id: conv_ and a
// UUIDv7 in hex (a subject token, sortable by creation).
func newConversationObjectID() string {
	u := uuid.Must(uuid.NewV7())
	return responses.ConversationPrefix + hex.EncodeToString(u[:])
}

// freshKey is the key a client's own items derive their ids from.
func freshKey() string {
	u := uuid.Must(uuid.NewV7())
	return "resp_" + hex.EncodeToString(u[:])
}

// errConvGone is a conversation deleted while it was being updated.
var errConvGone = errors.New("conversation deleted")

// errConvFull is a conversation whose record would be larger than one
// NATS message, the most a KV value holds: it takes no more items.
var errConvFull = errors.New("conversation record over the NATS message size")

// CreateConversation stores a new conversation.
func (s *Store) CreateConversation(ctx context.Context, c *responses.Conversation) error {
	if err := checkToken("conversation", c.ID); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode conversation: %w", err)
	}
	if _, err := s.kv.Create(ctx, convKey(c.ID), b); err != nil {
		return fmt.Errorf("record conversation %s: %w", c.ID, err)
	}
	return nil
}

// GetConversation returns the conversation and its revision, or nil when
// there is none.
func (s *Store) GetConversation(ctx context.Context, id string) (*responses.Conversation, uint64, error) {
	if !responses.IsConversationID(id) {
		return nil, 0, nil // no conversation has it
	}
	e, err := s.kv.Get(ctx, convKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read conversation %s: %w", id, err)
	}
	var c responses.Conversation
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, 0, fmt.Errorf("decode conversation %s: %w", id, err)
	}
	return &c, e.Revision(), nil
}

// errConvBusy is a conversation that kept changing under an update for
// convUpdateBudget: a 503 the client retries.
var errConvBusy = errors.New("conversation busy")

// convUpdateBudget bounds how long an update retries against concurrent
// writers of the same conversation.
const convUpdateBudget = 5 * time.Second

// UpdateConversation applies change to the conversation and writes it if
// change reports it changed something, at the revision it read; a
// concurrent writer makes it wait a moment (random, growing) and read and
// apply again, for up to convUpdateBudget. It returns the conversation as
// written (or as read, when unchanged); errConvGone when it no longer
// exists.
func (s *Store) UpdateConversation(ctx context.Context, id string, change func(*responses.Conversation) (bool, error)) (*responses.Conversation, error) {
	deadline := time.Now().Add(convUpdateBudget)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("write conversation %s: %d attempts: %w", id, attempt, errConvBusy)
			}
			wait := time.Duration(rand.Int64N(int64(min(attempt, 20)) * int64(time.Millisecond) * 2))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		c, rev, err := s.GetConversation(ctx, id)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, errConvGone
		}
		changed, err := change(c)
		if err != nil || !changed {
			return c, err
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encode conversation: %w", err)
		}
		_, err = s.kv.Update(ctx, convKey(id), b, rev)
		if err == nil {
			return c, nil
		}
		var apiErr *jetstream.APIError
		if errors.Is(err, nats.ErrMaxPayload) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
			return c, fmt.Errorf("write conversation %s (%d bytes): %w", id, len(b), errConvFull)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !(errors.As(err, &apiErr) &&
			(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
			return nil, fmt.Errorf("write conversation %s: %w", id, err)
		}
	}
}

// DeleteConversation removes the conversation. Its responses and their
// turns stay.
func (s *Store) DeleteConversation(ctx context.Context, id string) error {
	if err := checkToken("conversation", id); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, convKey(id)); err != nil {
		return fmt.Errorf("delete conversation %s: %w", id, err)
	}
	return nil
}

// lookupConversation is the caller's conversation id, or the 404 answering
// for it: an id that cannot be one is not looked up, and another
// principal's does not exist for this one.
func (s *Server) lookupConversation(ctx context.Context, id string) (*responses.Conversation, *responses.Error) {
	if !responses.IsConversationID(id) {
		return nil, responses.ConversationNotFound(id)
	}
	c, _, err := s.store.GetConversation(ctx, id)
	if err != nil {
		return nil, s.submitError(err)
	}
	if c == nil || c.Owner != principal(ctx) {
		return nil, responses.ConversationNotFound(id)
	}
	return c, nil
}

// objectHistory is what a create in conversation object id sends ahead of
// its input: the object's items, settled, as the model is shown them. The
// caller's own object only; any other is 404. A create and a token count
// of one read it here, so the count is of what the create sends.
func (s *Server) objectHistory(ctx context.Context, id string) (*responses.Conversation, []json.RawMessage, *responses.Error) {
	c, e := s.lookupConversation(ctx, id)
	if e != nil {
		return nil, nil, e
	}
	c, err := s.settle(ctx, c)
	if err != nil {
		return nil, nil, s.convError(id, err)
	}
	return c, responses.ContextItems(c.Items()), nil
}

// settle fills in the output of the conversation's responses that have
// ended since it was written (one status read per response still pending).
func (s *Server) settle(ctx context.Context, c *responses.Conversation) (*responses.Conversation, error) {
	if len(c.Pending()) == 0 {
		return c, nil
	}
	settled, err := s.store.UpdateConversation(ctx, c.ID, func(c *responses.Conversation) (bool, error) {
		return s.settleEntries(ctx, c)
	})
	if errors.Is(err, errConvFull) {
		// The output is listed, but not kept: the conversation is full, and
		// takes nothing more (every update settles first, and fails).
		s.log.Warn("conversation full: a response's output is not kept in it", "conversation", c.ID, "err", err)
		return settled, nil
	}
	return settled, err
}

// settleEntries settles c in memory; changed reports whether it did.
func (s *Server) settleEntries(ctx context.Context, c *responses.Conversation) (changed bool, err error) {
	for _, m := range c.Pending() {
		resp, err := s.current(ctx, m)
		if err != nil {
			return false, err
		}
		if !responses.Terminal(resp.Status) {
			continue
		}
		// Output items carry the upstream's ids; one without gets an id of
		// its own, apart from the response's input items.
		c.Settle(m.ID, responses.InputItems(m.ID+"o", resp.Output))
		changed = true
	}
	return changed, nil
}

// add applies an addition to the conversation, settled first, so what is
// added goes after every output that is in, and a conversation too full to
// keep an output takes nothing more.
//
// items are the client's new items: one whose id the conversation already
// has is refused (errDuplicateItem) in the same compare-and-set as the
// addition, so two requests racing with one id cannot both add it.
func (s *Server) add(ctx context.Context, id string, items []json.RawMessage, change func(*responses.Conversation)) error {
	_, err := s.store.UpdateConversation(ctx, id, func(c *responses.Conversation) (bool, error) {
		if _, err := s.settleEntries(ctx, c); err != nil {
			return false, err
		}
		if taken := c.TakenID(items); taken != "" {
			return false, &errDuplicateItem{id: taken}
		}
		change(c)
		return true, nil
	})
	return err
}

// errDuplicateItem refuses an item whose id its conversation already has.
type errDuplicateItem struct{ id string }

func (e *errDuplicateItem) Error() string { return "duplicate item id " + e.id }

// convError is the answer for a conversation that could not be updated.
func (s *Server) convError(id string, err error) *responses.Error {
	var dup *errDuplicateItem
	switch {
	case errors.As(err, &dup):
		return responses.DuplicateItem(dup.id)
	case errors.Is(err, errConvGone):
		return responses.ConversationNotFound(id)
	case errors.Is(err, errConvFull):
		return responses.ConversationFull(id, s.cfg.NC.MaxPayload())
	case errors.Is(err, errConvBusy):
		return responses.Unavailable(fmt.Sprintf("Conversation '%s' is being changed by many requests at once; retry.", id))
	}
	return s.submitError(err)
}

// withdraw takes a response whose turn was never submitted back out of
// its conversation object (and its record out of the store when kept):
// the conversation does not keep input nobody answers.
func (s *Server) withdraw(ctx context.Context, meta *responses.Meta, stored bool) {
	if stored {
		_ = s.store.Delete(ctx, meta.ID)
	}
	if !s.inObject(meta) {
		return
	}
	if _, err := s.store.UpdateConversation(ctx, meta.ConversationID, func(c *responses.Conversation) (bool, error) {
		return c.Withdraw(meta.ID), nil
	}); err != nil && !errors.Is(err, errConvGone) {
		s.log.Warn("a response that never ran stays in its conversation", "conversation", meta.ConversationID, "response", meta.ID, "err", err)
	}
}

// inObject reports whether meta's response was created in a conversation
// object (its turn runs in the Aptix conversation of the same id).
func (s *Server) inObject(meta *responses.Meta) bool {
	return responses.IsConversationID(meta.ConversationID) && meta.ConversationID == meta.NamedConversation
}

// settleAfter settles the conversation of a response the gateway saw end,
// so the next response in it sees the output without a status read.
func (s *Server) settleAfter(ctx context.Context, meta *responses.Meta) {
	if !s.inObject(meta) {
		return
	}
	c, _, err := s.store.GetConversation(ctx, meta.ConversationID)
	if err == nil && c != nil {
		_, err = s.settle(ctx, c)
	}
	if err != nil && !errors.Is(err, errConvGone) {
		s.log.Warn("conversation not settled; its next read settles it", "conversation", meta.ConversationID, "response", meta.ID, "err", err)
	}
}

// conversation reads the path's conversation for a handler, answering the
// request itself when it cannot (404, or 503 when the store is unreachable).
func (s *Server) conversation(w http.ResponseWriter, r *http.Request, settled bool) (*responses.Conversation, bool) {
	c, e := s.lookupConversation(r.Context(), r.PathValue("id"))
	if e != nil {
		s.fail(w, e)
		return nil, false
	}
	if settled {
		var err error
		id := c.ID
		if c, err = s.settle(r.Context(), c); err != nil {
			s.convFail(w, id, err)
			return nil, false
		}
	}
	return c, true
}

func (s *Server) convFail(w http.ResponseWriter, id string, err error) {
	s.fail(w, s.convError(id, err))
}

// convCreate is POST /v1/conversations.
func (s *Server) convCreate(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	items, md, e := responses.ParseConversationCreate(data, freshKey())
	if e != nil {
		s.fail(w, e)
		return
	}
	c := &responses.Conversation{ID: newConversationObjectID(), CreatedAt: s.cfg.Now().Unix(), Metadata: md, Owner: principal(r.Context())}
	c.Append(items)
	if err := s.store.CreateConversation(r.Context(), c); err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	writeJSON(w, http.StatusOK, c.Object())
}

// convGet is GET /v1/conversations/{id}.
func (s *Server) convGet(w http.ResponseWriter, r *http.Request) {
	if c, ok := s.conversation(w, r, false); ok {
		writeJSON(w, http.StatusOK, c.Object())
	}
}

// convUpdate is POST /v1/conversations/{id}: the metadata is replaced.
func (s *Server) convUpdate(w http.ResponseWriter, r *http.Request) {
	c, ok := s.conversation(w, r, false)
	if !ok {
		return
	}
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	md, e := responses.ParseConversationUpdate(data)
	if e != nil {
		s.fail(w, e)
		return
	}
	c, err := s.store.UpdateConversation(r.Context(), c.ID, func(c *responses.Conversation) (bool, error) {
		c.Metadata = md
		return true, nil
	})
	if err != nil {
		s.convFail(w, r.PathValue("id"), err)
		return
	}
	writeJSON(w, http.StatusOK, c.Object())
}

// convDelete is DELETE /v1/conversations/{id}.
func (s *Server) convDelete(w http.ResponseWriter, r *http.Request) {
	c, ok := s.conversation(w, r, false)
	if !ok {
		return
	}
	if err := s.store.DeleteConversation(r.Context(), c.ID); err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	writeJSON(w, http.StatusOK, c.Deleted())
}

// include reads the include query parameter (include[]=… as the SDKs
// send it, or include=…).
func include(r *http.Request) *responses.Error {
	q := r.URL.Query()
	return responses.CheckInclude(append(q["include"], q["include[]"]...))
}

// convItems is GET /v1/conversations/{id}/items.
func (s *Server) convItems(w http.ResponseWriter, r *http.Request) {
	if e := include(r); e != nil {
		s.fail(w, e)
		return
	}
	c, ok := s.conversation(w, r, true)
	if !ok {
		return
	}
	q := r.URL.Query()
	list, e := responses.Page(c.Items(), q.Get("limit"), q.Get("order"), q.Get("after"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// convAppend is POST /v1/conversations/{id}/items: it answers the list of
// the items added.
func (s *Server) convAppend(w http.ResponseWriter, r *http.Request) {
	if e := include(r); e != nil {
		s.fail(w, e)
		return
	}
	c, ok := s.conversation(w, r, true)
	if !ok {
		return
	}
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	items, e := responses.ParseItemsAppend(data, freshKey())
	if e != nil {
		s.fail(w, e)
		return
	}
	if err := s.add(r.Context(), c.ID, items, func(c *responses.Conversation) { c.Append(items) }); err != nil {
		s.convFail(w, c.ID, err)
		return
	}
	list, _ := responses.Page(items, "100", "asc", "")
	writeJSON(w, http.StatusOK, list)
}

// convItem is GET /v1/conversations/{id}/items/{item_id}.
func (s *Server) convItem(w http.ResponseWriter, r *http.Request) {
	if e := include(r); e != nil {
		s.fail(w, e)
		return
	}
	c, ok := s.conversation(w, r, true)
	if !ok {
		return
	}
	item, found := c.Find(r.PathValue("item_id"))
	if !found {
		s.fail(w, responses.ItemNotFound(c.ID, r.PathValue("item_id")))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(item)
}

// convItemDelete is DELETE /v1/conversations/{id}/items/{item_id}: it
// answers the conversation.
func (s *Server) convItemDelete(w http.ResponseWriter, r *http.Request) {
	c, ok := s.conversation(w, r, true)
	if !ok {
		return
	}
	itemID := r.PathValue("item_id")
	found := false
	c, err := s.store.UpdateConversation(r.Context(), c.ID, func(c *responses.Conversation) (bool, error) {
		found = c.Remove(itemID)
		return found, nil
	})
	if err != nil {
		s.convFail(w, r.PathValue("id"), err)
		return
	}
	if !found {
		s.fail(w, responses.ItemNotFound(c.ID, itemID))
		return
	}
	writeJSON(w, http.StatusOK, c.Object())
}
