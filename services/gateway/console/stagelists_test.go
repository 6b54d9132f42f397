package console

import (
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// TestStageListsFromTheTopology: the live page's columns, which its script
// reads back, and the turn page's replay choices follow layout.Stages, in
// order; the script names no stage of its own.
func TestStageListsFromTheTopology(t *testing.T) {
	e := newEnv(t)
	e.turn("c-one", "t-1", "Explain the retry policy", "Retries back off")
	c := e.server()

	live := c.get("/console/live").body
	var cells []string
	for _, st := range layout.EventStages() {
		cells = append(cells, `<td class="cell" data-stage="`+st+`"></td>`)
	}
	if !strings.Contains(live, strings.Join(cells, "")) {
		t.Errorf("live page lacks the row cells %v in order:\n%s", cells, live)
	}
	turn := c.get("/console/turns/t-1?c=c-one").body
	last := -1
	for _, name := range layout.MainNames() {
		i := strings.Index(turn, `<option value="`+name+`"`)
		if i <= last {
			t.Errorf("turn page: replay choice %s missing or out of order", name)
		}
		last = i
	}
	js := c.get("/console/static/console.js").body
	for _, st := range layout.EventStages() {
		if strings.Contains(js, `"`+st+`"`) {
			t.Errorf("console.js names the stage %q itself", st)
		}
	}
}
