package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// execute is POST /v1/aptix/execute: the seed's own shapes without NATS. An
// AgentExecuteRequest in (application.Execute), the AgentExecuteResponse
// out; with ?stream=true, SSE `delta` events (the LLM caller's deltas as
// they are) then one `response` event.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.fail(w, e)
		return
	}
	var req contracts.AgentExecuteRequest
	if err := json.Unmarshal(data, &req); err != nil {
		_, pe := responses.Parse(data) // the same position-naming message as /v1/responses
		if pe == nil {
			pe = responses.BadRequest("", responses.CodeInvalidJSON, err.Error())
		}
		s.fail(w, pe)
		return
	}
	stream := r.URL.Query().Get("stream") == "true"
	x, e := s.app.Execute(r.Context(), auth.From(r.Context()), req, stream)
	if e != nil {
		s.fail(w, e)
		return
	}
	defer x.Close()
	if !stream {
		resp, backend, e := s.app.ExecutionResult(x)
		if e != nil {
			s.fail(w, e)
			return
		}
		setBackend(w, backend)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	fl := beginSSE(w)
	send := func(event string, data []byte) {
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
		if fl != nil {
			fl.Flush()
		}
	}
	t, ended := s.app.FollowExecution(r.Context(), x, func(d []byte) { send("delta", d) })
	switch {
	case !ended:
	case t == nil:
		send("error", []byte(`{"error":{"message":"no completion in time","type":"server_error","param":null,"code":"timeout"}}`))
	default:
		b, _ := json.Marshal(t.Response)
		send("response", b)
	}
}
