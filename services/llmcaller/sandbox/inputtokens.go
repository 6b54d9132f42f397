package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// inputTokens is POST /v1/responses/input_tokens: the input tokens the
// request would be billed, counted as a create counts them (the previous
// response's chain and the input, ~4 bytes a token), without answering it.
// It is not a model call: the sandbox's request count does not move.
func (s *Server) inputTokens(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "sandbox: read request body: "+err.Error())
		return
	}
	n, err := s.countInput(body)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": n})
}

func (s *Server) countInput(body []byte) (int, error) {
	var req struct {
		Model              string          `json:"model"`
		Input              json.RawMessage `json:"input"`
		PreviousResponseID string          `json:"previous_response_id"`
		Instructions       string          `json:"instructions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, invalid("", "", fmt.Sprintf("We could not parse the JSON body of your request. Sandbox detail: %v", err))
	}
	var chain []entry
	if req.PreviousResponseID != "" {
		st, ok := s.lookup(req.PreviousResponseID)
		if !ok {
			return 0, invalid("previous_response_id", "previous_response_not_found",
				fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID))
		}
		chain = decodeEntries(st.items)
	}
	if in := bytes.TrimSpace(req.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
		items, err := parseInput(in)
		if err != nil {
			return 0, err
		}
		chain = append(chain, items...)
	}
	n := len(req.Instructions)
	for _, e := range chain {
		n += len(e.raw)
	}
	if n == 0 {
		return 0, nil
	}
	return tokenCount(n), nil
}
