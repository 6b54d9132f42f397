package profiles

import (
	"slices"
	"strings"
	"testing"
)

func TestFallbacksParsed(t *testing.T) {
	set, err := Parse([]byte(`{"profiles":{
		"a":{"baseUrl":"http://a/v1","defaultModel":"a-1","fallbacks":["b","sandbox"]},
		"b":{"baseUrl":"http://b/v1","defaultModel":"b-1","aliases":{"fast":"b-fast"},"models":["shared"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := set.Get("a")
	if !slices.Equal(a.Fallbacks, []string{"b", "sandbox"}) {
		t.Fatalf("fallbacks %v", a.Fallbacks)
	}
	b, _ := set.Get("b")
	for requested, want := range map[string]string{
		"fast":   "b-fast", // its alias of the name
		"shared": "shared", // a model it serves
		"a-1":    "b-1",    // another profile's model: its default
		"":       "b-1",
	} {
		if got := b.FallbackModel(requested); got != want {
			t.Errorf("FallbackModel(%q) = %q, want %q", requested, got, want)
		}
	}
}

func TestFallbacksRefused(t *testing.T) {
	for name, c := range map[string]struct{ file, want string }{
		"unknown": {`{"profiles":{"a":{"baseUrl":"http://a/v1","fallbacks":["nope"]}}}`, `unknown profile "nope"`},
		"itself":  {`{"profiles":{"a":{"baseUrl":"http://a/v1","fallbacks":["a"]}}}`, "the profile itself"},
		"twice":   {`{"profiles":{"a":{"baseUrl":"http://a/v1","fallbacks":["sandbox","sandbox"]}}}`, "named twice"},
	} {
		_, err := Parse([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

func TestFallbacksFromEnv(t *testing.T) {
	t.Setenv("APTIX_PROFILES", "")
	t.Setenv("APTIX_PROFILE_OPENAI_FALLBACKS", " sandbox ,")
	set, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := set.Get("openai"); !slices.Equal(p.Fallbacks, []string{"sandbox"}) {
		t.Fatalf("%v", p.Fallbacks)
	}
	t.Setenv("APTIX_PROFILE_OPENAI_FALLBACKS", "nope")
	if _, err := FromEnv(); err == nil {
		t.Fatal("an unknown fallback was accepted")
	}
}
