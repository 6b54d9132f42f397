package stage_test

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

// The re-attach counters travel with the stage's micro service stats.
func TestStageExportsReattachCounters(t *testing.T) {
	st := (&stage.LLMCaller{Caller: caller.New(profiles.Builtin(), caller.Options{})}).Stage()
	if st.Counters == nil {
		t.Fatal("no counters")
	}
	got := st.Counters()
	for _, k := range []string{"calls_reattached", "calls_resumed", "calls_repeated", "calls_lost_upstream"} {
		if v, ok := got[k]; !ok || v != 0 {
			t.Errorf("%s = %d, %v", k, v, ok)
		}
	}
}
