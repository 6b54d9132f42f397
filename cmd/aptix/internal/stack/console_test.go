package stack

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestGatewayServesConsole: the gateway serves the console next to the API,
// and a response created over HTTP opens by its resp_… id and by search.
func TestGatewayServesConsole(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	base, client := e.gateway()
	r, err := client.Responses.New(ctxT(t), responses.ResponseNewParams{Model: "sandbox-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Console, show me")}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	// Three events: a transparent turn enters at enveloped, past the
	// retriever and the envelope (docs/architecture.md#entry-points).
	code, body := get("/console/turns/" + r.ID)
	if code != 200 || !strings.Contains(body, "Console, show me") || !strings.Contains(body, "Every stored event (3)") {
		t.Fatalf("turn by response id: %d\n%.2000s", code, body)
	}
	if code, body := get("/console/search?q=" + r.ID); code != 200 || !strings.Contains(body, "Console, show me") {
		t.Fatalf("search by response id: %d", code)
	}
	if code, body := get("/console/"); code != 200 || !strings.Contains(body, "Newest conversations") {
		t.Fatalf("overview: %d\n%.500s", code, body)
	}
	// The API's own 404 stays JSON; the console's is a page.
	if code, body := get("/v1/nothing"); code != 404 || !strings.HasPrefix(body, `{"error"`) {
		t.Fatalf("API 404: %d %s", code, body)
	}
}

// TestGatewayConsoleAdminOnly: with APTIX_AUTH=keys an ordinary key works
// for the API and gets 403 at the console; a key made with the admin role
// opens it; and no page shows the key.
func TestGatewayConsoleAdminOnly(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	app, _, err := keys.Create(ctx, "app", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := keys.CreateWithRoles(ctx, "ops", "", 0, []string{auth.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	if st, _, body := call(t, "POST", url+"/v1/responses", `{"model":"sandbox-1","input":"admin only"}`, bearer(app)); st != 200 {
		t.Fatalf("API with an ordinary key: %d %s", st, body)
	}
	if st, _, body := call(t, "GET", url+"/console/", "", bearer(app)); st != 403 || strings.Contains(body, "Newest conversations") {
		t.Fatalf("console with an ordinary key: %d", st)
	}
	// Without a key the browser lands on the sign-in form (call follows the 303).
	if st, _, body := call(t, "GET", url+"/console/", "", nil); st != 200 || !strings.Contains(body, `name="credential"`) || strings.Contains(body, "Newest conversations") {
		t.Fatalf("console without a key: %d", st)
	}
	st, _, body := call(t, "GET", url+"/console/", "", bearer(ops))
	if st != 200 || !strings.Contains(body, "Newest conversations") || strings.Contains(body, ops) || strings.Contains(body, app) {
		t.Fatalf("console with the admin key: %d", st)
	}
}
