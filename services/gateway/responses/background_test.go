package responses

import (
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TestCurrent: the status of a response derived from its turn's events and
// cancel record; a cancel recorded before the completion wins (a late
// completion never overwrites it), one recorded after it loses.
func TestCurrent(t *testing.T) {
	done := &contracts.Turn{LLM: &contracts.LLMResult{Status: 200, Body: `{"status":"completed","output":[]}`}}
	meta := Meta{ID: "resp_1", CreatedAt: 100, Background: true}
	cases := []struct {
		name   string
		st     State
		status string
	}{
		{"nothing yet", State{}, StatusQueued},
		{"retrieved", State{Stage: contracts.StageRetrieved, At: 101}, StatusQueued},
		{"started", State{Stage: contracts.StageEnveloped, At: 102, StartedAt: 102}, StatusInProgress},
		{"completed", State{Stage: contracts.StageCompleted, Turn: done, At: 105, StartedAt: 102}, StatusCompleted},
		{"cancelled while queued", State{CancelledAt: 101, CancelWins: true}, StatusCancelled},
		{"late completion after a cancel", State{Stage: contracts.StageCompleted, Turn: done, At: 109, StartedAt: 102, CancelledAt: 104, CancelWins: true}, StatusCancelled},
		{"timed out", State{Stage: contracts.StageEnveloped, At: 102, StartedAt: 102, CancelledAt: 700, CancelWins: true, CancelReason: CodeTimeout}, StatusFailed},
		{"cancel after the completion", State{Stage: contracts.StageCompleted, Turn: done, At: 105, StartedAt: 102, CancelledAt: 106}, StatusCompleted},
	}
	for _, tc := range cases {
		r := Current(meta, tc.st)
		if r.Status != tc.status || r.QueuedAt == nil || *r.QueuedAt != 100 || !r.Background {
			t.Errorf("%s: status %s queued_at %v", tc.name, r.Status, r.QueuedAt)
		}
		if (r.Status == StatusFailed) != (r.FailedAt != nil) || r.Status == StatusFailed && (r.Error == nil || r.Error.Code != CodeTimeout) {
			t.Errorf("%s: failed_at %v error %+v", tc.name, r.FailedAt, r.Error)
		}
		if (r.Status == StatusCancelled) != (r.CancelledAt != nil) {
			t.Errorf("%s: cancelled_at %v", tc.name, r.CancelledAt)
		}
		if (tc.st.StartedAt != 0 && r.Status != StatusQueued) != (r.StartedAt != nil) {
			t.Errorf("%s: started_at %v", tc.name, r.StartedAt)
		}
	}
	if r := Current(Meta{ID: "resp_2"}, State{}); r.QueuedAt != nil || r.Background {
		t.Errorf("a foreground response has no queued_at: %+v", r)
	}
}
