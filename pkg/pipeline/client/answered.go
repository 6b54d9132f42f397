package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turnreuse"
)

// maxAnswersScanned bounds the completions Answered reads on one turn's
// subject: its own answer and the turn_id_reused answers of other requests
// sent under its id, which are few.
const maxAnswersScanned = 16

// Answered returns the stored answer of a turn req was already sent as and
// that has completed: what a client's retry (the same request under the
// same ids, after its answer was lost) gets at once. Why it is needed: a
// retry is de-duplicated (Nats-Msg-Id) or recognised by the retriever as
// the same request, so nothing completes the turn again, and a watch of new
// completions (Completions) would wait for one until its timeout. Call it
// after Submit, with the watch started before Submit: a completion stored
// before the call is found here, one stored later reaches the watch.
//
// ok is false when the turn has no answer yet, or its answer is that of
// another request sent first under the same ids (this one's answer is then
// turn_id_reused: Submit's error, or a completion the retriever publishes).
// The answer is the turn's own completion, never a turn_id_reused one
// published for another request.
func Answered(ctx context.Context, js jetstream.JetStream, req contracts.AgentExecuteRequest) (t contracts.Turn, ok bool, err error) {
	conv, turnID := req.ConversationId, req.TurnId
	if err := contracts.ValidateIDs(conv, turnID); err != nil {
		return t, false, fmt.Errorf("answered: %w", err)
	}
	key := contracts.TurnKey(conv, turnID)
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return t, false, fmt.Errorf("look up the answer of turn %s: %w", key, err)
	}
	subject := contracts.Subject(contracts.StageCompleted, conv, turnID)
	var m *jetstream.RawStreamMsg
	for seq, n := uint64(1), 0; ; n++ {
		if n == maxAnswersScanned {
			return t, false, nil
		}
		got, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return t, false, nil
		}
		if err != nil {
			return t, false, fmt.Errorf("look up the answer of turn %s: %w", key, err)
		}
		if !contracts.IsReusedAnswerID(got.Header.Get(contracts.HeaderMsgID)) {
			m = got
			break
		}
		seq = got.Sequence + 1
	}
	data, err := claim.EventData(ctx, js, m.Header, m.Data)
	if err != nil {
		return t, false, fmt.Errorf("%w: turn %s: %w", ErrUnreadableCompletion, key, err)
	}
	if err := turncodec.Unmarshal(data, &t); err != nil {
		return t, false, fmt.Errorf("%w: turn %s: %w", ErrUnreadableCompletion, key, err)
	}
	// The answer is this request's only if the turn was first sent as it.
	first, err := firstRequest(ctx, js, conv, turnID)
	if err != nil {
		return t, false, fmt.Errorf("look up the request of turn %s: %w", key, err)
	}
	if first == nil {
		first = &t.Request // its records trimmed: the completion's copy
	}
	if !turnreuse.SameRequest(*first, req) {
		return contracts.Turn{}, false, nil
	}
	return t, true, nil
}
