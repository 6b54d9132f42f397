package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// setIgnored names, in X-Aptix-Ignored-Params, the parameters of req that
// were accepted and will not take effect: the ones no backend takes, and,
// when the model is served by a chat-completions or anthropic-messages
// backend, the ones that translation has no equivalent for.
func (s *Server) setIgnored(w http.ResponseWriter, req *responses.CreateRequest) {
	if backend, _, e := responses.Resolve(s.cfg.Profiles, req.Model); e == nil {
		if req.Aptix != nil && req.Aptix.Backend != "" {
			backend = req.Aptix.Backend
		}
		if p, err := s.cfg.Profiles.Get(backend); err == nil && p.API == profiles.APIChatCompletions {
			req.Ignore(req.ChatDropped(p.ContextWindow)...)
		} else if err == nil && p.API == profiles.APIAnthropicMessages {
			req.Ignore(req.AnthropicDropped(p.ContextWindow)...)
		}
	}
	if v := req.IgnoredValue(); v != "" {
		w.Header().Set(responses.IgnoredHeader, v)
	}
}
