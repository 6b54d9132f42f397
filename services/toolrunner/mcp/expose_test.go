package mcp

import (
	"regexp"
	"strings"
	"testing"
)

func serverTools(server string, names ...string) ServerTools {
	st := ServerTools{Server: server}
	for _, n := range names {
		st.Tools = append(st.Tools, Tool{Server: server, Name: n, InputSchema: defaultSchema})
	}
	return st
}

// exposedNames maps "server/tool" to the exposed name.
func exposedNames(ex []Exposed) map[string]string {
	m := map[string]string{}
	for _, e := range ex {
		m[e.Tool.Server+"/"+e.Tool.Name] = e.Name
	}
	return m
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func TestExpose(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		name     string
		servers  []ServerTools
		reserved map[string]bool
		want     map[string]string
	}{
		{
			name:    "distinct names stay plain",
			servers: []ServerTools{serverTools("docs", "search", "fetch"), serverTools("fs", "read_file")},
			want:    map[string]string{"docs/search": "search", "docs/fetch": "fetch", "fs/read_file": "read_file"},
		},
		{
			name:    "a name two servers offer is prefixed on both, others stay plain",
			servers: []ServerTools{serverTools("docs", "search", "fetch"), serverTools("code", "search")},
			want:    map[string]string{"docs/search": "docs__search", "code/search": "code__search", "docs/fetch": "fetch"},
		},
		{
			name:     "a reserved (client function) name is prefixed",
			servers:  []ServerTools{serverTools("docs", "search", "fetch")},
			reserved: map[string]bool{"search": true},
			want:     map[string]string{"docs/search": "docs__search", "docs/fetch": "fetch"},
		},
		{
			name:    "odd characters become underscores",
			servers: []ServerTools{serverTools("fs", "read.file/v2", "grép")},
			want:    map[string]string{"fs/read.file/v2": "read_file_v2", "fs/grép": "gr_p"},
		},
		{
			name:    "names equal once sanitized count as a collision",
			servers: []ServerTools{serverTools("a", "get.item"), serverTools("b", "get_item")},
			want:    map[string]string{"a/get.item": "a__get_item", "b/get_item": "b__get_item"},
		},
		{
			name:    "a down server contributes nothing",
			servers: []ServerTools{serverTools("docs", "search"), {Server: "down", Err: ErrClosed}},
			want:    map[string]string{"docs/search": "search"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := exposedNames(Expose(tt.servers, tt.reserved))
			if len(got) != len(tt.want) {
				t.Errorf("got %d tools %v, want %d", len(got), got, len(tt.want))
			}
			for k, want := range tt.want {
				if got[k] != want {
					t.Errorf("%s exposed as %q, want %q", k, got[k], want)
				}
			}
		})
	}

	t.Run("long names are cut with a hash, stay unique and valid", func(t *testing.T) {
		ex := Expose([]ServerTools{serverTools("s", long, long+"y")}, nil)
		a, b := ex[0].Name, ex[1].Name
		if len(a) != 64 || len(b) != 64 || a == b || !validName.MatchString(a) || !validName.MatchString(b) {
			t.Errorf("names %q, %q: want two distinct valid 64-character names", a, b)
		}
		if !strings.HasPrefix(a, strings.Repeat("x", 50)) {
			t.Errorf("%q lost its readable prefix", a)
		}
	})

	t.Run("a prefixed name that is taken or reserved gets a hash", func(t *testing.T) {
		servers := []ServerTools{
			serverTools("a", "x"),
			serverTools("b", "x", "a__x"), // b's own "a__x" collides with a's prefixed "x"
		}
		ex := Expose(servers, map[string]bool{"b__x": true})
		seen := map[string]bool{}
		for _, e := range ex {
			if !validName.MatchString(e.Name) || seen[e.Name] || e.Name == "b__x" {
				t.Errorf("name %q: invalid, duplicate or reserved (all: %v)", e.Name, exposedNames(ex))
			}
			seen[e.Name] = true
		}
		if got := exposedNames(ex)["a/x"]; got != "a__x" {
			t.Errorf("a/x exposed as %q, want a__x (first in order keeps the name)", got)
		}
	})

	t.Run("deterministic and sorted whatever the input order", func(t *testing.T) {
		one := Expose([]ServerTools{serverTools("b", "z", "x"), serverTools("a", "x", long)}, nil)
		two := Expose([]ServerTools{serverTools("a", long, "x"), serverTools("b", "x", "z")}, nil)
		if len(one) != 4 || len(one) != len(two) {
			t.Fatalf("lengths %d, %d", len(one), len(two))
		}
		for i := range one {
			if one[i].Name != two[i].Name || one[i].Tool.Server != two[i].Tool.Server || one[i].Tool.Name != two[i].Tool.Name {
				t.Errorf("[%d] %q (%s/%s) vs %q (%s/%s)", i, one[i].Name, one[i].Tool.Server, one[i].Tool.Name, two[i].Name, two[i].Tool.Server, two[i].Tool.Name)
			}
		}
		if one[0].Tool.Server != "a" || one[3].Tool.Name != "z" {
			t.Errorf("not sorted by server then tool: %v", exposedNames(one))
		}
	})
}
