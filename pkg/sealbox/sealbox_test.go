package sealbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	a, b := Generate(), Generate()
	ringA, err := Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	blob := ringA.Seal("x1.", []byte("the user said: my password is hunter2"))
	if strings.Contains(blob, "hunter2") {
		t.Fatalf("plain text visible in %q", blob)
	}
	rotated, err := Parse(b + "," + a)
	if err != nil {
		t.Fatal(err)
	}
	onlyB, _ := Parse(b)
	flip := func(s string) string { // change one ciphertext character
		i := len(s) - 5
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for _, tc := range []struct {
		name string
		ring *Keyring
		blob string
		want error
	}{
		{"round trip", ringA, blob, nil},
		{"rotation: old key still opens", rotated, blob, nil},
		{"key removed", onlyB, blob, ErrUnknownKey},
		{"tampered", ringA, flip(blob), ErrTampered},
		{"truncated", ringA, blob[:len(blob)-10], ErrTampered},
		{"other purpose", ringA, "y1." + strings.TrimPrefix(blob, "x1."), ErrNotSealed},
		{"not sealed", ringA, "x1.plain", ErrNotSealed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ring.Open("x1.", tc.blob)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.want == nil && string(got) != "the user said: my password is hunter2" {
				t.Fatalf("got %q", got)
			}
		})
	}
	if nb := rotated.Seal("x1.", []byte("n")); strings.Contains(nb, KeyID(mustDecode(t, a))) {
		t.Fatalf("rotated ring sealed with the old key: %s", nb)
	}
}

func mustDecode(t *testing.T, s string) []byte {
	b, err := decodeKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{"", " , ", "not base64!", "c2hvcnQ="} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func TestLoadOrCreate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d", "keys")
	first, err := LoadOrCreate(p)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	again, err := LoadOrCreate(p)
	if err != nil || again != first {
		t.Fatalf("second load %q %v, want %q", again, err, first)
	}
	if _, err := Parse(first); err != nil {
		t.Fatal(err)
	}
}

// TestSealForBindsHolder: a blob sealed for one holder opens for it only,
// not for another holder nor unbound, though every one holds the keys.
func TestSealForBindsHolder(t *testing.T) {
	ring := Random()
	blob := ring.SealFor("x1.", []byte("alice's summary"), []byte("alice"))
	if got, err := ring.OpenFor("x1.", blob, []byte("alice")); err != nil || string(got) != "alice's summary" {
		t.Fatalf("its holder: %q, %v", got, err)
	}
	for _, other := range [][]byte{[]byte("bob"), []byte("alicex"), nil} {
		if got, err := ring.OpenFor("x1.", blob, other); !errors.Is(err, ErrTampered) {
			t.Fatalf("holder %q opened it: %q, %v", other, got, err)
		}
	}
	if _, err := ring.OpenFor("x1.", ring.Seal("x1.", []byte("unbound")), []byte("alice")); !errors.Is(err, ErrTampered) {
		t.Fatalf("an unbound blob opened as bound: %v", err)
	}
}
