package stack

import (
	"encoding/json"
	"testing"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestUsageAllPrincipalsUnlabelled: an admin's GET /v1/aptix/usage (every
// principal's totals) carries no principal; it was labelled with the
// admin's own, reading as the admin's spend. Asking for one principal
// labels the answer with that one.
func TestUsageAllPrincipalsUnlabelled(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := keys.CreateWithRoles(ctx, "ops", "", 0, []string{auth.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	for _, c := range []struct{ query, principal string }{{"", ""}, {"?principal=key:app", "key:app"}} {
		status, _, body := call(t, "GET", url+"/v1/aptix/usage"+c.query, "", bearer(ops))
		var got struct {
			Principal string `json:"principal"`
			All       bool   `json:"all_principals"`
		}
		if err := json.Unmarshal([]byte(body), &got); status != 200 || err != nil {
			t.Fatalf("GET /v1/aptix/usage%s: %d %s", c.query, status, body)
		}
		if got.Principal != c.principal || got.All != (c.principal == "") {
			t.Errorf("GET /v1/aptix/usage%s: principal %q, all %v; want %q", c.query, got.Principal, got.All, c.principal)
		}
	}
}
