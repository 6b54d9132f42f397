package caller_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/llmcaller/caller"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// BenchmarkCallReattach measures what pay-once with re-attach costs per call:
// the same streamed call to an in-process sandbox (0 ms latency) with a
// JetStream pay-once store, plain versus background+stream with the
// call-started record (capability reattach). With -count N the two
// sub-benchmarks run interleaved, plain, reattach, plain, reattach, …:
//
//	go test -run '^$' -bench CallReattach -count 5 ./services/llmcaller/caller/
func BenchmarkCallReattach(b *testing.B) {
	for _, reattach := range []bool{false, true} {
		b.Run(fmt.Sprintf("reattach=%v", reattach), func(b *testing.B) {
			ts, _ := startSandbox(b, sandbox.Options{})
			_, js := startJetStream(b)
			results, err := caller.NewKVResultStore(context.Background(), js)
			if err != nil {
				b.Fatal(err)
			}
			set := profileSet(ts.URL, func(p *profiles.Profile) { p.Capabilities.Reattach = reattach; p.MaxConcurrent = 64 })
			c := caller.New(set, caller.Options{Logger: quiet, Results: results})
			body := simpleBody(b, "benchmark turn")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := c.Call(context.Background(), caller.Input{ConversationID: "bench", TurnID: fmt.Sprintf("b%d-%d", b.N, i), Body: body, Stream: true})
				if res.Error != nil {
					b.Fatalf("call %d: %+v", i, res.Error)
				}
			}
		})
	}
}
