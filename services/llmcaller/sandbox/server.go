// Package sandbox is Aptix's stand-in for an OpenAI-compatible /responses
// endpoint. It is a SANDBOX, not a model: it answers deterministically from
// what it received, in the shape a model would (a function call where the
// request names a tool, JSON of the requested schema, else a sentence naming
// the mode, the instruction's first line, the context chunk ids and the
// previous response; the rules are package reply's), so tests, demos,
// benchmarks and client developers can prove what reached the backend
// without a hosted model. It speaks the Responses API wire format (JSON and
// SSE, each stream ended by data: [DONE]) closely enough for openai-go to
// decode it, keeps response state for previous_response_id, does not retain
// tools, and injects faults on request (docs/sandbox.md).
package sandbox

import (
	"github.com/aptix-dev/aptix/pkg/sealbox"
	json "github.com/go-json-experiment/json/v1"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// HeaderFault is the per-request fault header, e.g. "latency=200ms,429,retry-after=1".
const HeaderFault = "X-Sandbox-Fault"

// HeaderSandbox marks every sandbox response so nobody mistakes it for a model.
const HeaderSandbox = "x-aptix-sandbox"

// Options configure a sandbox. Zero values mean "no fault".
type Options struct {
	// Latency delays every POST /v1/responses before it is answered.
	Latency time.Duration
	// Script replaces the deterministic reply text with these raw texts, in
	// order, one per request; once exhausted the deterministic reply resumes.
	Script []string
	// FailFirst fails the first N POST /v1/responses requests.
	FailFirst int
	// FailStatus is the HTTP status of those failures (default 500); 429 and
	// 503 carry Retry-After: RetryAfter.
	FailStatus int
	// FailFault, when set, is the fault spec (X-Sandbox-Fault syntax) used for
	// the first FailFirst requests instead of FailStatus, e.g. "drop".
	FailFault string
	// RetryAfter is the Retry-After value sent with 429/503 faults (default "1").
	RetryAfter string
	// Faults is a fault spec applied to every request that carries no
	// X-Sandbox-Fault header, so an unmodified client can be faulted.
	Faults string
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// StateFile, when set, keeps the responses for previous_response_id
	// across restarts (see state.go); `aptix up` puts it in its data dir.
	StateFile string
	// CompactionKeys seals the compaction items the sandbox makes and opens
	// the ones sent back; default a random key of this process (items do
	// not open after a restart). `aptix up` keeps one in its data dir.
	CompactionKeys *sealbox.Keyring
}

// keepRequests is how many recent request bodies Server keeps for tests.
const keepRequests = 32

// keepResponses bounds the responses kept for previous_response_id, oldest
// evicted first, so a long benchmark does not grow the sandbox without limit.
const keepResponses = 10000

// Server is the sandbox http.Handler.
type Server struct {
	o   Options
	log *slog.Logger
	mux *http.ServeMux
	// keys seal and open compaction items (compact.go).
	keys *sealbox.Keyring
	bg   background // background responses and the create/read counters (background.go)

	mu        sync.Mutex
	responses map[string]stored
	order     []string          // response ids, oldest first, for eviction
	itemOwner map[string]string // output item id → response id that produced it
	requests  int
	last      [][]byte
	inFlight  int
	maxFlight int
	// byInstruction counts answered requests per instruction line.
	byInstruction map[string]int
	scriptPos     int
	state         *stateFile // nil: responses are kept in memory only
}

// stored is what the sandbox keeps per response for previous_response_id:
// the response object and the conversation items up to and including it.
// Tools are deliberately not stored: OpenAI does not retain them either.
type stored struct {
	response json.RawMessage
	items    []json.RawMessage
	outIDs   []string
}

// New returns a sandbox with o applied.
func New(o Options) *Server {
	if o.FailStatus == 0 {
		o.FailStatus = http.StatusInternalServerError
	}
	if o.RetryAfter == "" {
		o.RetryAfter = "1"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CompactionKeys == nil {
		o.CompactionKeys = sealbox.Random()
	}
	s := &Server{
		o: o, log: o.Logger.With("component", "sandbox"), mux: http.NewServeMux(), keys: o.CompactionKeys,
		responses: map[string]stored{}, itemOwner: map[string]string{},
	}
	s.mux.HandleFunc("POST /v1/responses", s.create)
	s.mux.HandleFunc("POST /v1/responses/compact", s.compact)
	s.mux.HandleFunc("POST /v1/responses/input_tokens", s.inputTokens) // inputtokens.go
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)   // chat.go
	s.mux.HandleFunc("POST /v1/messages", s.messagesCreate)            // messages.go
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.messagesCountTokens)
	s.mux.HandleFunc("GET /v1/responses/{id}", s.get)
	s.mux.HandleFunc("GET /v1/_sandbox/stats", s.stats)
	s.mux.HandleFunc("POST /v1/responses/{id}/cancel", s.cancelBackground)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "", "The sandbox serves only /v1/responses, /v1/responses/compact, /v1/chat/completions and /v1/messages.")
	})
	if o.StateFile != "" {
		if err := s.openState(o.StateFile); err != nil {
			s.log.Warn("sandbox state not kept: responses live in memory only", "err", err)
		}
	}
	s.log.Info("aptix sandbox ready: a deterministic Responses API stand-in, NOT a model",
		"latency", o.Latency, "script", len(o.Script), "failFirst", o.FailFirst, "faults", o.Faults)
	return s
}

