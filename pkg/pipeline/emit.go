package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/subjectscan"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
)

// A stage's output event can be the durable record of its work. The LLM
// caller's responded event is the pay-once result and the mapper's
// completed event is the answer a client and the next turn read, so instead
// of writing a record beside the event and then the event, such a stage
// stores the event itself as soon as its work is done (Emit) and does the
// bookkeeping that nobody waits for after it, still before its input is
// acknowledged. On a redelivery it looks the event up (Output) before doing
// the work again and tells the runtime it is already stored (Emitted).
//
// The runtime then never publishes that turn's output a second time: an
// event the stage emitted is stored once even past the stream's
// de-duplication window.

type emitKey struct{}

// emitState is one handling's output: whether it is stored already.
type emitState struct {
	r    *runner
	done bool
}

func withEmit(ctx context.Context, r *runner) (context.Context, *emitState) {
	e := &emitState{r: r}
	return context.WithValue(ctx, emitKey{}, e), e
}

func emitOf(ctx context.Context) (*emitState, error) {
	e, _ := ctx.Value(emitKey{}).(*emitState)
	if e == nil {
		return nil, errors.New("pipeline: Emit and Emitted work only inside a stage handler")
	}
	if e.r.admit != nil {
		// The admitting stage's publish waits for room and checks the turn
		// id is new (expectFirst); it always publishes through the runtime.
		return nil, fmt.Errorf("pipeline: stage %s admits turns and cannot emit early", e.r.st.Name)
	}
	return e, nil
}

// Emit stores the turn's output event now, on the stage the stage's Route
// (or Out) picks, with the same headers and Nats-Msg-Id the runtime would
// give it. The handler must not change the turn afterwards: the stored
// event is final. An error means nothing is known to be stored; returning
// it redelivers the input.
func Emit(ctx context.Context, t *contracts.Turn) error {
	e, err := emitOf(ctx)
	if err != nil {
		return err
	}
	if e.done {
		return nil
	}
	if err := e.r.publish(ctx, e.r.route(t), t); err != nil {
		return err
	}
	e.done = true
	return nil
}

// Emitted tells the runtime the turn's output is already stored, by an
// earlier delivery that Output found: it is not published again.
func Emitted(ctx context.Context) error {
	e, err := emitOf(ctx)
	if err != nil {
		return err
	}
	e.done = true
	return nil
}

// Output returns the newest event stored for the turn on any of stages
// (such as the stages a stage's Route can pick) by the stage and run being
// handled, with its stream sequence, or nil when there is none. A
// redelivered stage that emits its output looks here before doing its work
// again.
func Output(ctx context.Context, js jetstream.JetStream, conv, turnID string, stages ...string) (*contracts.Turn, uint64, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", contracts.StreamName, err)
	}
	var best *jetstream.RawStreamMsg
	for _, stage := range stages {
		m, err := subjectscan.NewestOn(ctx, s, contracts.Subject(stage, conv, turnID), func(h nats.Header) bool { return ofRun(ctx, h) })
		if err != nil {
			return nil, 0, fmt.Errorf("look up aptix.%s of %s: %w", stage, contracts.TurnKey(conv, turnID), err)
		}
		if m != nil && (best == nil || m.Sequence > best.Sequence) {
			best = m
		}
	}
	if best == nil {
		return nil, 0, nil
	}
	data, err := claim.EventData(ctx, js, best.Header, best.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", best.Subject, err)
	}
	var t contracts.Turn
	if err := turncodec.Unmarshal(data, &t); err != nil {
		return nil, 0, fmt.Errorf("decode %s: %w", best.Subject, err)
	}
	return &t, best.Sequence, nil
}

// ofRun says whether an event with these headers was stored by the stage
// and the run being handled. Other writers store on the same subjects: a
// turn id sent again with another request is answered turn_id_reused on
// the turn's completed subject (under its own Nats-Msg-Id, so it is stored
// after the turn's own completion); a replay or a retried dead letter is a
// run of its own; and another stage publishes there too (the envelope's
// toolround event asking for the loop's tools, which a redelivered envelope
// can store again past the de-duplication window, after the LLM caller's
// result).
func ofRun(ctx context.Context, h nats.Header) bool {
	for _, k := range []string{contracts.HeaderReplayOf, contracts.HeaderRedrive} {
		if h.Get(k) != carried(ctx)[k] {
			return false
		}
	}
	if e, ok := ctx.Value(emitKey{}).(*emitState); ok && h.Get(contracts.HeaderCESource) != "aptix/"+e.r.st.Name {
		return false
	}
	return !contracts.IsReusedAnswerID(h.Get(contracts.HeaderMsgID))
}

// route is the stage a handled turn goes to.
func (r *runner) route(t *contracts.Turn) string {
	if r.st.Route != nil {
		return r.st.Route(t)
	}
	return r.st.Out
}
