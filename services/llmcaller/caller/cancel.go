package caller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/openai/openai-go/v3/option"

	"github.com/aptix-dev/aptix/pkg/redact"
)

// CancelUpstream stops the upstream background response of a turn's call,
// so the model stops generating and billing (a cancel of the
// turn, e.g. the gateway's, reaches the model). It reads the turn's call
// record, so it works from any replica and after a restart, and POSTs
// /responses/{id}/cancel to the profile that made the call. A Call
// following that response (here or in another process) then ends with the
// cancelled response as its result, not with a new call. It returns the
// cancelled upstream id, or "" when the turn has no recorded background
// call (no call yet, a finished one, or a backend without reattach).
func (c *Caller) CancelUpstream(ctx context.Context, turnID string) (string, error) {
	recs := c.records()
	if recs == nil {
		return "", errors.New("cancel upstream: the caller keeps no call records (Options.Results is not a CallRecords)")
	}
	res, st, _, err := recs.Lookup(ctx, turnID)
	if err != nil {
		return "", fmt.Errorf("cancel upstream of turn %s: %w", turnID, err)
	}
	if res != nil || st == nil || st.ResponseID == "" || !st.Background {
		return "", nil
	}
	prof, err := c.set.Get(st.Profile)
	if err != nil {
		return "", fmt.Errorf("cancel upstream of turn %s: %w", turnID, err)
	}
	var raw *http.Response
	client := c.client(prof)
	err = client.Post(ctx, "responses/"+url.PathEscape(st.ResponseID)+"/cancel", nil, &raw, option.WithMaxRetries(2))
	if raw == nil {
		return "", fmt.Errorf("cancel upstream response %s of turn %s: %w", st.ResponseID, turnID, err)
	}
	defer raw.Body.Close()
	b, _ := io.ReadAll(raw.Body)
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		ue := parseUpstreamError(raw.StatusCode, string(b))
		msg := redact.New(prof.Credentials()...).String(ue.Message) // as every upstream error (turn.scrub)
		return "", fmt.Errorf("cancel upstream response %s of turn %s: HTTP %d: %s", st.ResponseID, turnID, raw.StatusCode, msg)
	}
	c.log.Info("upstream response cancelled", "turn", turnID, "response", st.ResponseID, "status", statusOf(string(b)))
	return st.ResponseID, nil
}
