package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/application"
	"github.com/aptix-dev/aptix/services/gateway/chat"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// TestChatRouting: a Chat Completions backend gets the client's body as
// sent, unless its profile emulates tools (then the translation goes, the
// chat-only parameters added to it); a Responses backend gets the
// translation, and the header names what it has no place for.
func TestChatRouting(t *testing.T) {
	set := profiles.Builtin()
	set.Put(profiles.Profile{Name: "chat", API: profiles.APIChatCompletions, BaseURL: "http://chat/v1", DefaultModel: "chat-1",
		Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModeNative}})
	set.Put(profiles.Profile{Name: "emu", API: profiles.APIChatCompletions, BaseURL: "http://emu/v1", DefaultModel: "emu-1",
		Capabilities: profiles.Capabilities{ToolMode: profiles.ToolModePrompt}})
	s := &Server{cfg: Config{Config: application.Config{Profiles: set}}}
	cases := []struct {
		model     string
		forward   bool
		header    string
		stopField bool
	}{
		{"sandbox-1", false, "messages[].name, seed, stop", false},
		{"chat-1", true, "", false},
		{"emu-1", false, "messages[].name", true},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			creq, e := chat.Parse([]byte(`{"model":"` + tc.model + `","messages":[{"role":"user","name":"ann","content":"hi"}],"stop":["x"],"seed":3}`))
			if e != nil {
				t.Fatal(e)
			}
			req, e := responses.Parse(creq.Create)
			if e != nil {
				t.Fatal(e)
			}
			w := httptest.NewRecorder()
			forward := s.chatRouting(w, creq, req)
			_, stop := req.Fields["stop"]
			if forward != tc.forward || w.Header().Get(responses.IgnoredHeader) != tc.header || stop != tc.stopField {
				t.Fatalf("forward %v header %q stop carried %v", forward, w.Header().Get(responses.IgnoredHeader), stop)
			}
		})
	}
}
