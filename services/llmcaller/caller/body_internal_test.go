package caller

import (
	"encoding/json"
	"testing"
)

// TestRequestEncodeChangesOnlyWhatChanged: a body no call changes is sent
// as it is (the same bytes, the same memory); a changed one keeps every
// other member byte for byte, in place, and adds new ones last.
func TestRequestEncodeChangesOnlyWhatChanged(t *testing.T) {
	const raw = `{"model":"m", "input":[{"text":"<a & b>\u2028"}],"stream":false,"x":1,"x":2,"store" : true}`
	for _, tc := range []struct {
		name string
		edit func(b body)
		want string
	}{
		{"unchanged", func(b body) {}, raw},
		{"stream on", func(b body) { b.setStream(true) }, `{"model":"m","input":[{"text":"<a & b>\u2028"}],"stream":true,"x":2,"store" : true}`},
		{"stream off", func(b body) { b.setStream(false) }, `{"model":"m","input":[{"text":"<a & b>\u2028"}],"x":2,"store" : true}`},
		{"background", func(b body) { b.setBackground() }, `{"model":"m","input":[{"text":"<a & b>\u2028"}],"stream":true,"x":2,"store":true,"background":true}`},
		{"input replaced, previous id removed", func(b body) {
			b["input"] = json.RawMessage(`[]`)
			delete(b, "model")
		}, `{"input":[],"stream":false,"x":2,"store" : true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := openRequest(json.RawMessage(raw))
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(r.b)
			out, err := r.encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("sent\n %s\nwant\n %s", out, tc.want)
			}
			if tc.name == "unchanged" && &out[0] != &r.raw[0] {
				t.Fatal("an unchanged body was copied")
			}
			if !json.Valid(out) {
				t.Fatalf("not JSON: %s", out)
			}
		})
	}
	for _, bad := range []string{`[1,2]`, `null`, `{"a":1} x`, `{"a":}`, ``} {
		if _, err := openRequest(json.RawMessage(bad)); err == nil {
			t.Errorf("%q opened", bad)
		}
	}
}
