package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
)

func TestHandlerOutcome(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        error
		delivered  int
		maxDeliver int
		want       outcome
	}{
		{"handled", nil, 5, 5, pass},
		{"rejected on the first delivery", Reject("bad", "no"), 1, 5, reject},
		{"rejected, wrapped", fmt.Errorf("mapping: %w", Reject("bad", "no")), 1, 5, reject},
		{"failed, deliveries left", errors.New("index not ready"), 4, 5, retry},
		{"failed on the last delivery", errors.New("index not ready"), 5, 5, giveUp},
		{"failed past the last delivery (lowered MaxDeliver)", errors.New("x"), 7, 5, giveUp},
	} {
		if got := handlerOutcome(c.err, c.delivered, c.maxDeliver); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestPublishOutcome(t *testing.T) {
	full := fmt.Errorf("publish: %w", backpressure.ErrAtCapacity)
	for _, c := range []struct {
		name       string
		err        error
		delivered  int
		maxDeliver int
		want       outcome
	}{
		{"stored", nil, 5, 5, pass},
		{"too large to store", &Rejection{Code: CodeEventTooLarge, Message: "big"}, 1, 5, reject},
		{"stream full, deliveries left", full, 1, 5, retry},
		{"stream full on the last delivery: still held, never lost", full, 5, 5, retry},
		{"broken, deliveries left", errors.New("permission denied"), 4, 5, retry},
		{"broken on the last delivery", errors.New("permission denied"), 5, 5, giveUp},
	} {
		if got := publishOutcome(c.err, c.delivered, c.maxDeliver); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// runStep runs one step of the chain alone, followed by a step that only
// records it was reached.
func runStep(r *runner, s step, ev *event) (err error, reached bool) {
	ev.r = r
	ev.steps = []step{s, func(*runner, *event) error { reached = true; return nil }}
	if ev.ctx == nil {
		ev.ctx = context.Background()
	}
	if ev.span == nil {
		ev.span = trace.SpanFromContext(ev.ctx)
	}
	err = ev.next()
	return err, reached
}

// midStage is a later stage (a Turn in, a Turn out) for the step tests.
func midStage(h Handler) Stage {
	return Stage{Name: "steptest", In: contracts.StageRetrieved, Out: contracts.StageEnveloped, Handle: h}
}

var (
	midSubject = contracts.Subject(contracts.StageRetrieved, "c1", "t1")
	outSubject = contracts.Subject(contracts.StageEnveloped, "c1", "t1")
	completed  = contracts.Subject(contracts.StageCompleted, "c1", "t1")
	deadSubj   = contracts.DeadSubject("steptest")
)

func midTurn() contracts.Turn {
	return contracts.NewTurn(contracts.AgentExecuteRequest{ConversationId: "c1", TurnId: "t1", Instruction: "x"})
}

// failureOf is the error code of the completion js stored last.
func failureOf(t *testing.T, js *memJS) string {
	t.Helper()
	for i := len(js.got) - 1; i >= 0; i-- {
		if !strings.HasPrefix(js.got[i].Subject, contracts.SubjectPrefix+"."+contracts.StageCompleted+".") {
			continue
		}
		var tn contracts.Turn
		if err := turncodec.Unmarshal(js.got[i].Data, &tn); err != nil || tn.Failure == nil {
			t.Fatalf("completion: %v %+v", err, tn)
		}
		return tn.Failure.Code
	}
	return ""
}

func TestAccountStep(t *testing.T) {
	r, _ := memRunner(midStage(nil), SubscriberConfig{})
	boom := errors.New("boom")
	ev := &event{msg: delivery(midSubject, 1, nil)}
	ev.r, ev.steps = r, []step{account, func(*runner, *event) error { return boom }}
	if err := ev.next(); err != boom {
		t.Fatalf("account returned %v, want the rest of the chain's error", err)
	}
	if r.stats.busyNanos.Load() <= 0 {
		t.Fatal("busy time not counted")
	}
}

func TestTracedStep(t *testing.T) {
	r, _ := memRunner(midStage(nil), SubscriberConfig{})
	msg := delivery(midSubject, 3, nil)
	msg.Metadata.Set(contracts.HeaderReplayOf, "t0")
	ev := &event{msg: msg}
	ev.r = r
	var seen context.Context
	ev.steps = []step{traced, func(_ *runner, ev *event) error { seen = ev.ctx; return nil }}
	if err := ev.next(); err != nil {
		t.Fatal(err)
	}
	if ev.subject != midSubject || ev.delivered != 3 || Delivered(seen) != 3 || ReplayOf(seen) != "t0" {
		t.Fatalf("subject %q delivered %d, ctx: delivered %d replay of %q", ev.subject, ev.delivered, Delivered(seen), ReplayOf(seen))
	}
}

func TestLoadStep(t *testing.T) {
	good := midTurn()
	data, err := turncodec.Marshal(&good)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		subject   string
		payload   []byte
		reached   bool
		published []string
	}{
		{"a turn goes on", midSubject, data, true, nil},
		{"not a turn: dead letter and an answer", midSubject, []byte("{"), false, []string{deadSubj, completed}},
		{"ids differ from the subject's", contracts.Subject(contracts.StageRetrieved, "c1", "t2"), data, false, []string{deadSubj, contracts.Subject(contracts.StageCompleted, "c1", "t2")}},
		{"no turn to answer: the dead letter only", "aptix.retrieved.c1", data, false, []string{deadSubj}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, js := memRunner(midStage(nil), SubscriberConfig{})
			ev := &event{msg: delivery(c.subject, 1, c.payload), subject: c.subject, delivered: 1}
			err, reached := runStep(r, load, ev)
			if err != nil || reached != c.reached || !slices.Equal(js.published(), c.published) {
				t.Fatalf("err %v, went on %v, published %v; want went on %v, published %v", err, reached, js.published(), c.reached, c.published)
			}
			if reached && ev.turn.TurnId != "t1" {
				t.Fatalf("turn %+v", ev.turn)
			}
			if len(c.published) == 2 {
				if code := failureOf(t, js); code != CodeInvalidEvent {
					t.Fatalf("answered %q, want %s", code, CodeInvalidEvent)
				}
			}
		})
	}
}

func TestLoadStepRedeliversWhenDeadLetterFails(t *testing.T) {
	r, js := memRunner(midStage(nil), SubscriberConfig{})
	js.fail = func(string) error { return errors.New("no route") }
	ev := &event{msg: delivery(midSubject, 1, []byte("{")), subject: midSubject, delivered: 1}
	if err, reached := runStep(r, load, ev); err == nil || reached {
		t.Fatalf("err %v, went on %v: an event whose dead letter is not stored must be redelivered", err, reached)
	}
}

func TestScreenStep(t *testing.T) {
	// Only a redelivered request is looked up (which needs the stream);
	// these pass without one.
	for _, c := range []struct {
		name      string
		in        string
		delivered int
		first     bool
	}{
		{"a later stage", contracts.StageRetrieved, 2, false},
		{"a request's first delivery", contracts.StageRequested, 1, true},
	} {
		st := midStage(nil)
		st.In = c.in
		r, _ := memRunner(st, SubscriberConfig{})
		ev := &event{delivered: c.delivered}
		if err, reached := runStep(r, screen, ev); err != nil || !reached || ev.first != c.first {
			t.Errorf("%s: err %v, went on %v, first %v", c.name, err, reached, ev.first)
		}
	}
}

func TestCallStep(t *testing.T) {
	for _, c := range []struct {
		name      string
		handle    Handler
		delivered int
		wantErr   bool
		reached   bool
		published []string
		code      string
		processed int64
	}{
		{"handled: on to the publish", func(context.Context, *contracts.Turn) error { return nil }, 1, false, true, nil, "", 0},
		{"rejected: answered at once", func(context.Context, *contracts.Turn) error { return Reject("bad_input", "no") }, 1, false, false, []string{completed}, "bad_input", 0},
		{"failed with deliveries left: retried", func(context.Context, *contracts.Turn) error { return errors.New("busy") }, 2, true, false, nil, "", 0},
		{"panicked: retried like a failure", func(context.Context, *contracts.Turn) error { panic("oops") }, 2, true, false, nil, "", 0},
		{"failed on the last delivery: dead letter and answer", func(context.Context, *contracts.Turn) error { return errors.New("busy") }, 3, false, false, []string{deadSubj, completed}, CodeStageFailed, 0},
		{"emitted its output: done, never published again", func(ctx context.Context, t *contracts.Turn) error { return Emit(ctx, t) }, 1, false, false, []string{outSubject}, "", 1},
		{"emitted, then its bookkeeping failed: retried", func(ctx context.Context, t *contracts.Turn) error {
			_ = Emitted(ctx)
			return errors.New("usage record")
		}, 1, true, false, nil, "", 0},
		{"emitted, bookkeeping failed on the last delivery: done without it", func(ctx context.Context, t *contracts.Turn) error {
			_ = Emitted(ctx)
			return errors.New("usage record")
		}, 3, false, false, nil, "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, js := memRunner(midStage(c.handle), SubscriberConfig{MaxDeliver: 3})
			ev := &event{msg: delivery(midSubject, c.delivered, nil), subject: midSubject, delivered: c.delivered, turn: midTurn()}
			err, reached := runStep(r, call, ev)
			if (err != nil) != c.wantErr || reached != c.reached || !slices.Equal(js.published(), c.published) {
				t.Fatalf("err %v, went on %v, published %v; want error %v, went on %v, published %v", err, reached, js.published(), c.wantErr, c.reached, c.published)
			}
			if c.code != "" {
				if code := failureOf(t, js); code != c.code {
					t.Fatalf("answered %q, want %s", code, c.code)
				}
			}
			if got := r.stats.processed.Load(); got != c.processed {
				t.Fatalf("processed %d, want %d", got, c.processed)
			}
		})
	}
}

