package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWebhookReceiver: aptix webhook-receiver --count 1 receives the signed
// webhook of a background response from aptix up, says the signature is
// valid, and exits after it (no nc loop, no orphan).
func TestWebhookReceiver(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	startUpEnv(t, t.TempDir(), map[string]string{"APTIX_WEBHOOK_SECRET": secret})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- serveWebhooks(context.Background(), ln, key, 1, out) }()
	resp, err := http.Post("http://"+upHTTP+"/v1/responses", "application/json", strings.NewReader(
		`{"model":"sandbox-1","input":"hello","background":true,"metadata":{"webhook_url":"http://`+ln.Addr().String()+`/hook"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook within 30s; received:\n%s", out)
	}
	got := out.String()
	if !strings.Contains(got, "POST /hook  event=response.completed") || !strings.Contains(got, "signature: valid") || !strings.Contains(got, `"status":"completed"`) {
		t.Fatalf("receiver printed:\n%s", got)
	}

	h := http.Header{}
	h.Set("webhook-id", "msg_1")
	h.Set("webhook-timestamp", "1700000000")
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString([]byte("not it")))
	if s := checkSignature(key, h, []byte(`{}`)); !strings.HasPrefix(s, "INVALID") {
		t.Fatalf("a wrong signature: %s", s)
	}
}
