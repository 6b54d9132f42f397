package caller

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{"fractional seconds", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{"http date", map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, true},
		{"ms wins", map[string]string{"retry-after-ms": "250", "Retry-After": "9"}, 250 * time.Millisecond, true},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"none", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("got %s %v, want %s %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second} {
		got := backoff(n, 100*time.Millisecond, time.Second)
		if got > want || got < want*3/4 {
			t.Errorf("backoff(%d) = %s, want within [%s, %s]", n, got, want*3/4, want)
		}
	}
}

func TestRetryableStatus(t *testing.T) {
	for status, want := range map[int]bool{408: true, 409: true, 429: true, 500: true, 503: true, 400: false, 401: false, 403: false, 404: false, 422: false} {
		if retryableStatus(status) != want {
			t.Errorf("retryableStatus(%d) != %v", status, want)
		}
	}
}

func TestFinishReason(t *testing.T) {
	tests := map[string]string{
		`{"status":"completed","output":[{"type":"message"}]}`:                          "stop",
		`{"status":"completed","output":[{"type":"message"},{"type":"function_call"}]}`: "tool_use",
		`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`:   "length",
		`{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}`:      "content_filter",
		`{"status":"failed","error":{"code":"server_error"}}`:                           "error",
	}
	for body, want := range tests {
		s, ok := (*bodies)(nil).of(body)
		if !ok || s.FinishReason() != want {
			t.Errorf("%s: %v, want %q", body, s, want)
		}
	}
	s, _ := (*bodies)(nil).of(`{"usage":{"prompt_tokens":7,"completion_tokens":3}}`)
	if in, out := s.Usage.Tokens(); in != 7 || out != 3 {
		t.Errorf("chat-style usage: %d %d", in, out)
	}
}

// TestBodiesDecodeOnce: the trace, the history record and the done delta
// of one call read one decode of its body; another body is decoded anew.
func TestBodiesDecodeOnce(t *testing.T) {
	var docs bodies
	body := `{"id":"resp_1","status":"completed","output":[]}`
	a, ok := docs.of(body)
	b, _ := docs.of(body)
	if !ok || a != b || a.ID != "resp_1" {
		t.Fatalf("decoded twice or wrong: %p %p %+v", a, b, a)
	}
	if c, _ := docs.of(`{"id":"resp_2"}`); c == a || c.ID != "resp_2" {
		t.Fatalf("another body: %+v", c)
	}
	if _, ok := docs.of(`<html>`); ok {
		t.Fatal("not a response object, yet decoded")
	}
}