func TestCallStepBeforePublish(t *testing.T) {
	r, _ := memRunner(midStage(func(context.Context, *contracts.Turn) error { return nil }), SubscriberConfig{})
	crash := errors.New("crash here")
	r.o.BeforePublish = func(*contracts.Turn) error { return crash }
	if err, reached := runStep(r, call, &event{delivered: 1, turn: midTurn()}); err != crash || reached {
		t.Fatalf("err %v, went on %v: BeforePublish's error must stop the event before its publish", err, reached)
	}
}

func TestAdmitStepPassesLaterStages(t *testing.T) {
	r, _ := memRunner(midStage(nil), SubscriberConfig{})
	if err, reached := runStep(r, admit, &event{turn: midTurn()}); err != nil || !reached {
		t.Fatalf("err %v, went on %v", err, reached)
	}
}

func TestEmitStep(t *testing.T) {
	broken := errors.New("permission denied")
	for _, c := range []struct {
		name      string
		fail      error // of the output's publish
		maxEvent  int
		delivered int
		wantErr   bool
		published []string
		code      string
		processed int64
	}{
		{"stored", nil, 0, 1, false, []string{outSubject}, "", 1},
		{"routed", nil, 0, 1, false, []string{contracts.Subject(contracts.StageToolRound, "c1", "t1")}, "", 1},
		{"stream full: held", fmt.Errorf("x: %w", backpressure.ErrAtCapacity), 0, 3, true, nil, "", 0},
		{"broken, deliveries left: retried", broken, 0, 2, true, nil, "", 0},
		{"broken on the last delivery: dead letter and answer", broken, 0, 3, false, []string{deadSubj, completed}, CodeStageFailed, 0},
		{"too large: answered at once", nil, 3000, 1, false, []string{completed}, CodeEventTooLarge, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := midStage(nil)
			if c.name == "routed" {
				st.Route = func(*contracts.Turn) string { return contracts.StageToolRound }
			}
			r, js := memRunner(st, SubscriberConfig{MaxDeliver: 3})
			r.pub.maxEvent = c.maxEvent
			if c.fail != nil {
				js.fail = func(s string) error {
					if s == outSubject {
						return c.fail
					}
					return nil
				}
			}
			ev := &event{msg: delivery(midSubject, c.delivered, nil), subject: midSubject, delivered: c.delivered, turn: midTurn()}
			if c.maxEvent > 0 {
				// The turn's output is too large; the small error
				// completion, without the envelope, fits.
				ev.turn.Envelope = &contracts.Envelope{Body: []byte(`"` + strings.Repeat("x", 4000) + `"`)}
			}
			ctx, cancel := context.WithCancel(context.Background())
			if c.fail != nil && backpressure.IsAtCapacity(c.fail) {
				cancel() // a full stream is waited out until the stage stops
			}
			defer cancel()
			ev.ctx = ctx
			err, reached := runStep(r, emit, ev)
			if (err != nil) != c.wantErr || reached || !slices.Equal(js.published(), c.published) {
				t.Fatalf("err %v, went on %v, published %v; want error %v, published %v", err, reached, js.published(), c.wantErr, c.published)
			}
			if c.code != "" {
				if code := failureOf(t, js); code != c.code {
					t.Fatalf("answered %q, want %s", code, c.code)
				}
			}
			if got := r.stats.processed.Load(); got != c.processed {
				t.Fatalf("processed %d, want %d", got, c.processed)
			}
		})
	}
}
