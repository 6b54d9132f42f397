package responses

import (
	"github.com/aptix-dev/aptix/pkg/contracts"
)

// State is what the bus says about a response's turn, gathered by the
// adapter: the latest stage event (and the turn it carries), when the LLM
// caller got the turn, and the cancel record. Status is derived from it on
// every read (docs/http-api.md#status), never stored, so it cannot go stale.
type State struct {
	// Stage is the turn's latest stored stage event ("" for none yet).
	Stage string
	// Turn is that event's turn document (nil when Stage is "").
	Turn *contracts.Turn
	// At is that event's time (Unix seconds).
	At int64
	// StartedAt is when the LLM caller had the turn (its enveloped event;
	// 0 before).
	StartedAt int64
	// CancelledAt is when the turn was cancelled (0 if never). A cancel
	// recorded before the completion wins over it: a late completion never
	// overwrites a cancel.
	CancelledAt int64
	// CancelWins: the cancel was recorded before the turn completed (or it
	// has not completed).
	CancelWins bool
	// CancelReason is the cancel record's reason: "cancelled" (a client),
	// or "timeout" (a background response past its time limit: failed).
	CancelReason string
}

// CodeTimeout is the error code of a background response that ran past
// APTIX_BACKGROUND_TIMEOUT.
const CodeTimeout = "timeout"

// Current is the response object for st: cancelled when a cancel won,
// the completed turn's response, or queued / in_progress while it runs,
// with the seed's lifecycle times on a background response.
func Current(meta Meta, st State) Response {
	var r Response
	switch {
	case st.CancelledAt != 0 && st.CancelWins && st.CancelReason == CodeTimeout:
		r = Pending(meta, StatusFailed)
		at := st.CancelledAt
		r.FailedAt = &at
		r.Error = &ResponseError{Code: CodeTimeout, Message: "The background response ran past its time limit and was stopped."}
		r.Usage = &Usage{}
	case st.CancelledAt != 0 && st.CancelWins:
		r = Pending(meta, StatusCancelled)
		at := st.CancelledAt
		r.CancelledAt = &at
	case st.Stage == contracts.StageCompleted && st.Turn != nil:
		r = FromTurn(meta, st.Turn, st.At)
		if r.Status == StatusFailed {
			at := st.At
			r.FailedAt = &at
		}
	case st.StartedAt != 0:
		r = Pending(meta, StatusInProgress)
	default:
		r = Pending(meta, StatusOf(st.Stage))
	}
	if meta.Background {
		r.Background = true
		queued := meta.CreatedAt
		r.QueuedAt = &queued
		if st.StartedAt != 0 && r.Status != StatusQueued {
			started := st.StartedAt
			r.StartedAt = &started
		}
	}
	return r
}

// Terminal reports whether status is final: nothing changes it any more.
func Terminal(status string) bool {
	switch status {
	case StatusCompleted, StatusIncomplete, StatusFailed, StatusCancelled:
		return true
	}
	return false
}
