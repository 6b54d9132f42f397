package sandbox

import (
	"reflect"
	"testing"
)

func TestCallMarkers(t *testing.T) {
	tests := []struct {
		text string
		want []marker
	}{
		{`no markers`, nil},
		{`[call:ping]`, []marker{{"ping", "{}"}}},
		{`a [call:get_weather {"city": "Paris"}] b`, []marker{{"get_weather", `{"city":"Paris"}`}}},
		{`[call:f {"s":"]","n":{"x":[1,2]}} ] then [call:g.v2-x {}]`, []marker{{"f", `{"s":"]","n":{"x":[1,2]}}`}, {"g.v2-x", "{}"}}},
		{`[call: spaced] [call:f {broken] [call:h {"a":1} trailing]`, nil},
		{`[call:f {"a":1}][call:f {"a":1}]`, []marker{{"f", `{"a":1}`}, {"f", `{"a":1}`}}},
	}
	for _, tt := range tests {
		if got := callMarkers(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("callMarkers(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	// Two identical markers in one message are two calls: their ids differ.
	m := marker{"f", `{"a":1}`}
	if callID(2, "t", 0, m) == callID(2, "t", 1, m) || callID(2, "t", 0, m) != callID(2, "t", 0, m) || callID(2, "t", 0, m) == callID(4, "t", 0, m) {
		t.Error("call ids must be deterministic and distinct per position and turn")
	}
}
