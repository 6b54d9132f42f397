package contracts

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
