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
// while Aptix's conversation record still names it. Every turn therefore
// also keeps its own items (input sent, output received) in the history
// store, linked to the response it continued from, so that when the backend
// answers previous_response_not_found the caller can send the whole
// conversation as input instead, once, and say so in the turn's warnings.

// linkType marks the first item of a kept record: the response the record's
// turn continued from, whose own record holds the earlier items.
const linkType = "aptix_previous_response"

type link struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// maxChain bounds how many linked records recovery follows (a conversation
// of more turns than this is recovered from its last maxChain turns only
// when the older records have expired; otherwise it is an error).
const maxChain = 1000

// keep stores this turn's items under its response id, linked to the
// response it continued from.
func (t *turn) keep(ctx context.Context, sent body, respBody string) {
	s, ok := summarize(respBody)
	if !ok || s.ID == "" {
		return
	}
	record, err := sent.keptItems(s.Output)
	if err != nil {
		return
	}
	// Written beside the pay-once result, not before it: Call waits for
	// both before it returns (the object store put is several round trips,
	// which the benchmark's profile showed in series with the result's).
	done := make(chan struct{})
	t.kept = done
	go func() {
		defer close(done)
		if err := putRecord(context.WithoutCancel(ctx), t.c.o.History, s.ID, record); err != nil {
			t.log.Warn("keeping conversation history failed; this conversation cannot be recovered if the backend loses it", "response", s.ID, "err", err)
		}
	}()
}

// loadChain returns every item of the conversation up to and including
// response id, following the links the records carry.
func loadChain(ctx context.Context, hs HistoryStore, id string) ([]json.RawMessage, error) {
	var records [][]json.RawMessage
	for n := 0; id != ""; n++ {
		if n == maxChain {
			return nil, fmt.Errorf("%w: the conversation is longer than %d kept turns", errHistoryMissing, maxChain)
		}
		items, err := hs.Get(ctx, id)
		if errors.Is(err, ErrHistoryNotFound) {
			return nil, fmt.Errorf("%w: no kept items for response %q", errHistoryMissing, id)
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
	warning := fmt.Sprintf("the backend no longer has response %s, which conversation %s continued from: Aptix sent the conversation's %d kept items as input instead (previous_response_id dropped for this turn)",
		prev, conversationID, len(earlier))
	return enc, warning, nil
}

// startOver is the hint an unrecoverable continuation error carries.
func startOver(conversationID string) string {
	return fmt.Sprintf("; Aptix keeps no history to recover conversation %q from: start a new conversation (another conversation id, e.g. `aptix exec --conversation NEW …`), or send the earlier turns as input items", conversationID)
}

// rawPutter is a HistoryStore that stores an encoded record as it is.
type rawPutter interface {
	PutRaw(ctx context.Context, responseID string, record []byte) error
}

// putRecord stores an encoded record (keptItems), as it is when the store
// can take it so.
func putRecord(ctx context.Context, hs HistoryStore, responseID string, record []byte) error {
	if rp, ok := hs.(rawPutter); ok {
		return rp.PutRaw(ctx, responseID, record)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(record, &items); err != nil {
		return fmt.Errorf("decode kept record of response %s: %w", responseID, err)
	}
	return hs.Put(ctx, responseID, items)
}
