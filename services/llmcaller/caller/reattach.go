package caller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Re-attach (docs/reliability.md#re-attach, capability reattach). A call in background mode
// keeps running upstream when the caller goes away, so when the connection
// breaks mid-stream, or the process dies and the turn is redelivered, the
// caller follows the response it already paid for instead of creating
// another: it resumes the event stream with
// GET /responses/{id}?stream=true&starting_after=<response.created's
// sequence number>, or, where the stream cannot be had, reads the response
// with GET until it is terminal. The stream is replayed from its start
// rather than from the last relayed event because the turn's stream state
// (function call names, tool-emulation hold-back) is rebuilt from it; the
// deltas already relayed are not relayed again (emit skips them by sequence
// number). Only when the upstream no longer has the response (404:
// expired or deleted) or it failed upstream is the model called again,
// once, and the result says so in its warnings. A response cancelled
// upstream is the turn's result: a cancel is a decision (CancelUpstream),
// not a loss.

// Stats counts what happened to interrupted calls, for the metrics.
type Stats struct {
	// Reattached: redelivered turns that followed the call an earlier
	// delivery had started, instead of calling again.
	Reattached int64 `json:"reattached"`
	// Resumed: calls whose stream broke and were resumed, not repeated.
	Resumed int64 `json:"resumed"`
	// Repeated: calls made again after an interruption because the backend
	// cannot re-attach (or the first call's id never arrived): the model
	// may have been paid twice.
	Repeated int64 `json:"repeated"`
	// Lost: re-attaches that found the upstream response gone, so the model
	// was called again.
	Lost int64 `json:"lost"`
}

type counters struct{ reattached, resumed, repeated, lost atomic.Int64 }

// Stats returns the re-attach counters since the Caller was made.
func (c *Caller) Stats() Stats {
	return Stats{Reattached: c.stats.reattached.Load(), Resumed: c.stats.resumed.Load(),
		Repeated: c.stats.repeated.Load(), Lost: c.stats.lost.Load()}
}

// notStreamable marks a resume the backend answered without a stream.
const notStreamable = "aptix_not_streamable"

// pollStart and pollMax pace the GET polling of a response whose stream
// cannot be resumed.
const (
	pollStart = 200 * time.Millisecond
	pollMax   = 2 * time.Second
)

// recordStart writes the record that this delivery is sending a call, and
// waits until it is stored, so that a crash from here on is never a silent
// repeat. (Written in the background, it lost the race with the request:
// the crash test found 29 of 200 cut-off calls repeated without a record.)
func (t *turn) recordStart(ctx context.Context, attempt int) {
	if t.rec == nil {
		return
	}
	t.rec.write(ctx, t.startedRecord(attempt))
	if err := t.rec.wait(); err != nil {
		if t.unchecked && t.prior == nil && errors.Is(err, ErrRecordChanged) {
			t.conflict = true // the skipped lookup is made before anything is sent
			return
		}
		t.log.Warn("call record not written: a crash during this call would repeat it silently", "err", err)
	}
}

func (t *turn) startedRecord(attempt int) Started {
	return Started{TurnID: t.in.TurnID, Call: t.calls + 1, Attempt: attempt, Profile: t.prof.Name, BaseURL: t.prof.BaseURL,
		Background: t.bg, ResponseID: t.upID, CreatedSeq: t.createdSeq, SeqBase: t.seqBase, At: time.Now().UTC()}
}

// created handles response.created: the upstream has named the call's id.
// The record naming it is written at once; emit waits for it before the
// first delta.
func (t *turn) created(ctx context.Context, resp json.RawMessage, seq int) {
	if !t.bg || t.upID != "" {
		return
	}
	var r struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(resp, &r) != nil || r.ID == "" {
		return
	}
	t.upID, t.createdSeq = r.ID, max(seq, 0)
	if t.rec != nil {
		t.rec.write(ctx, t.startedRecord(1))
	}
}

// rejoinPrior handles a turn an earlier delivery had started a call for.
// It reports done when the result is had without a new call.
func (t *turn) rejoinPrior(turnCtx context.Context, client openai.Client, res *contracts.LLMResult) (outcome, bool) {
	p := t.prior
	if p == nil {
		return outcome{}, false
	}
	t.calls = p.Call
	if p.ResponseID != "" && p.Background && t.bg && p.BaseURL == t.prof.BaseURL {
		t.upID, t.createdSeq, t.seqBase = p.ResponseID, p.CreatedSeq, p.SeqBase
		t.c.stats.reattached.Add(1)
		t.log.Info("re-attaching to the upstream response an earlier delivery started", "response", p.ResponseID, "call", p.Call)
		res.Attempts = 1
		out, lost := t.rejoin(turnCtx, client)
		if lost == "" {
			return out, true
		}
		t.replaced(res, lost)
		return outcome{}, false
	}
	t.c.stats.repeated.Add(1)
	why := fmt.Sprintf("backend profile %q cannot re-attach to a call (capability reattach off)", t.prof.Name)
	switch {
	case t.prof.ChatCompletions():
		why = fmt.Sprintf("backend profile %q speaks Chat Completions, which has no background mode to re-attach to", t.prof.Name)
	case t.bg && p.ResponseID != "":
		why = fmt.Sprintf("the earlier call went to another backend (%s %s)", p.Profile, p.BaseURL)
	case t.bg:
		why = "the interruption came before the backend named its response"
	}
	msg := fmt.Sprintf("this turn's upstream call (call %d, started %s) was interrupted before its result was stored; Aptix called the model again, so this turn may have been paid for twice: %s",
		p.Call, p.At.Format(time.RFC3339), why)
	t.log.Warn("repeating an interrupted upstream call", "call", p.Call, "reason", why)
	res.Warnings = append(res.Warnings, msg)
	return outcome{}, false
}

// rejoinBroken follows a call whose stream broke in this delivery. It
// reports done unless the upstream lost the call and it should be made
// again (once per turn).
func (t *turn) rejoinBroken(turnCtx context.Context, client openai.Client, res *contracts.LLMResult) (outcome, bool) {
	t.c.stats.resumed.Add(1)
	t.log.Info("stream broke; resuming the upstream response", "response", t.upID, "relayed", t.relayed)
	out, lost := t.rejoin(turnCtx, client)
	if lost == "" || t.calls > 0 || t.parent.Err() != nil {
		return out, true
	}
	t.calls++
	t.replaced(res, lost)
	return out, false
}

// replaced notes that the call behind upID is gone and a new one is made.
func (t *turn) replaced(res *contracts.LLMResult, lost string) {
	t.c.stats.lost.Add(1)
	msg := fmt.Sprintf("the upstream response %s of this turn's interrupted call is gone (%s); Aptix called the model again, so this turn was paid for twice", t.upID, lost)
	t.log.Warn("upstream lost the call; calling again", "response", t.upID, "reason", lost)
	res.Warnings = append(res.Warnings, msg)
	// The new call's deltas are all new: none is skipped, and their upstream
	// sequence numbers are lifted above anything the lost call can have
	// relayed (after a crash this process does not know how far it got), so
	// a client dropping repeats keeps them.
	t.upID, t.createdSeq = "", 0
	t.skip, t.seqBase = -1, t.seqBase+replacedSeqBase
}

// replacedSeqBase lifts the upstream sequence numbers of a call that
// replaces a lost one: no response streams a million events.
const replacedSeqBase = 1 << 20

// rejoin follows t.upID to its end. lost is non-empty when the upstream no
// longer has the response, or it ended failed.
func (t *turn) rejoin(turnCtx context.Context, client openai.Client) (out outcome, lost string) {
	for try := 1; ; try++ {
		t.skip = t.relayed
		out = t.resume(turnCtx, client)
		if out.err == nil {
			if statusOf(out.body) == "failed" {
				return out, "it ended failed upstream"
			}
			return out, "" // completed, incomplete, or cancelled on purpose (CancelUpstream)
		}
		if t.parent.Err() != nil || turnCtx.Err() != nil || out.err.Code == CodeResponseTooLarge {
			return out, "" // too large: read again, it would be as large
		}
		if out.status == http.StatusNotFound {
			return out, "not found upstream (404): expired or deleted"
		}
		if out.err.Type == notStreamable || out.status >= 400 && out.status < 500 && !retryableStatus(out.status) {
			// The stream is not kept (or GET cannot stream): read the response.
			return t.poll(turnCtx, client)
		}
		// A broken resume, or the stream ended early (a cancel upstream
		// ends it without a terminal event): has the response ended?
		if got, status, ok := t.fetch(turnCtx, client); ok && terminal(status) {
			return t.ended(got, status)
		} else if got.status == http.StatusNotFound {
			return got, "not found upstream (404): expired or deleted"
		} else if got.err != nil && got.err.Code == CodeResponseTooLarge {
			return got, ""
		}
		if try > max(t.prof.MaxRetries, 1) {
			return out, ""
		}
		wait := backoff(try, t.c.o.BaseBackoff, t.c.o.MaxBackoff)
		if out.hasWait {
			wait = out.wait
		}
		if !sleepCtx(turnCtx, wait) {
			return out, ""
		}
	}
}

// ended turns a terminal response read with GET into the outcome.
func (t *turn) ended(got outcome, status string) (outcome, string) {
	if status == "failed" {
		return got, "it ended failed upstream"
	}
	if t.in.Stream && t.relayed < 0 && t.emu == nil {
		t.emitWhole(t.parent, []byte(got.body))
	}
	return got, ""
}

// poll reads the response with GET until it is terminal.
func (t *turn) poll(turnCtx context.Context, client openai.Client) (outcome, string) {
	wait := pollStart
	for {
		got, status, ok := t.fetch(turnCtx, client)
		switch {
		case ok && terminal(status):
			return t.ended(got, status)
		case got.status == http.StatusNotFound:
			return got, "not found upstream (404): expired or deleted"
		case !ok && !got.retryable:
			return got, ""
		}
		if !sleepCtx(turnCtx, wait) {
			if got.err == nil {
				got = t.transportFailure(turnCtx, turnCtx, fmt.Errorf("waiting for upstream response %s (status %s): %w", t.upID, status, turnCtx.Err()))
			}
			return got, ""
		}
		wait = min(2*wait, pollMax)
	}
}

// resume opens the response's event stream after response.created and reads it.
func (t *turn) resume(turnCtx context.Context, client openai.Client) outcome {
	actx, cancel := context.WithTimeout(turnCtx, t.prof.AttemptTimeout)
	defer cancel()
	var raw *http.Response
	err := client.Get(actx, "responses/"+url.PathEscape(t.upID), nil, &raw, option.WithMaxRetries(0),
		option.WithQuery("stream", "true"), option.WithQuery("starting_after", strconv.Itoa(t.createdSeq)),
		option.WithHeader("Accept", "text/event-stream"))
	if raw == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return t.transportFailure(turnCtx, actx, fmt.Errorf("resuming upstream response %s: %w", t.upID, err))
	}
	defer raw.Body.Close()
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		return t.errorOutcome(raw)
	}
	if isEventStream(raw.Header) {
		return t.readStream(turnCtx, actx, cancel, raw)
	}
	b, err := io.ReadAll(raw.Body)
	if err != nil {
		return t.transportFailure(turnCtx, actx, fmt.Errorf("reading upstream response %s: %w", t.upID, err))
	}
	if s := statusOf(string(b)); terminal(s) {
		return outcome{status: raw.StatusCode, body: string(b)}
	}
	// The backend ignored stream=true on GET: poll it instead.
	return outcome{status: raw.StatusCode, err: &contracts.UpstreamError{Type: notStreamable,
		Message: "upstream answered the stream resume with JSON of an unfinished response"}}
}

