package bench

import "testing"

// TestStageFigures: the per-stage figures follow the main line of
// layout.Stages, in order, and say which includes the model call.
func TestStageFigures(t *testing.T) {
	ms := map[string]float64{"retriever": 0.1, "envelope": 0.2, "llmcaller": 1.5, "mapper": 0.3, "toolrunner": 9}
	if got, want := stageFigures(ms, ", ", ""), "retriever 0.100, envelope 0.200, llmcaller 1.500 (model call included), mapper 0.300"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got, want := stageFigures(ms, " + ", " ms"), "retriever 0.100 + envelope 0.200 + llmcaller 1.500 (model call included) + mapper 0.300 ms"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
