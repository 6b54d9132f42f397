package responses

import (
	"strings"
	"testing"
)

// TestParseRefusesHostileIDs: previous_response_id and conversation are
// subject tokens or a 400 naming the field; the message never echoes more
// than a clipped id.
func TestParseRefusesHostileIDs(t *testing.T) {
	long := "resp_" + strings.Repeat("a", 5000)
	cases := []struct{ body, param, code string }{
		{`{"model":"m","input":"x","previous_response_id":"` + long + `"}`, "previous_response_id", CodeStringTooLong},
		{`{"model":"m","input":"x","previous_response_id":"resp_a.b"}`, "previous_response_id", CodeInvalidValue},
		{`{"model":"m","input":"x","previous_response_id":"resp_>"}`, "previous_response_id", CodeInvalidValue},
		{`{"model":"m","input":"x","previous_response_id":"resp é"}`, "previous_response_id", CodeInvalidValue},
		{`{"model":"m","input":"x","conversation":"` + long + `"}`, "conversation", CodeStringTooLong},
		{`{"model":"m","input":"x","conversation":{"id":"a*"}}`, "conversation", CodeInvalidValue},
	}
	for _, c := range cases {
		_, e := Parse([]byte(c.body))
		if e == nil || e.Status != 400 || *e.Param != c.param || *e.Code != c.code || len(e.Message) > 300 {
			t.Errorf("%.80s: %v", c.body, e)
		}
	}
	for _, ok := range []string{`{"model":"m","input":"x","previous_response_id":"resp_0190abcd-EF_9"}`, `{"model":"m","input":"x","conversation":"support-1"}`} {
		if _, e := Parse([]byte(ok)); e != nil {
			t.Errorf("%s: %v", ok, e)
		}
	}
	if !ValidPathID("resp_01") || ValidPathID(long) || ValidPathID("") || ValidPathID("a.b") {
		t.Error("ValidPathID")
	}
	if c := Clip(long); len(c) > 90 || !strings.HasPrefix(c, "resp_aaa") {
		t.Errorf("Clip: %q", c)
	}
}
