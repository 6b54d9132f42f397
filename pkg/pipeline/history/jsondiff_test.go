package history

import (
	"slices"
	"testing"
)

func TestJSONDiff(t *testing.T) {
	a := `{"model":"sandbox-1","input":[{"role":"user","content":"hi"}],"store":true,"previous_response_id":"resp_1"}`
	b := `{"model":"other-1","input":[{"role":"user","content":"hi"},{"role":"user","content":"more"}],"store":true,"tools":[]}`
	got, err := JSONDiff([]byte(a), []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`+ input[1]: {"content":"more","role":"user"}`,
		`~ model: "sandbox-1" → "other-1"`,
		`- previous_response_id: "resp_1"`,
		`+ tools: []`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("diff:\n%q\nwant\n%q", got, want)
	}
	if same, _ := JSONDiff([]byte(a), []byte(a)); len(same) != 0 {
		t.Fatalf("a body differs from itself: %q", same)
	}
	if _, err := JSONDiff([]byte(a), []byte("nope")); err == nil {
		t.Fatal("non-JSON accepted")
	}
}
