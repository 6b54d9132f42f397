package application

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/services/gateway/auth"
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
func (a *App) lookupConversation(ctx context.Context, who, id string) (*responses.Conversation, *responses.Error) {
	if !responses.IsConversationID(id) {
		return nil, responses.ConversationNotFound(id)
	}
	c, _, err := a.store.GetConversation(ctx, id)
	if err != nil {
		return nil, a.BusError(err)
	}
	if c == nil || c.Owner != who {
		return nil, responses.ConversationNotFound(id)
	}
	return c, nil
}

// objectHistory is what a create in conversation object id sends ahead of
// its input: the object's items, settled, as the model is shown them. The
// caller's own object only; any other is 404. A create and a token count
// of one read it here, so the count is of what the create sends.
func (a *App) objectHistory(ctx context.Context, who, id string) (*responses.Conversation, []json.RawMessage, *responses.Error) {
	c, e := a.lookupConversation(ctx, who, id)
	if e != nil {
		return nil, nil, e
	}
	c, err := a.settle(ctx, c)
	if err != nil {
		return nil, nil, a.convError(id, err)
	}
	return c, responses.ContextItems(c.Items()), nil
}

// settle fills in the output of the conversation's responses that have
// ended since it was written (one status read per response still pending).
func (a *App) settle(ctx context.Context, c *responses.Conversation) (*responses.Conversation, error) {
	if len(c.Pending()) == 0 {
		return c, nil
	}
	settled, err := a.store.UpdateConversation(ctx, c.ID, func(c *responses.Conversation) (bool, error) {
		return a.settleEntries(ctx, c)
	})
	if errors.Is(err, errConvFull) {
		// The output is listed, but not kept: the conversation is full, and
		// takes nothing more (every update settles first, and fails).
		a.log.Warn("conversation full: a response's output is not kept in it", "conversation", c.ID, "err", err)
		return settled, nil
	}
	return settled, err
}

