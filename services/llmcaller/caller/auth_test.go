package caller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
)

// TestProfileCredentialsOnly checks a profile sends its own key and never
// the OPENAI_* environment openai-go would otherwise pick up.
func TestProfileCredentialsOnly(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-env-must-not-leak")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	t.Setenv("APTIX_TEST_KEY", "sk-profile")
	var mu sync.Mutex
	var got []http.Header
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"resp_1","object":"response","status":"completed","output":[]}`))
	}))
	t.Cleanup(ts.Close)
	tests := []struct{ keyEnv, wantAuth string }{{"", ""}, {"APTIX_TEST_KEY", "Bearer sk-profile"}}
	for i, tt := range tests {
		set := profileSet(ts.URL, func(p *profiles.Profile) { p.APIKeyEnv = tt.keyEnv })
		res := caller.New(set, caller.Options{Logger: quiet}).Call(context.Background(), caller.Input{TurnID: "t", Body: simpleBody(t, "x")})
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		mu.Lock()
		h := got[i]
		mu.Unlock()
		if h.Get("Authorization") != tt.wantAuth || h.Get("OpenAI-Organization") != "" {
			t.Fatalf("keyEnv %q: Authorization %q, OpenAI-Organization %q", tt.keyEnv, h.Get("Authorization"), h.Get("OpenAI-Organization"))
		}
	}
}
