package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	json "github.com/go-json-experiment/json/v1"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/sealbox"
	"strconv"
	"strings"
	"time"
)

// compactPrefix marks the sandbox's compaction blobs: like OpenAI's they are
// encrypted and authenticated (pkg/sealbox, Options.CompactionKeys), so a
// client can neither read what the user said from one nor alter it.
const compactPrefix = "sbxc2."

// compacted is what a compaction item carries: enough for the sandbox to
// show, deterministically, that a later request saw the compacted history.
type compacted struct {
	// Items is how many conversation items were compacted.
	Items int `json:"items"`
	// Users is the first line of each user message, in order.
	Users []string `json:"users"`
}

func (s *Server) encodeCompaction(c compacted) string {
	b, _ := json.Marshal(c)
	return s.keys.Seal(compactPrefix, b)
}

func (s *Server) decodeCompaction(blob string) (compacted, error) {
	var c compacted
	b, err := s.keys.Open(compactPrefix, blob)
	switch {
	case errors.Is(err, sealbox.ErrUnknownKey):
		return c, errors.New("the compaction was sealed with a key this server does not hold")
	case err != nil:
		return c, errors.New("not a compaction produced by this server, or altered")
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode compaction: %w", err)
	}
	return c, nil
}

// openCompactions refuses, with OpenAI's 400, an input compaction item
// that does not open: altered, or sealed by another server's key.
func (s *Server) openCompactions(items []entry) error {
	for i, e := range items {
		if e.it.Type != "compaction" {
			continue
		}
		if _, err := s.decodeCompaction(e.it.EncryptedContent); err != nil {
			param := fmt.Sprintf("input[%d].encrypted_content", i)
			return invalid(param, "invalid_encrypted_content", fmt.Sprintf("Invalid '%s': %v", param, err))
		}
	}
	return nil
}

// compactRequest is the body of POST /v1/responses/compact.
type compactRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Instructions       json.RawMessage `json:"instructions"`
}

// compactResource is the response.compaction object.
type compactResource struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Output    []any  `json:"output"`
	Usage     *usage `json:"usage"`
}

type compactionItem struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	EncryptedContent string `json:"encrypted_content"`
}

// userMessage is a user message as an output item of a compaction: the
// schema's Message needs an id and a status.
type userMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []part `json:"content"`
}

// compact serves POST /v1/responses/compact the way OpenAI does: the user
// messages are kept, everything else becomes one opaque compaction item that
// the next /v1/responses request passes back as an input item.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	body, _, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer s.end()
	res, err := s.compaction(body)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) compaction(body []byte) (compactResource, error) {
	var req compactRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return compactResource{}, invalid("", "", fmt.Sprintf("We could not parse the JSON body of your request. Sandbox detail: %v", err))
	}
	if req.Model == "" {
		return compactResource{}, invalid("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	var chain []entry
	if req.PreviousResponseID != "" {
		st, ok := s.lookup(req.PreviousResponseID)
		if !ok {
			return compactResource{}, invalid("previous_response_id", "previous_response_not_found",
				fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID))
		}
		chain = decodeEntries(st.items)
	}
	if in := bytes.TrimSpace(req.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
		items, err := parseInput(in)
		if err == nil {
			err = s.openCompactions(items)
		}
		if err != nil {
			return compactResource{}, err
		}
		chain = append(chain, items...)
	}
	if len(chain) == 0 {
		return compactResource{}, invalid("input", "missing_required_parameter", "Nothing to compact: give 'input' or 'previous_response_id'.")
	}
	res := compactResource{ID: newID("resp_"), Object: "response.compaction", CreatedAt: time.Now().Unix()}
	c := s.fold(chain)
	inBytes := 0
	for _, e := range chain {
		inBytes += len(e.raw)
		it := e.it
		if it.Type == "compaction" || it.Role != "user" || (it.Type != "" && it.Type != "message") {
			continue
		}
		texts := it.texts()
		parts := make([]part, 0, len(texts))
		for _, t := range texts {
			parts = append(parts, part{Type: "input_text", Text: t})
		}
		res.Output = append(res.Output, userMessage{ID: stableID("msg_", e.raw), Type: "message", Status: "completed", Role: "user", Content: parts})
	}
	blob := s.encodeCompaction(c)
	res.Output = append(res.Output, compactionItem{ID: stableID("cmp_", []byte(blob)), Type: "compaction", EncryptedContent: blob})
	in := tokenCount(inBytes)
	res.Usage = newUsage(in, tokens(blob))
	return res, nil
}

// fold is what a compaction of chain carries: every item counted, the
// first line of each user message, an earlier compaction's content folded
// in so nothing it held is lost.
func (s *Server) fold(chain []entry) compacted {
	c := compacted{Users: []string{}}
	for _, e := range chain {
		it := e.it // read as far as it decoded, as readTurn does
		if it.Type == "compaction" {
			prev, _ := s.decodeCompaction(it.EncryptedContent)
			c.Items += prev.Items
			c.Users = append(c.Users, prev.Users...)
			continue
		}
		c.Items++
		if it.Role == "user" && (it.Type == "" || it.Type == "message") {
			c.Users = append(c.Users, firstLine(it.texts()))
		}
	}
	return c
}

// compactInline is context_management's compaction: the chain, past the
// threshold, becomes one compaction item, which leads the response's
// output and is all a continuation of it sees of what came before.
func (s *Server) compactInline(chain []entry) (compactionItem, entry) {
	blob := s.encodeCompaction(s.fold(chain))
	item := compactionItem{ID: stableID("cmp_", []byte(blob)), Type: "compaction", EncryptedContent: blob}
	b, _ := json.Marshal(item)
	return item, decodeEntry(b)
}

// stableID derives an item id from its content, so compacting the same
// conversation twice gives the same items.
func stableID(prefix string, b []byte) string {
	h := sha256.Sum256(b)
	return prefix + hex.EncodeToString(h[:16])
}

func firstLine(texts []string) string {
	for _, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			if l := strings.TrimSpace(line); l != "" {
				return l
			}
		}
	}
	return ""
}

// compactionNote is the reply's sentence proving the compacted history
// arrived: how many items it held and the first user message in it.
func (s *Server) compactionNote(chain []entry) string {
	var b strings.Builder
	for _, e := range chain {
		it := e.it
		if e.err != nil || it.Type != "compaction" {
			continue
		}
		c, err := s.decodeCompaction(it.EncryptedContent)
		if err != nil {
			continue
		}
		first := ""
		if len(c.Users) > 0 {
			first = c.Users[0]
		}
		fmt.Fprintf(&b, " Compacted history: %d item(s), first user message %s.", c.Items, strconv.Quote(first))
	}
	return b.String()
}
