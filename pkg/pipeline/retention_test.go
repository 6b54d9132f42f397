package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/backpressure"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/natstest"
)

func subjectCounts(t *testing.T, js jetstream.JetStream, stream string) map[string]uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(">"))
	if err != nil {
		t.Fatal(err)
	}
	byStage := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		stage, _, _, _ := contracts.ParseSubject(subj)
		byStage[stage] += n
	}
	return byStage
}

func publishN(t *testing.T, js jetstream.JetStream, stage string, n, size int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(context.Background(), contracts.Subject(stage, "c", fmt.Sprintf("%s%02d", stage[:3], i)), make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrimmerNeverRemovesUnfinishedWork: history is cut by size
// and age, but an event its stage has not acknowledged stays whatever the
// limits say, and a completion stays for its grace period.
func TestTrimmerNeverRemovesUnfinishedWork(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	c := layout.StreamConfig{HistoryMaxBytes: 8 << 10, WorkMaxBytes: 1 << 20, CompletionGrace: time.Hour}
	if err := Provision(ctx, js, c, SubscriberConfig{}); err != nil {
		t.Fatal(err)
	}
	publishN(t, js, contracts.StageRetrieved, 50, 1000)
	publishN(t, js, contracts.StageCompleted, 10, 1000)
	// The envelope finishes the first 30 retrieved events and holds 5 more.
	cons, _ := js.Consumer(ctx, contracts.StreamName, layout.Durable("envelope"))
	batch, err := cons.Fetch(35)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range batch.Messages() {
		if i < 30 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		i++
	}
	tr := NewTrimmer(js, c, quiet)
	if _, err := tr.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	got := subjectCounts(t, js, contracts.StreamName)
	if got[contracts.StageRetrieved] != 20 || got[contracts.StageCompleted] != 10 {
		t.Fatalf("after a size trim: %v; want the 20 unfinished retrieved events and the 10 completions in grace", got)
	}
	// A week later (HistoryMaxAge)
	// everything finished goes, and the 20 unfinished events still stay.
	tr.now = func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }
	if _, err := tr.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	got = subjectCounts(t, js, contracts.StreamName)
	if got[contracts.StageRetrieved] != 20 || got[contracts.StageCompleted] != 0 {
		t.Fatalf("after an age trim: %v; want only the 20 unfinished retrieved events", got)
	}
}

// TestTrimmerReachesPastPinnedWork: unfinished events at the front of the
// stream, a little over the history size, and finished completions behind
// them: the size cut must reach past the pinned range to the completions
// (it used to stop after a first round that purged nothing, and the stream
// stayed full).
func TestTrimmerReachesPastPinnedWork(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	c := layout.StreamConfig{HistoryMaxBytes: 45 << 10, WorkMaxBytes: 1 << 20, CompletionGrace: time.Nanosecond}
	if err := Provision(ctx, js, c, SubscriberConfig{}); err != nil {
		t.Fatal(err)
	}
	publishN(t, js, contracts.StageRetrieved, 40, 1000) // nobody has taken these
	publishN(t, js, contracts.StageCompleted, 10, 1000)
	if _, err := NewTrimmer(js, c, quiet).Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if got := subjectCounts(t, js, contracts.StreamName); got[contracts.StageRetrieved] != 40 || got[contracts.StageCompleted] >= 10 {
		t.Fatalf("after a size trim: %v; want the 40 unfinished events and fewer completions", got)
	}
}

// TestTrimmerRelievesAFullStreamOfCompletions: completions still in their
// CompletionGrace fill APTIX past its pressure mark (admission's estimate
// let too many small turns in); the trimmer purges the ones older than
// PressureGrace until the stream is back under the admission mark, keeps
// the unfinished work and the dead letters, and keeps completions younger
// than PressureGrace. Without relief nothing is purged and a paid turn
// could not store its result for 10 minutes.
func TestTrimmerRelievesAFullStreamOfCompletions(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	c := layout.StreamConfig{HistoryMaxBytes: 16 << 10, WorkMaxBytes: 64 << 10, CompletionGrace: time.Hour, PressureGrace: 2 * time.Second}
	if err := Provision(ctx, js, c, SubscriberConfig{}); err != nil {
		t.Fatal(err)
	}
	publishN(t, js, contracts.StageEnveloped, 5, 1000) // nobody has taken these
	publishN(t, js, contracts.StageCompleted, 66, 1000)
	for i := range 3 {
		if _, err := js.Publish(ctx, contracts.DeadPrefix+".mapper.c.d"+fmt.Sprint(i), make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	tr := NewTrimmer(js, c, quiet)
	// Within PressureGrace nothing may go yet, however full.
	if _, err := tr.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if got := subjectCounts(t, js, contracts.StreamName); got[contracts.StageCompleted] != 66 {
		t.Fatalf("completions younger than the pressure grace were purged: %v", got)
	}
	tr.now = func() time.Time { return time.Now().Add(3 * time.Second) }
	res, err := tr.Trim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := subjectCounts(t, js, contracts.StreamName)
	t.Logf("purged %d, %d -> %d bytes, left %v", res.Purged, res.BytesBefore, res.BytesAfter, got)
	if int64(res.BytesAfter) > c.AdmitBelow() {
		t.Fatalf("stream still at %d bytes, over the admission mark %d", res.BytesAfter, c.AdmitBelow())
	}
	if got[contracts.StageEnveloped] != 5 || got[contracts.StageCompleted] == 0 || got[contracts.StageCompleted] == 66 {
		t.Fatalf("after relief: %v; want the 5 unfinished events and only part of the completions", got)
	}
	s, _ := js.Stream(ctx, contracts.StreamName)
	info, _ := s.Info(ctx, jetstream.WithSubjectFilter(contracts.DeadPrefix+".>"))
	if len(info.State.Subjects) != 3 {
		t.Fatalf("dead letters purged: %d of 3 left", len(info.State.Subjects))
	}
}

// TestPublishRefusedWhenQueueFull: a client's publish into a full queue
// fails with backpressure.ErrAtCapacity, loudly; nothing already queued is dropped.
func TestPublishRefusedWhenQueueFull(t *testing.T) {
	_, js := natstest.JetStream(t)
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, js, layout.StreamConfig{QueueMaxBytes: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	accepted, refused := 0, 0
	for i := range 40 {
		err := client.Submit(ctx, js, contracts.AgentExecuteRequest{ConversationId: "c", TurnId: fmt.Sprintf("t%02d", i), Instruction: "hello there"})
		switch {
		case err == nil:
			accepted++
		case backpressure.IsAtCapacity(err):
			refused++
		default:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	got := subjectCounts(t, js, contracts.QueueStreamName)
	if refused == 0 || got[contracts.StageRequested] != uint64(accepted) {
		t.Fatalf("accepted %d, refused %d, queued %d", accepted, refused, got[contracts.StageRequested])
	}
}

// TestMigrateFromSingleStream: a deployment on the single-stream
// layout, with requests waiting and one held by a retriever that then died,
// upgrades without losing a turn; events in flight at later stages stay.
func TestMigrateFromSingleStream(t *testing.T) {
	nc, js := natstest.JetStream(t)
	ctx := context.Background()
	old := jetstream.StreamConfig{
		Name: contracts.StreamName, Subjects: []string{"aptix.requested.>", "aptix.retrieved.>", "aptix.enveloped.>", "aptix.responded.>", "aptix.completed.>", "aptix.dead.>"},
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, MaxAge: 7 * 24 * time.Hour, MaxBytes: 1 << 30, Duplicates: 10 * time.Minute,
	}
	s, err := js.CreateStream(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	sc := SubscriberConfig{AckWait: time.Second}
	for _, st := range layout.Stages {
		if _, err := s.CreateOrUpdateConsumer(ctx, ConsumerConfig(st.Name, st.In, sc)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		submitOld(t, js, fmt.Sprintf("q%d", i))
	}
	publishN(t, js, contracts.StageRetrieved, 3, 100) // in flight at the envelope
	oldRetriever, _ := s.Consumer(ctx, layout.Durable("retriever"))
	held, err := oldRetriever.Fetch(2) // an old retriever took two, then died
	if err != nil {
		t.Fatal(err)
	}
	for range held.Messages() {
	}

	runStage(t, nc, func(_ context.Context, turn *contracts.Turn) error {
		turn.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{}}
		return nil
	}, sc)
	for i := range 5 {
		next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", fmt.Sprintf("q%d", i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := js.Consumer(ctx, contracts.StreamName, layout.Durable("retriever")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old retriever consumer on APTIX was not drained and deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	env, _ := js.Consumer(ctx, contracts.StreamName, layout.Durable("envelope"))
	if info, _ := env.Info(ctx); info.NumPending != 3+5 {
		t.Fatalf("envelope has %d pending, want the 3 in flight before the upgrade and the 5 migrated turns", info.NumPending)
	}
	// The retriever acknowledges a request once its retrieved event is
	// stored: the queue drops it a moment after the event is seen.
	for {
		subs := subjectCounts(t, js, contracts.QueueStreamName)
		if subs[contracts.StageRequested] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue still holds %v", subs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitOld publishes a request as a client did on the single-stream layout.
func submitOld(t *testing.T, js jetstream.JetStream, turn string) {
	t.Helper()
	msg := &nats.Msg{Subject: contracts.Subject(contracts.StageRequested, "c1", turn), Data: []byte(`{"conversationId":"c1","turnId":"` + turn + `","instruction":"x"}`), Header: nats.Header{}}
	msg.Header.Set(contracts.HeaderMsgID, contracts.MsgID("c1", turn, contracts.StageRequested))
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownHandsBackUnstarted: events fetched but not started
// when a stage stops are handed back at once, so a restarted stage takes them
// without waiting out the 30 s AckWait.
func TestShutdownHandsBackUnstarted(t *testing.T) {
	nc, js := natstest.JetStream(t)
	sc := SubscriberConfig{AckWait: 30 * time.Second, MaxAckPending: 64, DrainTimeout: 5 * time.Second}
	slow := func(_ context.Context, turn *contracts.Turn) error {
		time.Sleep(time.Second)
		turn.Retrieval = &contracts.Retrieval{Chunks: []contracts.RagChunk{}}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- Run(ctx, nc, Stage{Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved, Handle: slow}, Options{Subscriber: sc, Logger: quiet, Ready: ready})
	}()
	<-ready
	for i := range 20 {
		submit(t, js, fmt.Sprintf("s%02d", i))
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runStage(t, nc, slow, sc)
	for i := range 20 {
		next(t, js, contracts.Subject(contracts.StageRetrieved, "c1", fmt.Sprintf("s%02d", i)))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the restarted stage needed %s: unstarted events waited for AckWait", took)
	}
}
