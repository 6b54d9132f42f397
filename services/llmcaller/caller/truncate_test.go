package caller

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTruncateAuto: only truncation "auto" with a known window drops; the
// opening system/developer messages and the turn (the last user message on)
// stay; a dropped call takes its output along; the oldest go first.
func TestTruncateAuto(t *testing.T) {
	pad := strings.Repeat("x", 400) // ~100 tokens an item
	msg := func(role, text string) string {
		return `{"type":"message","role":"` + role + `","content":"` + text + `"}`
	}
	items := []string{
		msg("system", "be brief"),
		msg("user", "old question "+pad),
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`,
		msg("assistant", "old answer "+pad),
		`{"type":"function_call_output","call_id":"c1","output":"` + pad + `"}`,
		msg("user", "recent question "+pad),
		msg("assistant", "recent answer "+pad),
		msg("user", "the turn"),
	}
	mk := func(truncation string) body {
		b := body{"model": json.RawMessage(`"m"`), "input": json.RawMessage("[" + strings.Join(items, ",") + "]")}
		if truncation != "" {
			b["truncation"] = json.RawMessage(`"` + truncation + `"`)
		}
		return b
	}
	texts := func(b body) string {
		var raw []map[string]any
		_ = json.Unmarshal(b["input"], &raw)
		var s []string
		for _, m := range raw {
			c, _ := m["content"].(string)
			if len(c) > 16 {
				c = c[:16]
			}
			s = append(s, strings.TrimSpace(m["type"].(string)+":"+c))
		}
		return strings.Join(s, " | ")
	}
	for _, tc := range []struct {
		name, truncation string
		window, dropped  int
		want             string
	}{
		{"disabled", "disabled", 200, 0, ""},
		{"no window", "auto", 0, 0, ""},
		{"fits", "auto", 100000, 0, ""},
		{"drops the oldest and the call's output", "auto", 420, 3,
			"message:be brief | message:old answer xxxxx | message:recent question | message:recent answer xx | message:the turn"},
		{"keeps the turn even when over", "auto", 10, 6, "message:be brief | message:the turn"},
	} {
		b := mk(tc.truncation)
		before := texts(b)
		tr, err := truncateAuto(b, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		if tr.dropped != tc.dropped {
			t.Errorf("%s: dropped %d, want %d (%+v)", tc.name, tr.dropped, tc.dropped, tr)
			continue
		}
		want := tc.want
		if want == "" {
			want = before
		}
		if got := texts(b); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
	if n := (truncation{dropped: 6, before: 900, after: 20, w: 10}).note(); !strings.Contains(n, "dropped the 6 oldest") || !strings.Contains(n, "still over") {
		t.Errorf("note %q", n)
	}
}
