package bench

import "testing"

func TestWritesPerOp(t *testing.T) {
	before := map[string]uint64{"APTIX": 100, "KV_a": 7}
	after := map[string]uint64{"APTIX": 140, "KV_a": 17, "KV_new": 5, "OBJ_idle": 0}
	w := writesPerOp(before, after, 10)
	if w.PerOp != 5.5 || w.ByStream["APTIX"] != 4 || w.ByStream["KV_a"] != 1 || w.ByStream["KV_new"] != 0.5 || len(w.ByStream) != 3 {
		t.Fatalf("writes: %+v", w)
	}
	if got, want := w.String(), "5.50 (APTIX 4.00, KV_a 1.00, KV_new 0.50)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if w := writesPerOp(before, after, 0); w.PerOp != 0 {
		t.Fatalf("no ops: %+v", w)
	}
}
