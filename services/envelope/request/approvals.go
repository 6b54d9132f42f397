package request

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// The approval rules: the client's mcp_approval_response items leave the
// input (the upstream never issued those requests: Aptix did), and each
// call the last turn left waiting gets a decision: approved when an item
// says approve, not approved otherwise, so every waiting call gets an output
// and the upstream sees each of its function calls answered. An item naming
// a request that is not waiting is the client's error.

// approvals decides the waiting calls from the items it is shown.
type approvals struct {
	decisions []contracts.ApprovalDecision
	taken     int
}

func newApprovals(pending []contracts.PendingApproval) *approvals {
	a := &approvals{decisions: make([]contracts.ApprovalDecision, len(pending))}
	for i, p := range pending {
		a.decisions[i] = contracts.ApprovalDecision{PendingApproval: p, Reason: "the client sent no mcp_approval_response for it"}
	}
	return a
}

// take reports whether raw is an mcp_approval_response, which leaves the
// input, and records its decision.
func (a *approvals) take(raw json.RawMessage) (bool, error) {
	if !bytes.Contains(raw, []byte("mcp_approval_response")) && !bytes.Contains(raw, []byte(`\u`)) {
		return false, nil // not even an escaped type can name one
	}
	var it struct {
		Type      string  `json:"type"`
		RequestID string  `json:"approval_request_id"`
		Approve   *bool   `json:"approve"`
		Reason    *string `json:"reason"`
	}
	if json.Unmarshal(raw, &it) != nil || it.Type != "mcp_approval_response" {
		return false, nil
	}
	a.taken++
	if it.Approve == nil {
		return true, &InvalidRequestError{Field: "input", Reason: fmt.Sprintf("mcp_approval_response for %q needs approve: true or false", it.RequestID)}
	}
	found := false
	for i := range a.decisions {
		if a.decisions[i].ID == it.RequestID {
			found = true
			a.decisions[i].Approve, a.decisions[i].Reason = *it.Approve, ""
			if it.Reason != nil {
				a.decisions[i].Reason = *it.Reason
			}
		}
	}
	if !found {
		return true, &InvalidRequestError{Field: "input", Reason: fmt.Sprintf("mcp_approval_response names approval request %q, which the response it continues does not wait for", it.RequestID)}
	}
	return true, nil
}

// result is the decisions, nil when nothing waited.
func (a *approvals) result() []contracts.ApprovalDecision {
	if len(a.decisions) == 0 {
		return nil
	}
	return a.decisions
}

// takeApprovals applies the approval rules to the body's input: only a
// client's items (Raw) can be answers.
func takeApprovals(b *Body, pending []contracts.PendingApproval) ([]contracts.ApprovalDecision, error) {
	a := newApprovals(pending)
	kept := b.Input[:0]
	for _, it := range b.Input {
		if it.Raw != nil {
			taken, err := a.take(it.Raw)
			if err != nil {
				return nil, err
			}
			if taken {
				continue
			}
		}
		kept = append(kept, it)
	}
	b.Input = kept
	return a.result(), nil
}

// TakeApprovals applies the approval rules to an encoded body's input
// (Build applies them to the body it builds, Input.Approvals) and returns
// the body without the client's answers and the decision on each waiting
// call.
func TakeApprovals(body json.RawMessage, pending []contracts.PendingApproval) (json.RawMessage, []contracts.ApprovalDecision, error) {
	if len(pending) == 0 && !bytes.Contains(body, []byte("mcp_approval_response")) && !bytes.Contains(body, []byte(`\u`)) {
		return body, nil, nil
	}
	var b map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, nil, fmt.Errorf("read the built body: %w", err)
	}
	var input []json.RawMessage
	if raw, ok := b["input"]; ok {
		if err := json.Unmarshal(raw, &input); err != nil {
			return nil, nil, fmt.Errorf("body input: %w", err)
		}
	}
	a := newApprovals(pending)
	kept := make([]json.RawMessage, 0, len(input))
	for _, raw := range input {
		taken, err := a.take(raw)
		if err != nil {
			return nil, nil, err
		}
		if !taken {
			kept = append(kept, raw)
		}
	}
	if a.taken == 0 && len(pending) == 0 {
		return body, nil, nil
	}
	var err error
	if b["input"], err = json.Marshal(kept); err != nil {
		return nil, nil, err
	}
	out, err := marshal(b)
	if err != nil {
		return nil, nil, fmt.Errorf("encode body: %w", err)
	}
	return out, a.result(), nil
}
