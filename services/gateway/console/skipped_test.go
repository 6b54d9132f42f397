package console

import (
	"bytes"
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// TestWaterfallShowsSkippedStage: a turn that entered past the retriever
// gets a "retriever: skipped" row of its own, with no event, and its entry
// event is shown as written by the gateway, not the retriever.
func TestWaterfallShowsSkippedStage(t *testing.T) {
	at := time.Unix(1000, 0)
	h := map[string][]string{contracts.HeaderSkipped: {"retriever"}, contracts.HeaderCESource: {"aptix/gateway"}}
	msgs := map[string]msgInfo{contracts.StageRetrieved: headerInfo(1, 100, contracts.StageRetrieved, h)}
	steps, _ := waterfall(map[string]time.Time{contracts.StageRetrieved: at}, msgs)
	if len(steps) != len(history.Stages)+1 || !steps[0].Skipped || steps[0].Producer != "retriever" {
		t.Fatalf("steps %+v", steps)
	}
	if steps[1].Stage != contracts.StageRetrieved || steps[1].Producer != "gateway" || !steps[1].Present {
		t.Fatalf("entry step %+v", steps[1])
	}
	tm, err := template.New("partials.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/partials.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tm.ExecuteTemplate(&out, "waterfall", steps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `data-skipped="retriever"`) || !strings.Contains(out.String(), "skipped: the turn entered at retrieved") {
		t.Fatalf("waterfall html:\n%s", out.String())
	}
	// A turn the retriever ran has no such row.
	steps, _ = waterfall(map[string]time.Time{contracts.StageRetrieved: at}, map[string]msgInfo{contracts.StageRetrieved: headerInfo(1, 100, contracts.StageRetrieved, nil)})
	if len(steps) != len(history.Stages) || steps[0].Producer != "retriever" {
		t.Fatalf("steps of a turn the retriever ran %+v", steps)
	}
}
