package contracts

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Stage names, in pipeline order. Each is also the second token of its subject.
const (
	StageRequested = "requested"
	StageRetrieved = "retrieved"
	StageEnveloped = "enveloped"
	StageResponded = "responded"
	StageCompleted = "completed"
)

// Stages lists the event stages in order.
var Stages = []string{StageRequested, StageRetrieved, StageEnveloped, StageResponded, StageCompleted}

// Stream and subject layout (docs/architecture.md#streams-and-stores). Work is not history:
// clients publish into QueueStreamName, a work queue with a hard cap that
// refuses new turns when full; every later event lives in StreamName, whose
// history is trimmed by age and size but never below what a stage has not
// finished (pkg/pipeline's trimmer).
const (
	StreamName = "APTIX"
	// QueueStreamName holds aptix.requested.> until the retriever takes it.
	QueueStreamName = "APTIX_QUEUE"
	SubjectPrefix   = "aptix"
	// DeadPrefix + "." + stage receives events a stage gave up on.
	DeadPrefix = "aptix.dead"
	// DeltaPrefix + ".<conversationId>.<turnId>" carries streaming deltas (core NATS, not stored).
	DeltaPrefix = "aptix.delta"
)

// StreamSubjects are the subjects the APTIX stream stores: every stage's
// events after the request, and the dead letters. Requests are in the queue
// stream (QueueSubjects); the request itself is recorded in every later
// event's Turn. Deltas (aptix.delta.>) are deliberately not stored: they are
// a live view, and the final text is in the completed event.
func StreamSubjects() []string {
	subjects := make([]string, 0, len(Stages))
	for _, s := range Stages[1:] {
		subjects = append(subjects, StageFilter(s))
	}
	return append(subjects, StageFilter(StageToolRound), DeadPrefix+".>")
}

// ClaimBucket is the object store of events too big to publish (claim check).
const ClaimBucket = "aptix_events"

// QueueKeeperSubject holds one small message no consumer takes, so the
// work queue's newest storage block is never left empty: nats-server
// replaces an emptied last block with a new file, which cost as much CPU as
// the rest of a request's queueing (pkg/pipeline/keeper.go).
const QueueKeeperSubject = SubjectPrefix + ".queue.keeper"

// QueueSubjects are the subjects of the queue stream: the client's requests
// and the keeper.
func QueueSubjects() []string { return []string{StageFilter(StageRequested), QueueKeeperSubject} }

// StreamOf names the stream that stores a stage's events.
func StreamOf(stage string) string {
	if stage == StageRequested {
		return QueueStreamName
	}
	return StreamName
}

// Subject returns aptix.<stage>.<conversationId>.<turnId>.
func Subject(stage, conversationID, turnID string) string {
	return SubjectPrefix + "." + stage + "." + conversationID + "." + turnID
}

// StageFilter returns the subject filter a stage consumer uses: aptix.<stage>.>.
func StageFilter(stage string) string { return SubjectPrefix + "." + stage + ".>" }

// TurnFilter returns the filter of one turn's events in every stage,
// aptix.*.<conversationId>.<turnId>: a turn's first event is stored only
// while it matches nothing, whichever entry point the turn takes
// (docs/architecture.md#entry-points), so a turn id used before is
// noticed at any of them.
func TurnFilter(conversationID, turnID string) string {
	return SubjectPrefix + ".*." + conversationID + "." + turnID
}

// ConversationFilter returns the filter of one conversation's full history, all stages.
func ConversationFilter(conversationID string) string {
	return SubjectPrefix + ".*." + conversationID + ".>"
}

// DeadSubject returns aptix.dead.<stage>.
func DeadSubject(stage string) string { return DeadPrefix + "." + stage }

// DeltaSubject returns aptix.delta.<conversationId>.<turnId>.
func DeltaSubject(conversationID, turnID string) string {
	return DeltaPrefix + "." + conversationID + "." + turnID
}

