package contracts

import "strings"

// Replay and redrive marks: headers a replayed or retried event carries, and
// which the stage runtime copies from a stage's input to its outputs, so
// every later event of the turn carries them too.
const (
	// HeaderReplayOf names the turn a replay re-runs.
	HeaderReplayOf = "aptix-replay-of"
	// HeaderReplayContinue is "true" when the replay may update the
	// conversation's continuation record (aptix replay --continue, or a
	// replay into another conversation).
	HeaderReplayContinue = "aptix-replay-continue"
	// HeaderRedrive marks a retried dead letter (its stream sequence).
	HeaderRedrive = "aptix-redrive"
)

// ReplayUpdatesConversation reports whether an event with these
// HeaderReplayOf and HeaderReplayContinue values may write its
// conversation's continuation record: always, except for a replay that was
// not asked to continue the conversation.
func ReplayUpdatesConversation(replayOf, replayContinue string) bool {
	return replayOf == "" || replayContinue == "true"
}

// ReusedAnswerMark is in the Nats-Msg-Id of a turn_id_reused completion,
// stored on the turn's own completed subject after the turn's answer:
// readers that look for a turn's own completion skip it.
const ReusedAnswerMark = ".reused-"

// IsReusedAnswerID says whether a Nats-Msg-Id is a turn_id_reused
// completion's.
func IsReusedAnswerID(id string) bool { return strings.Contains(id, ReusedAnswerMark) }
