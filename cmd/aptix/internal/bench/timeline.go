package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Where a turn's time goes at concurrency 1, read from the server's own
// stored times of the turn's events: the gap from the client's submit to
// the retrieved event, between each event and the next, and from the
// completion to the client holding it. The stage handling times (micro
// stats) include work after the stage's output is stored; these gaps are
// the turn's critical path only.

// hops are the stages whose stored times cut the path, in order.
var hops = []string{contracts.StageRetrieved, contracts.StageEnveloped, contracts.StageResponded, contracts.StageCompleted}

// Timeline is the median of each gap, in ms, over the sampled turns.
type Timeline struct {
	Turns int `json:"turns"`
	// ToRetrieved is submit → retrieved stored: the queue, the retriever's
	// search and its publish.
	ToRetrieved float64 `json:"toRetrievedMs"`
	ToEnveloped float64 `json:"toEnvelopedMs"`
	// ToResponded includes the call record and the model call.
	ToResponded float64 `json:"toRespondedMs"`
	ToCompleted float64 `json:"toCompletedMs"`
	// ToClient is completion stored → the client holds the decoded turn.
	ToClient float64 `json:"toClientMs"`
}

func (t Timeline) String() string {
	return fmt.Sprintf("submit → retrieved %.3f ms, → enveloped %.3f, → responded %.3f (call record and model call inside), → completed %.3f, → client %.3f (medians of %d turns)",
		t.ToRetrieved, t.ToEnveloped, t.ToResponded, t.ToCompleted, t.ToClient, t.Turns)
}

// sentTurn is one timed turn: its ids and the client's submit and answer times.
type sentTurn struct {
	conv, turn   string
	sent, answer time.Time
}

// timeline reads the stored time of each turn's events and takes the
// medians of the gaps. A turn whose events cannot all be read is skipped.
func timeline(ctx context.Context, js jetstream.JetStream, turns []sentTurn) (Timeline, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return Timeline{}, err
	}
	gaps := make([][]float64, len(hops)+1)
	for _, t := range turns {
		prev := t.sent
		row := make([]float64, 0, len(hops)+1)
		for _, st := range hops {
			m, err := s.GetLastMsgForSubject(ctx, contracts.Subject(st, t.conv, t.turn))
			if err != nil {
				break
			}
			row = append(row, ms(m.Time.Sub(prev)))
			prev = m.Time
		}
		if len(row) < len(hops) {
			continue
		}
		row = append(row, ms(t.answer.Sub(prev)))
		for i, g := range row {
			gaps[i] = append(gaps[i], g)
		}
	}
	med := func(g []float64) float64 {
		if len(g) == 0 {
			return 0
		}
		slices.Sort(g)
		return round3(g[len(g)/2])
	}
	return Timeline{Turns: len(gaps[0]), ToRetrieved: med(gaps[0]), ToEnveloped: med(gaps[1]), ToResponded: med(gaps[2]),
		ToCompleted: med(gaps[3]), ToClient: med(gaps[4])}, nil
}

// timelineNote is the timeline for a miss cause, or "" without one.
func timelineNote(t Timeline) string {
	if t.Turns == 0 {
		return ""
	}
	return "; where it goes, from the events' stored times: " + strings.TrimSuffix(t.String(), fmt.Sprintf(" (medians of %d turns)", t.Turns))
}
