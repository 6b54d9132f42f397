package caller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/pkg/redact"
	"github.com/aptix-dev/aptix/pkg/toolemu"
)

// turn is one Call in progress: its contexts, profile and stream state.
type turn struct {
	c      *Caller
	parent context.Context // the caller's ctx: its cancellation is not a final result
	prof   profiles.Profile
	docs   *bodies // the response body decoded once (body.go)
	in     Input
	log    *slog.Logger
	// red masks the profile's credentials, and anything shaped like one,
	// in the upstream's error text as it is read (scrub), so no log line,
	// result, delta, event or span after that can hold them.
	red *redact.Redactor

	seq     int               // next delta sequence number
	emitted bool              // a delta reached the sink: a retry would duplicate text
	names   map[string]fnCall // streamed function calls by item id
	final   bool              // the result is worth storing (set by Call)

	// Re-attach (reattach.go, started.go).
	bg         bool      // created in background mode: the upstream keeps the call
	prior      *Started  // the record an earlier delivery left, if any
	rec        *startLog // writes this delivery's records; nil without CallRecords
	calls      int       // upstream calls made for the turn before this one
	upID       string    // the upstream response id, once response.created named it
	createdSeq int       // the sequence number of that response.created
	upSeq      int       // seqBase + sequence number of the stream event being read (-1: none)
	seqBase    int       // added to upstream sequence numbers: lifted for a call replacing a lost one
	relayed    int       // highest upstream sequence number whose deltas were relayed (-1: none)
	skip       int       // a resumed stream relays no delta at or below this sequence number
	recorded   bool      // the record naming upID is written (waited for before the first delta)
	unchecked  bool      // the pay-once lookup was skipped (Input.FirstDelivery)
	conflict   bool      // ... and the first call record found the key taken: nothing was sent

	// Tool-call emulation (emulate.go): the parser, and the hold-back
	// filters of the streamed text parts by item id and content index.
	emu         *toolemu.Parser
	filters     map[string]*textFilter
	filterOrder []string
}

// fnCall is what response.output_item.added tells about a function call,
// since argument deltas carry only the item id.
type fnCall struct{ callID, name string }

