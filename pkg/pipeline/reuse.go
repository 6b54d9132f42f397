package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// A turn id names one request of its conversation. A client that re-sends a
// turn id in the same conversation with a different request (a script
// reusing ids, a copy-paste) must not get the old answer silently, and
// JetStream's de-duplication would otherwise drop the new request (same
// Nats-Msg-Id) or its events (same <conv>.<turn>.<stage>). The same turn id
// in another conversation is another turn (contracts.TurnKey): every record
// and id of a turn names its conversation, so it runs on its own.

// reuseMsgID gives the turn_id_reused completion its own Nats-Msg-Id (the
// turn's completed id is taken by the first request's answer), stable per
// request so a redelivery stores it once.
func reuseMsgID(conv, turnID string, req contracts.AgentExecuteRequest) string {
	j, _ := json.Marshal(req)
	sum := sha256.Sum256(j)
	return contracts.MsgID(conv, turnID, contracts.StageCompleted) + contracts.ReusedAnswerMark + hex.EncodeToString(sum[:6])
}

type expectFirstKey struct{}

// withExpectFirst marks a publish that must be the first on its subject.
func withExpectFirst(ctx context.Context, on bool) context.Context {
	if !on {
		return ctx
	}
	return context.WithValue(ctx, expectFirstKey{}, true)
}

func expectsFirst(ctx context.Context) bool {
	on, _ := ctx.Value(expectFirstKey{}).(bool)
	return on
}

// errNotFirst is a publish that had to be the first on its subject
// (withExpectFirst) and was not, or could not be checked so.
var errNotFirst = errors.New("the subject already holds an event")

// notFirst turns the server's answers to an expect-first publish into
// errNotFirst: refused for its expected last sequence (10071; 10164 from a
// replicated stream), or acknowledged as a duplicate, which a clustered
// stream checks before the expectation.
func notFirst(ack *jetstream.PubAck, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jsErrCodeWrongLastSequenceConstant) {
		return fmt.Errorf("%w: %v", errNotFirst, err)
	}
	if err == nil && ack != nil && ack.Duplicate {
		return fmt.Errorf("%w: a duplicate of event %d", errNotFirst, ack.Sequence)
	}
	return err
}

// jsErrCodeWrongLastSequenceConstant is nats-server's
// JSStreamWrongLastSequenceConstantErr, which nats.go does not name.
const jsErrCodeWrongLastSequenceConstant jetstream.ErrorCode = 10164
