package store

import "testing"

// TestUnfolded: the records after the folder's ack floor count even when
// the consumer has not been told of them yet; records that aged out of the
// stream do not.
func TestUnfolded(t *testing.T) {
	for _, c := range []struct {
		name                        string
		counted, first, last, floor uint64
		want                        uint64
	}{
		{"empty stream", 0, 0, 0, 0, 0},
		{"all folded", 0, 1, 5, 5, 0},
		{"stored, not yet signalled", 0, 1, 6, 5, 1},
		{"counted by the consumer", 2, 1, 6, 4, 2},
		{"one in flight, counted", 1, 1, 5, 4, 1},
		{"aged out past the floor", 0, 9, 8, 3, 0},
		{"aged out, one new", 0, 9, 9, 3, 1},
	} {
		if got := unfolded(c.counted, c.first, c.last, c.floor); got != c.want {
			t.Errorf("%s: unfolded(%d, %d, %d, %d) = %d, want %d", c.name, c.counted, c.first, c.last, c.floor, got, c.want)
		}
	}
}
