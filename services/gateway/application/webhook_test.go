package application

import "testing"

// TestSignStandardWebhooks: the signature matches the Standard Webhooks
// specification's reference example (the same vector its libraries test).
func TestSignStandardWebhooks(t *testing.T) {
	key, err := webhookKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if _, err := webhookKey("whsec_not base64!"); err == nil {
		t.Fatal("a malformed secret is accepted")
	}
}

// TestWantsEvent: metadata.webhook_events filters terminal events.
func TestWantsEvent(t *testing.T) {
	for _, tc := range []struct {
		filter, event string
		want          bool
	}{
		{"", "response.completed", true},
		{"response.failed, response.cancelled", "response.cancelled", true},
		{"failed", "response.failed", true},
		{"response.failed", "response.completed", false},
	} {
		if got := wantsEvent(tc.filter, tc.event); got != tc.want {
			t.Errorf("wantsEvent(%q, %q) = %v", tc.filter, tc.event, got)
		}
	}
}

// TestWebhookConfigFromEnv: the per-destination limits are read and checked.
func TestWebhookConfigFromEnv(t *testing.T) {
	t.Setenv("APTIX_WEBHOOK_CONCURRENCY", "8")
	t.Setenv("APTIX_WEBHOOK_QUEUE", "50")
	c, err := WebhookConfigFromEnv()
	if err != nil || c.PerDestination != 8 || c.QueuePerDestination != 50 {
		t.Fatalf("%+v, %v", c, err)
	}
	t.Setenv("APTIX_WEBHOOK_QUEUE", "0")
	if _, err := WebhookConfigFromEnv(); err == nil {
		t.Fatal("APTIX_WEBHOOK_QUEUE=0 accepted")
	}
}

// TestDestinationOf: deliveries share a queue by scheme, host and port.
func TestDestinationOf(t *testing.T) {
	if a, b := destinationOf("https://Hooks.example.com/a?x=1"), destinationOf("https://hooks.example.com/b"); a != b {
		t.Errorf("%s != %s", a, b)
	}
	if a, b := destinationOf("https://hooks.example.com/a"), destinationOf("https://hooks.example.com:8443/a"); a == b {
		t.Errorf("another port shares the queue: %s", a)
	}
}
