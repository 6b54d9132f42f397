package application

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/services/gateway/responses"
)

// state gathers what the bus says about meta's turn (responses.State): its
// latest stage event, when the LLM caller got it, and the cancel record.
// One KV get and at most two direct gets beyond the latest event.
func (a *App) state(ctx context.Context, meta *responses.Meta) (responses.State, error) {
	var st responses.State
	cancelAt, reason, cancelled, err := a.cancels.Reason(ctx, meta.ConversationID, meta.TurnID)
	if err != nil {
		return st, err
	}
	stage, t, at, err := a.turnAt(ctx, meta.ConversationID, meta.TurnID)
	if err != nil {
		return st, err
	}
	st.Stage, st.Turn = stage, t
	if stage != "" {
		st.At = at.Unix()
	}
	if cancelled {
		st.CancelledAt, st.CancelReason = cancelAt.Unix(), reason
		st.CancelWins = stage != contracts.StageCompleted || cancelAt.Before(at)
	}
	if stage == contracts.StageEnveloped || stage == contracts.StageResponded || stage == contracts.StageCompleted {
		m, err := a.stream.GetLastMsgForSubject(ctx, contracts.Subject(contracts.StageEnveloped, meta.ConversationID, meta.TurnID))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return st, fmt.Errorf("read enveloped event of %s: %w", meta.TurnID, err)
		case cancelled && !m.Time.Before(cancelAt):
			// Cancelled while queued: the model never had it.
		default:
			st.StartedAt = m.Time.Unix()
		}
	}
	return st, nil
}

// current is meta's response object as of now.
func (a *App) current(ctx context.Context, meta *responses.Meta) (responses.Response, error) {
	st, err := a.state(ctx, meta)
	if err != nil {
		return responses.Response{}, err
	}
	r := responses.Current(*meta, st)
	if r.Metadata["webhook_url"] != "" && responses.Terminal(r.Status) {
		r.Webhook = a.webhookStatus(ctx, meta.ID)
	}
	return r, nil
}

// completedResponse is meta's response as its completion m says: the
// completion in hand stands in for the stored one when that is no longer
// readable (trimmed from history), so a webhook never reports a terminal
// response as queued.
func (a *App) completedResponse(ctx context.Context, meta *responses.Meta, m jetstream.Msg) (responses.Response, error) {
	st, err := a.state(ctx, meta)
	if err != nil {
		return responses.Response{}, err
	}
	if st.Stage != contracts.StageCompleted || st.Turn == nil {
		data, err := claim.EventData(ctx, a.js, m.Headers(), m.Data())
		if err != nil {
			return responses.Response{}, fmt.Errorf("read completion of %s: %w", meta.TurnID, err)
		}
		var t contracts.Turn
		if err := json.Unmarshal(data, &t); err != nil {
			return responses.Response{}, fmt.Errorf("decode completion of %s: %w", meta.TurnID, err)
		}
		at := time.Now()
		if md, err := m.Metadata(); err == nil {
			at = md.Timestamp
		}
		st.Stage, st.Turn, st.At = contracts.StageCompleted, &t, at.Unix()
		if st.CancelledAt != 0 {
			st.CancelWins = st.CancelledAt < at.Unix()
		}
	}
	r := responses.Current(*meta, st)
	if r.Metadata["webhook_url"] != "" && responses.Terminal(r.Status) {
		r.Webhook = a.webhookStatus(ctx, meta.ID)
	}
	return r, nil
}

// cancelMeta cancels meta's turn unless it is terminal, and returns the
// response as it then stands (derived again: a completion stored before
// the cancel record wins over it, and the answer says so).
func (a *App) cancelMeta(ctx context.Context, meta *responses.Meta) (responses.Response, error) {
	resp, err := a.current(ctx, meta)
	if err != nil || responses.Terminal(resp.Status) {
		return resp, err
	}
	if _, err := a.cancels.Cancel(ctx, meta.ConversationID, meta.TurnID); err != nil {
		return resp, err
	}
	return a.current(ctx, meta)
}
