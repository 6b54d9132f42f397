package request

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

func TestTakeApprovals(t *testing.T) {
	pending := []contracts.PendingApproval{{ID: "mcpr_1", CallID: "call_1", Server: "calc", Tool: "add"},
		{ID: "mcpr_2", CallID: "call_2", Server: "calc", Tool: "echo"}}
	yes := `{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}`
	no := `{"type":"mcp_approval_response","approval_request_id":"mcpr_2","approve":false,"reason":"not now"}`
	msg := `{"type":"message","role":"user","content":"go on"}`
	for _, tc := range []struct {
		name     string
		input    string
		pending  []contracts.PendingApproval
		approve  []bool
		reasons  []string
		keep     int
		wantErr  string
		sameBody bool
	}{
		{name: "nothing pending, nothing sent", input: `[` + msg + `]`, sameBody: true},
		{name: "both answered", input: `[` + yes + `,` + no + `]`, pending: pending, approve: []bool{true, false}, reasons: []string{"", "not now"}},
		{name: "one unanswered is denied", input: `[` + yes + `,` + msg + `]`, pending: pending, approve: []bool{true, false},
			reasons: []string{"", "the client sent no mcp_approval_response for it"}, keep: 1},
		{name: "answer to nothing pending", input: `[` + yes + `]`, wantErr: "mcpr_1"},
		{name: "unknown request", input: `[{"type":"mcp_approval_response","approval_request_id":"mcpr_9","approve":true}]`, pending: pending, wantErr: "mcpr_9"},
		{name: "approve missing", input: `[{"type":"mcp_approval_response","approval_request_id":"mcpr_1"}]`, pending: pending, wantErr: "approve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := json.RawMessage(`{"model":"m","input":` + tc.input + `}`)
			out, ds, err := TakeApprovals(body, tc.pending)
			if tc.wantErr != "" {
				var ie *InvalidRequestError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want an invalid request naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.sameBody {
				if string(out) != string(body) || ds != nil {
					t.Fatalf("body changed: %s %v", out, ds)
				}
				return
			}
			var b struct{ Input []json.RawMessage }
			if json.Unmarshal(out, &b) != nil || len(b.Input) != tc.keep || strings.Contains(string(out), "mcp_approval_response") {
				t.Fatalf("body %s", out)
			}
			if len(ds) != len(tc.approve) {
				t.Fatalf("decisions %+v", ds)
			}
			for i := range ds {
				if ds[i].Approve != tc.approve[i] || ds[i].Reason != tc.reasons[i] || ds[i].ID != pending[i].ID {
					t.Fatalf("decision %d %+v", i, ds[i])
				}
			}
		})
	}
}
