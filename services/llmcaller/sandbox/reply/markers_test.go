package reply

import (
	"reflect"
	"testing"
)

func TestCallMarkers(t *testing.T) {
	tests := []struct {
		text string
		want []Marker
	}{
		{`no markers`, nil},
		{`[call:ping]`, []Marker{{"ping", "{}"}}},
		{`a [call:get_weather {"city": "Paris"}] b`, []Marker{{"get_weather", `{"city":"Paris"}`}}},
		{`[call:f {"s":"]","n":{"x":[1,2]}} ] then [call:g.v2-x {}]`, []Marker{{"f", `{"s":"]","n":{"x":[1,2]}}`}, {"g.v2-x", "{}"}}},
		{`[call: spaced] [call:f {broken] [call:h {"a":1} trailing]`, nil},
		{`[call:f {"a":1}][call:f {"a":1}]`, []Marker{{"f", `{"a":1}`}, {"f", `{"a":1}`}}},
	}
	for _, tt := range tests {
		if got := CallMarkers(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("CallMarkers(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
