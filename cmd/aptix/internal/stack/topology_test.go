package stack

import (
	"slices"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	envelopestage "github.com/aptix-dev/aptix/services/envelope/stage"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	llmstage "github.com/aptix-dev/aptix/services/llmcaller/stage"
	mapperstage "github.com/aptix-dev/aptix/services/mapper/stage"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
	toolstage "github.com/aptix-dev/aptix/services/toolrunner/stage"
)

// TestStagesMatchTopology: each service's Stage() consumes and emits what
// layout.Stages declares for it (the table provision, the permissions and
// the trimming are derived from), a stage with routes has a Route, and the
// stores the table names are the services' own buckets.
func TestStagesMatchTopology(t *testing.T) {
	// The turns a Route is tried on: every shape that picks a different
	// event stage in one of the services.
	toolCall := `{"output":[{"type":"function_call","name":"s_n","arguments":"{}"}]}`
	turns := []*contracts.Turn{
		{},
		{Tools: &contracts.ToolLoop{}},
		{Tools: &contracts.ToolLoop{}, LLM: &contracts.LLMResult{}},
		{Tools: &contracts.ToolLoop{Tools: []contracts.LoopTool{{Name: "s_n", Server: "s", Tool: "n"}}}, LLM: &contracts.LLMResult{Body: toolCall}},
	}
	services := map[string]pipeline.Stage{
		"retriever":  (&retrieverstage.Retriever{}).Stage(),
		"envelope":   (&envelopestage.Envelope{}).Stage(),
		"llmcaller":  (&llmstage.LLMCaller{}).Stage(),
		"mapper":     (&mapperstage.Mapper{}).Stage(),
		"toolrunner": (&toolstage.Runner{}).Stage(),
	}
	for _, spec := range layout.Stages {
		st, ok := services[spec.Name]
		if !ok {
			t.Errorf("declared stage %s has no service here", spec.Name)
			continue
		}
		delete(services, spec.Name)
		if st.Name != spec.Name || st.In != spec.In || st.Out != spec.Out {
			t.Errorf("%s's Stage() is %s: %s → %s; declared %s: %s → %s", spec.Name, st.Name, st.In, st.Out, spec.Name, spec.In, spec.Out)
		}
		if (st.Route != nil) != (len(spec.Routes) > 0) {
			t.Errorf("%s: Route set %v, declared routes %v", spec.Name, st.Route != nil, spec.Routes)
		}
		if st.Route == nil {
			continue
		}
		for _, turn := range turns {
			if to := st.Route(turn); !slices.Contains(spec.Emits(), to) {
				t.Errorf("%s routes a turn to %s, not among its declared %v", spec.Name, to, spec.Emits())
			}
		}
	}
	for name := range services {
		t.Errorf("service %s is not in layout.Stages", name)
	}
	for _, c := range []struct {
		stage, bucket string
		objects       bool
	}{
		{"llmcaller", caller.ResultsBucket, false},
		{"llmcaller", caller.HistoryKVBucket, false},
		{"llmcaller", caller.HistoryBucket, true},
		{"toolrunner", toolstage.ResultsBucket, false},
		{"mapper", store.ConversationsBucket, false},
		{"mapper", store.UsageBucket, false},
	} {
		spec, _ := layout.StageByName(c.stage)
		if list := map[bool][]string{false: spec.KV, true: spec.Objects}[c.objects]; !slices.Contains(list, c.bucket) {
			t.Errorf("%s writes %s, which the topology does not declare", c.stage, c.bucket)
		}
	}
}