// ServeHTTP implements http.Handler and stamps every answer as a sandbox one.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderSandbox, "1")
	s.mux.ServeHTTP(w, r)
}

// Requests is the number of POST /v1/responses received, faulted or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// LastRequest is the body of the most recent POST /v1/responses (nil if none).
func (s *Server) LastRequest() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) == 0 {
		return nil
	}
	return s.last[len(s.last)-1]
}

// LastRequests returns up to the last 32 request bodies, oldest first.
func (s *Server) LastRequests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.last...)
}

// MaxInFlight is the highest number of POST /v1/responses served at once,
// so tests can prove a client's concurrency limit.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxFlight
}

// begin records a request and returns its 1-based number.
func (s *Server) begin(body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.inFlight++
	s.maxFlight = max(s.maxFlight, s.inFlight)
	s.last = append(s.last, body)
	if len(s.last) > keepRequests {
		s.last = s.last[len(s.last)-keepRequests:]
	}
	return s.requests
}

// countInstruction records one answered request for an instruction line.
func (s *Server) countInstruction(instruction string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byInstruction == nil {
		s.byInstruction = map[string]int{}
	}
	s.byInstruction[instruction]++
}

// Stats is what GET /v1/_sandbox/stats reports, so tests that run the
// sandbox in a container can count upstream calls per turn (give each turn
// a unique instruction line).
type Stats struct {
	Requests      int            `json:"requests"`
	MaxInFlight   int            `json:"maxInFlight"`
	ByInstruction map[string]int `json:"byInstruction"`
	Counts
}

// Snapshot returns the counters.
func (s *Server) Snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := make(map[string]int, len(s.byInstruction))
	for k, v := range s.byInstruction {
		by[k] = v
	}
	return Stats{Requests: s.requests, MaxInFlight: s.maxFlight, ByInstruction: by, Counts: s.bg.counts()}
}

func (s *Server) stats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Snapshot())
}

func (s *Server) end() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
}

// nextScript pops the next scripted text, if any is left.
func (s *Server) nextScript() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scriptPos >= len(s.o.Script) {
		return "", false
	}
	t := s.o.Script[s.scriptPos]
	s.scriptPos++
	return t, true
}

func (s *Server) lookup(id string) (stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.responses[id]
	return st, ok
}

// ownerOf returns the response that produced an output item, so a client that
// replays items instead of sending previous_response_id is recognised.
func (s *Server) ownerOf(itemID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.itemOwner[itemID]
}

func (s *Server) save(id string, st stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responses[id] = st
	s.order = append(s.order, id)
	for _, oid := range st.outIDs {
		s.itemOwner[oid] = id
	}
	for len(s.order) > keepResponses {
		old := s.order[0]
		s.order = s.order[1:]
		for _, oid := range s.responses[old].outIDs {
			delete(s.itemOwner, oid)
		}
		delete(s.responses, old)
	}
	if err := s.persist(id, st); err != nil {
		s.log.Warn("sandbox state: response not saved", "id", id, "err", err)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if s.getBackground(w, r) {
		return
	}
	id := r.PathValue("id")
	st, ok := s.lookup(id)
	if !ok {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "", "Response with id '"+id+"' not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(st.response)
}
