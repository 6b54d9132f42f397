package stack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestConversationItemIDsChecked: an id a client chooses for a
// conversation item is 1-128 characters of [A-Za-z0-9_-] and unique in its
// conversation, else a 400 in OpenAI's shape, on create, append and a
// response's input; "../x" and a duplicate were accepted and then
// unreachable (the path does not name them, the first shadows the second).
func TestConversationItemIDsChecked(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	url, _ := e.gateway()
	msg := func(id string) string {
		return `{"type":"message","role":"user","content":"hi","id":"` + id + `"}`
	}
	st, _, body := call(t, "POST", url+"/v1/conversations", `{"items":[`+msg("msg_a")+`]}`, nil)
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var conv struct{ ID string }
	_ = json.Unmarshal([]byte(body), &conv)
	for _, c := range []struct{ name, method, path, body, param string }{
		{"dot-dot", "POST", "/v1/conversations", `{"items":[` + msg("../x") + `]}`, "items[0].id"},
		{"slash", "POST", "/v1/conversations/" + conv.ID + "/items", `{"items":[` + msg("a/b") + `]}`, "items[0].id"},
		{"too long", "POST", "/v1/conversations/" + conv.ID + "/items", `{"items":[` + msg(strings.Repeat("m", 129)) + `]}`, "items[0].id"},
		{"twice in one call", "POST", "/v1/conversations", `{"items":[` + msg("msg_b") + `,` + msg("msg_b") + `]}`, ""},
		{"already in the conversation", "POST", "/v1/conversations/" + conv.ID + "/items", `{"items":[` + msg("msg_a") + `]}`, ""},
		{"a response's input", "POST", "/v1/responses", `{"model":"sandbox-1","conversation":"` + conv.ID + `","input":[` + msg("msg_a") + `]}`, ""},
		{"a response's input id", "POST", "/v1/responses", `{"model":"sandbox-1","conversation":"` + conv.ID + `","input":[` + msg("x.y") + `]}`, "input[0].id"},
	} {
		st, _, body := call(t, c.method, url+c.path, c.body, nil)
		param, code := errorOf(t, body)
		if st != http.StatusBadRequest || param != c.param || code != "invalid_value" {
			t.Errorf("%s: %d param %q code %q: %s", c.name, st, param, code, body)
		}
		if c.param == "" && !strings.Contains(body, "Duplicate item found with id msg_") {
			t.Errorf("%s: %s", c.name, body)
		}
	}
	st, _, body = call(t, "GET", url+"/v1/conversations/"+conv.ID+"/items?order=asc", "", nil)
	var list struct{ Data []struct{ ID string } }
	if err := json.Unmarshal([]byte(body), &list); st != 200 || err != nil || len(list.Data) != 1 || list.Data[0].ID != "msg_a" {
		t.Fatalf("the conversation changed: %d %s", st, body)
	}
	if st, _, body := call(t, "POST", url+"/v1/conversations/"+conv.ID+"/items", `{"items":[`+msg("msg_c-1")+`]}`, nil); st != 200 {
		t.Fatalf("a good id: %d %s", st, body)
	}
}
