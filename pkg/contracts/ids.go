package contracts

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// ValidateIDs checks the conversation and turn ids that subjects are built
// from, before anything is published or subscribed on them. An id that is
// not a token would change the subject's meaning: "*" or ">" makes a
// wildcard (an error completion on aptix.completed.bad.> reaches every
// subscriber of the conversation), a dot adds tokens (no filter reads the
// event), and an empty id or whitespace makes a subject NATS rejects. It
// returns a *ValidationError naming each bad id and what is wrong with it.
func ValidateIDs(conversationID, turnID string) error {
	v := &ValidationError{}
	for _, id := range []struct{ field, value string }{{"conversationId", conversationID}, {"turnId", turnID}} {
		if why := tokenProblem(id.value); why != "" {
			v.add(id.field, "%s (ids are [A-Za-z0-9_-]{1,%d}), got %q", why, MaxIDLen, clip(id.value))
		}
	}
	if len(v.Fields) == 0 {
		return nil
	}
	return v
}

// TurnSubject returns aptix.<stage>.<conversationId>.<turnId> after checking
// the stage and both ids (ValidateIDs). Every publish or subscription on a
// turn's subject should get its subject here rather than from Subject, which
// does no checking.
func TurnSubject(stage, conversationID, turnID string) (string, error) {
	if !slices.Contains(Stages, stage) {
		return "", fmt.Errorf("unknown stage %q (want one of %s)", stage, strings.Join(Stages, ", "))
	}
	if err := ValidateIDs(conversationID, turnID); err != nil {
		return "", err
	}
	return Subject(stage, conversationID, turnID), nil
}

// tokenProblem says why s is not a subject token, or "" when it is one.
func tokenProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxIDLen:
		return fmt.Sprintf("is %d bytes, longer than %d", len(s), MaxIDLen)
	case strings.ContainsAny(s, "*>"):
		return "contains a NATS wildcard (* or >)"
	case strings.Contains(s, "."):
		return "contains a dot, which would split the subject token"
	case strings.ContainsFunc(s, unicode.IsSpace):
		return "contains whitespace"
	case !IsToken(s):
		return "contains a character outside [A-Za-z0-9_-]"
	}
	return ""
}
