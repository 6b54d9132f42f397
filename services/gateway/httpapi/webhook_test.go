package httpapi

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
