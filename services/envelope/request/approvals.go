package request

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// TakeApprovals takes the client's mcp_approval_response items out of a
// built body's input (the upstream never issued those requests: Aptix did)
// and returns its decision on each call the last turn left waiting: approved
// when an item says approve, not approved otherwise, so every waiting call
// gets an output and the upstream sees each of its function calls answered.
// An item naming a request that is not waiting is the client's error.
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
	decisions := make([]contracts.ApprovalDecision, len(pending))
	for i, p := range pending {
		decisions[i] = contracts.ApprovalDecision{PendingApproval: p, Reason: "the client sent no mcp_approval_response for it"}
	}
	kept := make([]json.RawMessage, 0, len(input))
	taken := 0
	for _, raw := range input {
		var it struct {
			Type      string  `json:"type"`
			RequestID string  `json:"approval_request_id"`
			Approve   *bool   `json:"approve"`
			Reason    *string `json:"reason"`
		}
		if json.Unmarshal(raw, &it) != nil || it.Type != "mcp_approval_response" {
			kept = append(kept, raw)
			continue
		}
		taken++
		if it.Approve == nil {
			return nil, nil, &InvalidRequestError{Field: "input", Reason: fmt.Sprintf("mcp_approval_response for %q needs approve: true or false", it.RequestID)}
		}
		found := false
		for i := range decisions {
			if decisions[i].ID == it.RequestID {
				found = true
				decisions[i].Approve, decisions[i].Reason = *it.Approve, ""
				if it.Reason != nil {
					decisions[i].Reason = *it.Reason
				}
			}
		}
		if !found {
			return nil, nil, &InvalidRequestError{Field: "input", Reason: fmt.Sprintf("mcp_approval_response names approval request %q, which the response it continues does not wait for", it.RequestID)}
		}
	}
	if taken == 0 && len(pending) == 0 {
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
	return out, decisions, nil
}
