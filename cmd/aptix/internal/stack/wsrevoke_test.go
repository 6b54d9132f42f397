package stack

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// TestWebSocketRevokedKeyCloses: a key revoked while its socket is open
// stops working on that socket at once, as on HTTP: the very next
// response.create gets an invalid_api_key error event and the socket closes
// with 1008 (policy violation). It used to serve responses for the
// socket's whole hour, then for up to 5 s (a trust window between checks).
func TestWebSocketRevokedKeyCloses(t *testing.T) {
	e := newEnv(t, sandbox.Options{})
	ctx := ctxT(t)
	keys, err := auth.OpenKeys(ctx, e.js, 1)
	if err != nil {
		t.Fatal(err)
	}
	alice, arec, err := keys.Create(ctx, "alice", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	url := e.authGateway(&auth.Chain{Keys: keys}, &logBuf{})
	o := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + alice}}}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/v1/responses", o)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(32 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "before the revoke"}))
	wsCompleted(t, wsCreate(t, c, map[string]any{"input": "still valid"}))

	if _, err := keys.Revoke(ctx, arec.ID); err != nil {
		t.Fatal(err)
	}
	wsRefused(t, wsCreate(t, c, map[string]any{"input": "right after the revoke"}), auth.CodeInvalidKey)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _, err = c.Read(rctx)
	if st := websocket.CloseStatus(err); st != websocket.StatusPolicyViolation {
		t.Fatalf("after the refused create: %v (close status %d), want a 1008 close", err, st)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "revoked") {
		t.Fatalf("close reason: %v", err)
	}
}
