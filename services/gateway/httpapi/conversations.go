package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// OpenAI's Conversations API (docs/http-api.md#conversations): the
// conversation objects are the application's (application.Conversation);
// these handlers decode, call it and encode.

// conversation reads the path's conversation for a handler, answering the
// request itself when it cannot (404, or 503 when the store is unreachable).
func (s *Server) conversation(w http.ResponseWriter, r *http.Request, settled bool) (*responses.Conversation, bool) {
	id := r.PathValue("id")
	if !responses.IsConversationID(id) {
		// Never looked up: such an id must not reach a key or a subject.
		s.fail(w, responses.ConversationNotFound(id))
		return nil, false
	}
	c, e := s.app.Conversation(r.Context(), auth.From(r.Context()), id, settled)
	if e != nil {
		s.fail(w, e)
		return nil, false
	}
	return c, true
}

// convCreate is POST /v1/conversations.
func (s *Server) convCreate(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	items, md, e := responses.ParseConversationCreate(data, application.NewItemKey())
	if e != nil {
		s.fail(w, e)
		return
	}
	c, e := s.app.CreateConversation(r.Context(), auth.From(r.Context()), items, md)
	if e != nil {
		s.fail(w, e)
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
	if c, e = s.app.SetConversationMetadata(r.Context(), c, md); e != nil {
		s.fail(w, e)
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
	if e := s.app.DeleteConversation(r.Context(), c); e != nil {
		s.fail(w, e)
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
	items, e := responses.ParseItemsAppend(data, application.NewItemKey())
	if e != nil {
		s.fail(w, e)
		return
	}
	if e := s.app.AppendItems(r.Context(), c, items); e != nil {
		s.fail(w, e)
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
	c, e := s.app.DeleteItem(r.Context(), c, r.PathValue("item_id"))
	if e != nil {
		s.fail(w, e)
		return
	}
	writeJSON(w, http.StatusOK, c.Object())
}