// run fills res and reports whether it is final (worth storing for pay-once).
func (t *turn) run(res *contracts.LLMResult) (final bool) {
	turnCtx, cancel := context.WithTimeout(t.parent, t.prof.TurnTimeout)
	defer cancel()

	r, err := openRequest(t.in.Body)
	if err != nil {
		res.Error = &contracts.UpstreamError{Type: "aptix_invalid_request", Message: err.Error()}
		return true
	}
	b := r.b
	b.setStream(t.in.Stream)
	if t.prof.Capabilities.Reattach && b.setBackground() {
		t.bg = true
	}
	if t.in.Emulation != nil {
		// Built before the call: a request the parser cannot serve is not paid for.
		if t.emu, err = newParser(t.in.Emulation); err != nil {
			res.Error = &contracts.UpstreamError{Type: "aptix_invalid_request", Message: err.Error()}
			return true
		}
	}
	var input []json.RawMessage
	replay := !t.prof.Capabilities.SupportsPreviousResponseID
	if replay {
		chain := t.c.recoverySource(t.in.ConversationID, t.in.ContinuationConversation)
		if input, err = replayHistory(turnCtx, t.c.o.History, chain, b); err != nil {
			res.Error = &contracts.UpstreamError{Type: "aptix_history_missing", Message: err.Error()}
			if !errors.Is(err, errHistoryMissing) {
				res.Error.Type = "aptix_history_unavailable"
				return false // a store outage: a later delivery may succeed
			}
			return true
		}
	}
	tr, err := truncateAuto(b, t.prof.ContextWindow) // truncate.go
	if err != nil {
		res.Error = &contracts.UpstreamError{Type: "aptix_invalid_request", Message: err.Error()}
		return true
	}
	if tr.dropped > 0 {
		res.TruncatedItems = tr.dropped
		res.Warnings = append(res.Warnings, tr.note())
	}
	// The body goes as the envelope wrote it when nothing above changed
	// it; otherwise only the members changed are written anew.
	raw, err := r.encode()
	if err != nil {
		res.Error = &contracts.UpstreamError{Type: "aptix_invalid_request", Message: err.Error()}
		return true
	}

	release, err := t.c.acquire(turnCtx, t.prof)
	if err != nil {
		// Nothing was sent, so nothing was paid: not final.
		res.Error = &contracts.UpstreamError{Type: "timeout", Message: err.Error()}
		return false
	}
	defer release()

	client := t.c.client(t.prof)
	out, done := t.rejoinPrior(turnCtx, client, res)
	for attempt := 1; !done; attempt++ {
		res.Attempts = attempt
		if attempt == 1 {
			if t.recordStart(turnCtx, attempt); t.conflict {
				return false // Call looks the key up and starts again
			}
		}
		out = t.attempt(turnCtx, client, raw)
		if out.err != nil && out.retryable && t.upID != "" && t.parent.Err() == nil && turnCtx.Err() == nil {
			// The upstream has this call and keeps it: follow it, never pay again.
			if out, done = t.rejoinBroken(turnCtx, client, res); done {
				break
			}
			attempt = 0 // the lost call is replaced once, by a fresh first attempt
			continue
		}
		if out.err == nil || !out.retryable || attempt > t.prof.MaxRetries || (t.in.Stream && t.emitted) {
			break
		}
		wait := backoff(attempt, t.c.o.BaseBackoff, t.c.o.MaxBackoff)
		if out.hasWait {
			wait = out.wait
		}
		if dl, ok := turnCtx.Deadline(); ok && time.Until(dl) < wait {
			out.err.Message += fmt.Sprintf(" (not retried: the next attempt would start after the turn deadline of %s)", t.prof.TurnTimeout)
			break
		}
		t.log.Warn("LLM attempt failed; retrying", "attempt", attempt, "status", out.status,
			"type", out.err.Type, "message", out.err.Message, "wait", wait)
		if !sleepCtx(turnCtx, wait) {
			break
		}
	}
	if recoverable(out.err) && !replay && t.parent.Err() == nil && !(t.in.Stream && t.emitted) {
		if again, warning, err := recoverBody(turnCtx, t.c.recoverySource(t.in.ConversationID, t.in.ContinuationConversation), r, t.in.ConversationID); err != nil {
			t.log.Warn("backend lost the response this turn continues from; the conversation cannot be recovered", "err", err)
			out.err.Message += startOver(t.in.ConversationID)
		} else {
			t.log.Warn("backend lost the response this turn continues from; recovering from the conversation's stored events", "warning", warning)
			res.Attempts++
			if out = t.attempt(turnCtx, client, again); out.err == nil {
				res.Warnings = append(res.Warnings, warning)
			}
		}
	}
	out = t.scrub(out) // the leaves scrubbed already; this covers any path added later
	res.Status, res.Body, res.Error = out.status, out.body, out.err
	if t.parent.Err() != nil {
		return false
	}
	// A backend that threads by previous_response_id has nothing written
	// here: recovery reads the conversation's events (recover.go).
	if res.Error == nil && replay && t.c.o.History != nil {
		t.record(turnCtx, input, res.Body) // verbatim, before any rewrite
	}
	if t.emu != nil && res.Error == nil && res.Status >= 200 && res.Status <= 299 {
		t.rewrite(turnCtx, res, out.sse)
	}
	return true
}

// record stores the conversation's items (input sent + output received)
// under the new response id, for the next turn's replay.
func (t *turn) record(ctx context.Context, input []json.RawMessage, body string) {
	s, ok := t.docs.of(body)
	if !ok || s.ID == "" {
		t.log.Warn("response has no id; its history cannot be continued")
		return
	}
	items := append(append([]json.RawMessage(nil), input...), s.OutputItems()...)
	if err := t.c.o.History.Put(ctx, s.ID, items); err != nil {
		t.log.Error("storing conversation history failed; continuing from this response will fail", "response", s.ID, "err", err)
	}
}

// emit hands a delta to the sink with the next sequence number.
func (t *turn) emit(ctx context.Context, d Delta) {
	if t.upSeq >= 0 {
		if t.upSeq <= t.skip {
			return // relayed before the stream was resumed
		}
		t.relayed = max(t.relayed, t.upSeq)
		if t.bg {
			d.UpstreamSeq = t.upSeq
		}
	}
	if t.in.Deltas == nil {
		return
	}
	if t.bg && !t.recorded && t.rec != nil {
		// The record naming the upstream id is durable before any delta
		// leaves: a client never sees text of a call Aptix could not find again.
		t.recorded = true
		if err := t.rec.wait(); err != nil {
			t.log.Warn("call record not written: a crash during this call would repeat it", "err", err)
		}
	}
	d.Seq = t.seq
	t.seq++
	t.emitted = true
	t.in.Deltas.Delta(ctx, d)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
