package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// record reads the response named by the path's {id}, answering the
// request itself (404, or 503 when the store is unreachable) when it cannot.
func (s *Server) record(w http.ResponseWriter, r *http.Request) (*responses.Meta, bool) {
	id := r.PathValue("id")
	if !responses.ValidPathID(id) {
		// No response has such an id, and it must not reach a key or a
		// subject (responses.CheckID).
		s.fail(w, responses.NotFoundPath(id))
		return nil, false
	}
	meta, err := s.store.Get(r.Context(), id)
	if err != nil {
		s.fail(w, s.submitError(err))
		return nil, false
	}
	if meta == nil || !owns(r.Context(), meta) {
		// Another principal's response does not exist for this caller.
		s.fail(w, responses.NotFound(id))
		return nil, false
	}
	return meta, true
}

// get is GET /v1/responses/{id}: the record from KV, the status and result
// from the turn's stored events, so any replica answers for any response.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	meta, ok := s.record(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("stream") == "true" {
		if !meta.Background {
			s.fail(w, responses.BadRequest("stream", responses.CodeInvalidValue, "Only a background response can be streamed again (create it with background: true)."))
			return
		}
		s.resume(w, r, meta)
		return
	}
	resp, err := s.current(r.Context(), meta)
	if err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// delete is DELETE /v1/responses/{id}: the record goes, so GET and
// previous_response_id answer 404/400 after it; the turn's events stay in
// the stream's history until its retention removes them.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	meta, ok := s.record(w, r)
	if !ok {
		return
	}
	// An in-flight response is cancelled first: deleting its record must
	// not leave its model call running for nobody.
	if _, err := s.cancelMeta(r.Context(), meta); err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	if err := s.store.Delete(r.Context(), meta.ID); err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": meta.ID, "object": "response.deleted", "deleted": true})
}

// inputItems is GET /v1/responses/{id}/input_items: the items the client
// sent, read from the turn's stored event (every stage's event carries the
// request), paged with limit/order/after.
func (s *Server) inputItems(w http.ResponseWriter, r *http.Request) {
	meta, ok := s.record(w, r)
	if !ok {
		return
	}
	_, t, _, err := s.turnAt(r.Context(), meta.ConversationID, meta.TurnID)
	if err != nil {
		s.fail(w, s.submitError(err))
		return
	}
	var items []json.RawMessage
	if t != nil && t.Request.OpenAI != nil {
		_ = json.Unmarshal(t.Request.OpenAI.Input, &items)
	}
	// A response in a conversation object was sent the conversation's items
	// first; its input items are its own.
	items = items[min(meta.HistoryItems, len(items)):]
	q := r.URL.Query()
	// A compaction item the turn opened is listed sealed again.
	items = responses.SealCompactions(meta.ID, items, s.cfg.CompactionKeys, meta.Owner)
	list, e := responses.Page(responses.InputItems(meta.ID, items), q.Get("limit"), q.Get("order"), q.Get("after"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, list)
}
