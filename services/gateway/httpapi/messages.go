package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/tokens"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/messages"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// messagesPing is how often a Messages stream sends ping while the model
// has not answered: Anthropic's clients and proxies expect traffic.
var messagesPing = 5 * time.Second

// isMessagesPath reports a path of the Messages door, whose errors are
// Anthropic's shape (authenticate, failMessages).
func isMessagesPath(path string) bool { return strings.HasPrefix(path, "/v1/messages") }

// failMessages writes e in Anthropic's shape and status (messages.ErrorBody),
// with retry-after on a 429 or 529.
func (s *Server) failMessages(w http.ResponseWriter, e *responses.Error) {
	status, body := messages.ErrorBody(e)
	if status == http.StatusTooManyRequests || status == 529 || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", fmt.Sprint(max(cmp.Or(e.RetryAfter, s.cfg.RetryAfter), 1)))
	}
	if status >= 500 {
		s.log.Warn("messages request failed", "status", status, "err", e.Error())
	}
	writeJSON(w, status, body)
}

// messagesBackend is the profile a Messages request's model routes to.
func (s *Server) messagesBackend(model string) (profiles.Profile, bool) {
	backend, _, e := responses.Resolve(s.cfg.Profiles, model)
	if e != nil {
		return profiles.Profile{}, false
	}
	p, err := s.cfg.Profiles.Get(backend)
	return p, err == nil
}

// parseMessages reads a Messages body and its Responses create, and says
// in X-Aptix-Ignored-Params what will not reach a backend that is not
// Anthropic's; anthropic reports a backend that speaks Messages (it gets
// the body as sent).
func (s *Server) parseMessages(w http.ResponseWriter, r *http.Request) (*messages.Request, *responses.CreateRequest, bool, *responses.Error) {
	data, e := s.readBody(w, r)
	if e != nil {
		return nil, nil, false, e
	}
	p, ok := s.messagesBackend(messages.Peek(data))
	anthropic := ok && p.API == profiles.APIAnthropicMessages
	mreq, e := messages.Parse(data, messages.Options{Anthropic: anthropic})
	if e != nil {
		return nil, nil, false, e
	}
	req, e := responses.Parse(mreq.Create)
	if e != nil {
		return nil, nil, false, e
	}
	if !anthropic {
		req.Ignore(mreq.Ignored()...)
	}
	if v := req.IgnoredValue(); v != "" {
		w.Header().Set(responses.IgnoredHeader, v)
	}
	return mreq, req, anthropic, nil
}

