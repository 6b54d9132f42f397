package httpapi

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/application"
)

// TestConversationIDsNeverReachTheBus: a conversation or item id that
// cannot be one is answered (404 in a path, 400 in a create body) by a
// gateway with no store and no NATS connection at all: nothing is looked
// up, so such an id never reaches a key or a subject.
func TestConversationIDsNeverReachTheBus(t *testing.T) {
	s := &Server{cfg: Config{RetryAfter: 1, Config: application.Config{MaxBodyBytes: 1 << 20}}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.routes()
	long := "conv_" + strings.Repeat("a", 5000)
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/conversations/" + long, "", 404},
		{"GET", "/v1/conversations/conv_a.b", "", 404},
		{"POST", "/v1/conversations/conv_a*", `{"metadata":{}}`, 404},
		{"DELETE", "/v1/conversations/thread-7", "", 404},
		{"GET", "/v1/conversations/conv_/items", "", 404},
		{"POST", "/v1/conversations/conv_a%3E/items", `{"items":[]}`, 404},
		{"GET", "/v1/conversations/conv_a.b/items/msg_1", "", 404},
		{"DELETE", "/v1/conversations/" + long + "/items/msg_1", "", 404},
		{"GET", "/v1/conversations/conv_ok/items?include[]=everything", "", 400},
		{"GET", "/v1/conversations", "", 404},
		{"PUT", "/v1/conversations/conv_ok", "", 404},
		{"POST", "/v1/responses", `{"model":"m","input":"x","conversation":"conv_a.b"}`, 400},
		{"POST", "/v1/responses", `{"model":"m","input":"x","conversation":{"id":"` + long + `"}}`, 400},
		{"POST", "/v1/responses", `{"model":"m","input":"x","conversation":"conv_ok","previous_response_id":"resp_1"}`, 400},
	}
	for _, tc := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		s.mux.ServeHTTP(w, r)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `"type":"invalid_request_error"`) {
			t.Errorf("%s %.60s: %d %.200s, want %d", tc.method, tc.path, w.Code, w.Body.String(), tc.status)
		}
	}
}
