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

func TestSplitWrites(t *testing.T) {
	turns := []turnSnapshots{
		{
			start:   map[string]uint64{"APTIX": 10, "APTIX_QUEUE": 3, "KV_usage": 4},
			answer:  map[string]uint64{"APTIX": 14, "APTIX_QUEUE": 4, "KV_usage": 4},
			settled: map[string]uint64{"APTIX": 14, "APTIX_QUEUE": 4, "KV_usage": 6, "OBJ_idle": 0},
		},
		{
			// KV_new is created after the answer: all its writes are after
			// it. An answer past settled (a stream trimmed) and one below
			// start are clamped.
			start:   map[string]uint64{"APTIX": 14, "APTIX_QUEUE": 4, "KV_usage": 6},
			answer:  map[string]uint64{"APTIX": 19, "APTIX_QUEUE": 5, "KV_usage": 2},
			settled: map[string]uint64{"APTIX": 18, "APTIX_QUEUE": 5, "KV_usage": 8, "KV_new": 1},
		},
	}
	s := splitWrites(turns)
	if s.Turns != 2 || s.MinBefore != 5 || s.MaxBefore != 5 || s.MedianBefore != 5 {
		t.Fatalf("split: %+v", s)
	}
	if s.Before.PerOp != 5 || s.Before.ByStream["APTIX"] != 4 || s.Before.ByStream["APTIX_QUEUE"] != 1 || len(s.Before.ByStream) != 2 {
		t.Fatalf("before the answer: %s", s.Before)
	}
	if s.After.PerOp != 2.5 || s.After.ByStream["KV_usage"] != 2 || s.After.ByStream["KV_new"] != 0.5 || len(s.After.ByStream) != 2 {
		t.Fatalf("after the answer: %s", s.After)
	}
	want := "5.00 (APTIX 4.00, APTIX_QUEUE 1.00) before the answer + 2.50 (KV_usage 2.00, KV_new 0.50) after it (2 sequential turns; 5 to 5 before the answer per turn, median 5)"
	if got := s.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	// Before and after always add up to the turn's writes.
	if all := writesPerOp(turns[0].start, turns[1].settled, 2); all.PerOp != s.Before.PerOp+s.After.PerOp {
		t.Fatalf("total %s, split %s", all, s)
	}
	if s := splitWrites(nil); s.Before.PerOp != 0 || s.After.PerOp != 0 {
		t.Fatalf("no turns: %+v", s)
	}
	// A third turn whose window caught a write on a clock (the queue's
	// keeper): the mean moves, the median does not.
	turns = append(turns, turnSnapshots{
		start:   map[string]uint64{"APTIX": 18, "APTIX_QUEUE": 5},
		answer:  map[string]uint64{"APTIX": 22, "APTIX_QUEUE": 7},
		settled: map[string]uint64{"APTIX": 22, "APTIX_QUEUE": 7},
	})
	if s := splitWrites(turns); s.MedianBefore != 5 || s.MaxBefore != 6 || s.Before.PerOp <= 5 {
		t.Fatalf("with a keeper write: %+v", s)
	}
}

func TestWritesGoal(t *testing.T) {
	total := Writes{PerOp: 10, ByStream: map[string]float64{"APTIX": 10}}
	split := Split{Turns: 100, MedianBefore: 6, Before: Writes{PerOp: 6.01, ByStream: map[string]float64{"APTIX": 6.01}}, After: Writes{PerOp: 4, ByStream: map[string]float64{"KV_x": 4}}}
	if got := criticalWrites(total, split); got != 6 {
		t.Fatalf("judged %v, want the median turn's writes before the answer", got)
	}
	if got := criticalWrites(total, Split{}); got != 10 {
		t.Fatalf("judged %v without a split, want the total", got)
	}
	if got := criticalWrites(Writes{}, Split{}); got <= 6 {
		t.Fatalf("nothing counted judged %v", got)
	}
	if got, want := writesNote(total, split), "on the critical path: the median turn stores 6 before its answer (the mean, which a writer on a clock such as the queue's keeper can land in: 6.01 (APTIX 6.01)); 4.00 (KV_x 4.00) more after it, 10.01 in all (over 6)"; got != want {
		t.Fatalf("note %q, want %q", got, want)
	}
}