// ParseSubject splits aptix.<stage>.<conv>.<turn>; ok is false for any other shape.
func ParseSubject(subject string) (stage, conversationID, turnID string, ok bool) {
	parts := strings.Split(subject, ".")
	if len(parts) != 4 || parts[0] != SubjectPrefix {
		return "", "", "", false
	}
	return parts[1], parts[2], parts[3], true
}

// TurnKey is a turn's identity wherever Aptix keys a record or an id by
// turn: "<conversationId>.<turnId>". Clients choose turn ids, so a turn id
// alone identifies nothing: two conversations (of one principal or two) may
// both use it, and a record keyed by it alone (a paid LLM result, a cancel,
// a de-duplicated event) would answer or stop one turn with the other's.
// Ids are [A-Za-z0-9_-] (ValidateIDs), so the dot cannot occur in either
// and the key is unambiguous; it is a valid KV key and Nats-Msg-Id. The key
// of every per-turn record is built here, never from the turn id alone
// (docs/security.md).
func TurnKey(conversationID, turnID string) string { return conversationID + "." + turnID }

// MsgID is the Nats-Msg-Id of a turn's event at a stage,
// "<conversationId>.<turnId>.<stage>", so a re-published event is
// de-duplicated by JetStream and another conversation's turn of the same id
// is not.
func MsgID(conversationID, turnID, stage string) string {
	return TurnKey(conversationID, turnID) + "." + stage
}

// Header names. NATS headers are case-sensitive; these are lowercase on purpose.
const (
	HeaderTraceparent    = "traceparent"
	HeaderTracestate     = "tracestate"
	HeaderBaggage        = "baggage"
	HeaderCESpecVersion  = "ce-specversion"
	HeaderCEID           = "ce-id"
	HeaderCEType         = "ce-type"
	HeaderCESource       = "ce-source"
	HeaderCETime         = "ce-time"
	HeaderCEContentType  = "ce-datacontenttype"
	HeaderMsgID          = "Nats-Msg-Id"
	HeaderDeadReason     = "aptix-dead-reason"
	HeaderDeadStage      = "aptix-dead-stage"
	HeaderDeadSubject    = "aptix-dead-subject"
	HeaderDeadDeliveries = "aptix-dead-deliveries"
	// HeaderClaim names the object (in ClaimBucket) that holds an event too
	// big for a NATS message; the message's own payload is then a stub.
	HeaderClaim = "aptix-claim"
	// HeaderSkipped is on a turn's first stored event when it entered the
	// pipeline past stages it did not need (the topology's entry points,
	// layout.Entries): the skipped stages' names, comma-separated, e.g.
	// "retriever" on the retrieved event of a turn with no retrieval. The
	// event's ce-source says who wrote it; no event of a skipped stage exists.
	HeaderSkipped       = "aptix-skipped"
	CESpecVersion       = "1.0"
	CEContentTypeJSON   = "application/json"
	CETypePrefix        = "dev.aptix.turn."
	CETypeVersionSuffix = ".v1"
)

// CEType returns the CloudEvents type of a stage's event, e.g. dev.aptix.turn.requested.v1.
func CEType(stage string) string { return CETypePrefix + stage + CETypeVersionSuffix }

// TurnConversation names the conversation a turn sent without one starts
// (`aptix exec --turn`, /v1/aptix/execute with a turnId alone): "c-" and
// the turn id, so a re-send of the turn (a retry after a lost answer) names
// the same turn and gets its answer, where a random conversation would make
// it another turn, run and paid again. A turn id too long to leave room
// for the gateway's per-principal prefix is hashed.
func TurnConversation(turnID string) string {
	if len(turnID) <= turnConversationMax {
		return "c-" + turnID
	}
	h := sha256.Sum256([]byte(turnID))
	return "c-" + hex.EncodeToString(h[:16])
}

// turnConversationMax is the longest turn id TurnConversation keeps as it
// is: "c-" and it, with a 15-character principal prefix, fit MaxIDLen.
const turnConversationMax = 96