// settleEntries settles c in memory; changed reports whether it did.
func (a *App) settleEntries(ctx context.Context, c *responses.Conversation) (changed bool, err error) {
	for _, m := range c.Pending() {
		resp, err := a.current(ctx, m)
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
func (a *App) add(ctx context.Context, id string, items []json.RawMessage, change func(*responses.Conversation)) error {
	_, err := a.store.UpdateConversation(ctx, id, func(c *responses.Conversation) (bool, error) {
		if _, err := a.settleEntries(ctx, c); err != nil {
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
func (a *App) convError(id string, err error) *responses.Error {
	var dup *errDuplicateItem
	switch {
	case errors.As(err, &dup):
		return responses.DuplicateItem(dup.id)
	case errors.Is(err, errConvGone):
		return responses.ConversationNotFound(id)
	case errors.Is(err, errConvFull):
		return responses.ConversationFull(id, a.cfg.NC.MaxPayload())
	case errors.Is(err, errConvBusy):
		return responses.Unavailable(fmt.Sprintf("Conversation '%s' is being changed by many requests at once; retry.", id))
	}
	return a.BusError(err)
}

// withdraw takes a response whose turn was never submitted back out of
// its conversation object (and its record out of the store when kept):
// the conversation does not keep input nobody answers.
func (a *App) withdraw(ctx context.Context, meta *responses.Meta, stored bool) {
	if stored {
		_ = a.store.Delete(ctx, meta.ID)
	}
	if !a.inObject(meta) {
		return
	}
	if _, err := a.store.UpdateConversation(ctx, meta.ConversationID, func(c *responses.Conversation) (bool, error) {
		return c.Withdraw(meta.ID), nil
	}); err != nil && !errors.Is(err, errConvGone) {
		a.log.Warn("a response that never ran stays in its conversation", "conversation", meta.ConversationID, "response", meta.ID, "err", err)
	}
}

// inObject reports whether meta's response was created in a conversation
// object (its turn runs in the Aptix conversation of the same id).
func (a *App) inObject(meta *responses.Meta) bool {
	return responses.IsConversationID(meta.ConversationID) && meta.ConversationID == meta.NamedConversation
}

// settleAfter settles the conversation of a response the gateway saw end,
// so the next response in it sees the output without a status read.
func (a *App) settleAfter(ctx context.Context, meta *responses.Meta) {
	if !a.inObject(meta) {
		return
	}
	c, _, err := a.store.GetConversation(ctx, meta.ConversationID)
	if err == nil && c != nil {
		_, err = a.settle(ctx, c)
	}
	if err != nil && !errors.Is(err, errConvGone) {
		a.log.Warn("conversation not settled; its next read settles it", "conversation", meta.ConversationID, "response", meta.ID, "err", err)
	}
}

// NewItemKey is the key a client's own new items derive their ids from
// (responses.ParseConversationCreate, responses.ParseItemsAppend).
func NewItemKey() string { return freshKey() }

// CreateConversation stores a new conversation object of the caller's,
// with its first items.
func (a *App) CreateConversation(ctx context.Context, who auth.Principal, items []json.RawMessage, md map[string]string) (*responses.Conversation, *responses.Error) {
	c := &responses.Conversation{ID: newConversationObjectID(), CreatedAt: a.cfg.Now().Unix(), Metadata: md, Owner: who.ID}
	c.Append(items)
	if err := a.store.CreateConversation(ctx, c); err != nil {
		return nil, a.BusError(err)
	}
	return c, nil
}

// Conversation is the caller's conversation object id, or the 404 (or
// 503) answering for it; settled, with the output of its responses that
// have ended since filled in.
func (a *App) Conversation(ctx context.Context, who auth.Principal, id string, settled bool) (*responses.Conversation, *responses.Error) {
	c, e := a.lookupConversation(ctx, who.ID, id)
	if e != nil || !settled {
		return c, e
	}
	sc, err := a.settle(ctx, c)
	if err != nil {
		return nil, a.convError(c.ID, err)
	}
	return sc, nil
}

// SetConversationMetadata replaces the metadata of c (a conversation the
// caller read with Conversation).
func (a *App) SetConversationMetadata(ctx context.Context, c *responses.Conversation, md map[string]string) (*responses.Conversation, *responses.Error) {
	id := c.ID
	c, err := a.store.UpdateConversation(ctx, id, func(c *responses.Conversation) (bool, error) {
		c.Metadata = md
		return true, nil
	})
	if err != nil {
		return nil, a.convError(id, err)
	}
	return c, nil
}

// DeleteConversation removes c (read with Conversation). Its responses
// and their turns stay.
func (a *App) DeleteConversation(ctx context.Context, c *responses.Conversation) *responses.Error {
	if err := a.store.DeleteConversation(ctx, c.ID); err != nil {
		return a.BusError(err)
	}
	return nil
}

// AppendItems adds the client's items to c (read with Conversation),
// after every output that is in; an item whose id c already has is
// refused.
func (a *App) AppendItems(ctx context.Context, c *responses.Conversation, items []json.RawMessage) *responses.Error {
	if err := a.add(ctx, c.ID, items, func(c *responses.Conversation) { c.Append(items) }); err != nil {
		return a.convError(c.ID, err)
	}
	return nil
}

// DeleteItem removes item itemID from c (read with Conversation) and
// returns the conversation as written.
func (a *App) DeleteItem(ctx context.Context, c *responses.Conversation, itemID string) (*responses.Conversation, *responses.Error) {
	id := c.ID
	found := false
	c, err := a.store.UpdateConversation(ctx, id, func(c *responses.Conversation) (bool, error) {
		found = c.Remove(itemID)
		return found, nil
	})
	if err != nil {
		return nil, a.convError(id, err)
	}
	if !found {
		return nil, responses.ItemNotFound(c.ID, itemID)
	}
	return c, nil
}