// fetch reads the response with GET once; ok when it got a response object.
func (t *turn) fetch(turnCtx context.Context, client openai.Client) (outcome, string, bool) {
	actx, cancel := context.WithTimeout(turnCtx, t.prof.AttemptTimeout)
	defer cancel()
	var raw *http.Response
	err := client.Get(actx, "responses/"+url.PathEscape(t.upID), nil, &raw, option.WithMaxRetries(0))
	if raw == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return t.transportFailure(turnCtx, actx, fmt.Errorf("reading upstream response %s: %w", t.upID, err)), "", false
	}
	defer raw.Body.Close()
	if raw.StatusCode < 200 || raw.StatusCode > 299 {
		return t.errorOutcome(raw), "", false
	}
	b, err := io.ReadAll(raw.Body)
	if err != nil {
		return t.transportFailure(turnCtx, actx, fmt.Errorf("reading upstream response %s: %w", t.upID, err)), "", false
	}
	s := statusOf(string(b))
	return outcome{status: raw.StatusCode, body: string(b)}, s, s != ""
}

func statusOf(body string) string {
	var r struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal([]byte(body), &r)
	return r.Status
}

func terminal(status string) bool {
	switch status {
	case "completed", "incomplete", "failed", "cancelled":
		return true
	}
	return false
}