// messagesCreate is POST /v1/messages (docs/http-api.md#messages): the
// Messages request said as a Responses create (messages.Parse) runs as one
// turn through the same path as POST /v1/responses and the chat door
// (prepare, submit, outcome or relay): durable, paid once, within the
// caller's budgets, in the console and replayable. An Anthropic backend
// gets the client's body as sent, with its anthropic-version and
// anthropic-beta. Like a chat client, a Messages client that hangs up
// cancels its turn, and no response record is kept (the client carries
// its history).
func (s *Server) messagesCreate(w http.ResponseWriter, r *http.Request) {
	mreq, req, anthropic, e := s.parseMessages(w, r)
	if e != nil {
		s.failMessages(w, e)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	run, e := s.app.Start(ctx, auth.From(ctx), application.Turn{Request: req, Follow: req.Stream,
		Edit: func(exec *contracts.AgentExecuteRequest) { s.messagesRouting(w, r, mreq, req, anthropic, exec) }})
	if e != nil {
		s.failMessages(w, e)
		return
	}
	defer run.Close()
	defer s.cancelOnHangup(r, run)() // before the handler returns, which ends r's context too
	if mreq.Stream {
		// Only an Anthropic backend answers thinking blocks, which the live
		// deltas do not carry: hold its stream to keep them first. Any other
		// streams live whatever the request's thinking.
		s.serveMessagesEvents(w, r, run, mreq.Thinking && anthropic)
		return
	}
	resp, _, e := s.app.Outcome(ctx, run)
	if e == nil {
		e = messages.Failed(resp)
	}
	if e != nil {
		s.failMessages(w, e)
		return
	}
	writeJSON(w, http.StatusOK, messages.FromResponse(resp))
}

// messagesRouting sets how the turn reaches its backend: an Anthropic
// backend gets the client's headers, and its body as sent unless Aptix's
// own turn changes what the model sees (an alias rule's AGN-003 framing,
// retrieved context): then the translation goes, thinking blocks still in
// it, and X-Aptix-Ignored-Params names what it does not carry.
func (s *Server) messagesRouting(w http.ResponseWriter, r *http.Request, mreq *messages.Request, req *responses.CreateRequest, anthropic bool, exec *contracts.AgentExecuteRequest) {
	if exec.OpenAI == nil {
		return
	}
	exec.OpenAI.AnthropicVersion = r.Header.Get("Anthropic-Version")
	exec.OpenAI.AnthropicBeta = strings.Join(r.Header.Values("Anthropic-Beta"), ",")
	if anthropic && exec.Framing == contracts.FramingNone && exec.RagScope == contracts.RagScopeNone {
		exec.OpenAI.Messages = mreq.Body
	} else if anthropic {
		// The translation carries thinking blocks, not the rest of
		// what only Messages says: named, as for any backend.
		for _, k := range mreq.Ignored() {
			if !strings.HasSuffix(k, "thinking") {
				req.Ignore(k)
			}
		}
		if v := req.IgnoredValue(); v != "" {
			w.Header().Set(responses.IgnoredHeader, v)
		}
	}
}

// serveMessagesEvents answers a streamed Messages request with Anthropic's
// events (messages.Streamer), a ping right after message_start and every
// messagesPing while nothing else is written.
func (s *Server) serveMessagesEvents(w http.ResponseWriter, r *http.Request, run *application.Run, hold bool) {
	meta := run.Meta
	fl := beginSSE(w)
	var mu sync.Mutex
	failed := false
	write := func(evs ...messages.Event) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			if failed {
				return false
			}
			b, err := json.Marshal(ev.Data)
			if err == nil {
				_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Name, b)
			}
			failed = err != nil
		}
		if fl != nil && !failed {
			fl.Flush()
		}
		return !failed
	}
	ms := messages.NewStreamer(meta.ID, meta.Model, hold)
	if !write(ms.Start(), messages.Ping()) {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(messagesPing)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !write(messages.Ping()) {
					return
				}
			}
		}
	}()
	s.app.Relay(r.Context(), run, nil, func(evs []responses.Event) bool {
		out, _ := ms.Events(evs)
		return write(out...)
	})
	mu.Lock()
	failed = true // no ping may write once the handler returns
	mu.Unlock()
}

// messagesCountTokens is POST /v1/messages/count_tokens: the input tokens
// of the request as the backend would get it. An Anthropic backend counts
// it (application.ForwardCountTokens); any other is counted here with the gateway's
// tokenizer (services/gateway/tokens), as POST /v1/responses/input_tokens
// counts for a backend that serves no count.
func (s *Server) messagesCountTokens(w http.ResponseWriter, r *http.Request) {
	data, e := s.readBody(w, r)
	if e != nil {
		s.failMessages(w, e)
		return
	}
	orig := data
	var body map[string]json.RawMessage
	if json.Unmarshal(data, &body) == nil && body != nil {
		if _, ok := body["max_tokens"]; !ok {
			body["max_tokens"] = json.RawMessage("1") // count_tokens takes no max_tokens
		}
		data, _ = json.Marshal(body)
	}
	p, _ := s.messagesBackend(messages.Peek(data))
	mreq, e := messages.Parse(data, messages.Options{Anthropic: p.API == profiles.APIAnthropicMessages})
	if e != nil {
		s.failMessages(w, e)
		return
	}
	req, e := responses.ParseCount(mreq.Create)
	if e != nil {
		s.failMessages(w, e)
		return
	}
	_, model, e := responses.Resolve(s.cfg.Profiles, req.Model)
	if e != nil {
		s.failMessages(w, e)
		return
	}
	if p.API == profiles.APIAnthropicMessages {
		f, e := s.app.ForwardCountTokens(r.Context(), p, p.Model(model), orig, r.Header.Get("Anthropic-Version"), strings.Join(r.Header.Values("Anthropic-Beta"), ","))
		if e != nil {
			s.failMessages(w, e)
			return
		}
		writeForwarded(w, f)
		return
	}
	n, err := tokens.Count(tokens.Request{Model: p.Model(model), Instructions: req.Instructions, Tools: req.Tools, Items: req.Input})
	if err != nil {
		s.failMessages(w, responses.Internal("count_tokens", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
}
