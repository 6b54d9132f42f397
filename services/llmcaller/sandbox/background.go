package sandbox

import (
	"bytes"
	"context"
	json "github.com/go-json-experiment/json/v1"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Background responses, as OpenAI serves them: POST /v1/responses with
// "background": true (and store not false) answers at once with a queued
// response and generates it in a goroutine that outlives the request, so a
// client that drops its connection, or crashes, loses nothing. Later it can
// read the response with GET /v1/responses/{id}, resume its event stream
// with GET /v1/responses/{id}?stream=true&starting_after=N (the stored
// events after N, then the live ones), or stop it with
// POST /v1/responses/{id}/cancel. This is what lets the LLM caller re-attach
// to a call a crash cut off instead of paying for it twice (docs/reliability.md#re-attach).
//
// Latency and faults apply: a fault that answers the POST (a status, drop,
// malformed) answers it before anything is created; stream-error fails the
// response after response.created; latency is spent generating, a share
// before response.in_progress and the rest spread over the deltas, so a
// client that goes away mid-stream has seen part of the text, as with a
// real model.

// Counts are what the sandbox counts beyond requests: created responses
// apart from reads, so a test counts what the model was paid for.
type Counts struct {
	// Created is the number of responses created by POST /v1/responses
	// (background or not, faulted requests excluded).
	Created int64 `json:"created"`
	// Background is how many of them were background responses.
	Background int64 `json:"background"`
	// Reads is the number of GET /v1/responses/{id} (streamed or not).
	Reads int64 `json:"reads"`
	// Resumes is how many of those reads streamed events (?stream=true).
	Resumes int64 `json:"resumes"`
	// Cancels is the number of POST /v1/responses/{id}/cancel that stopped
	// a response still running.
	Cancels int64 `json:"cancels"`
}

// background holds the background responses and the counters.
type background struct {
	created, background, reads, resumes, cancels atomic.Int64

	mu    sync.Mutex
	jobs  map[string]*job
	order []string // job ids, oldest first, bounded by keepResponses
}

func (b *background) counts() Counts {
	return Counts{Created: b.created.Load(), Background: b.background.Load(), Reads: b.reads.Load(),
		Resumes: b.resumes.Load(), Cancels: b.cancels.Load()}
}

func (b *background) add(id string, j *job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.jobs == nil {
		b.jobs = map[string]*job{}
	}
	b.jobs[id] = j
	b.order = append(b.order, id)
	if len(b.order) <= keepJobs {
		return
	}
	// Forget the oldest finished jobs (running ones stay): their responses
	// are still stored for GET and previous_response_id, only their events
	// go, as OpenAI's do after a while (a resume then gets a 400).
	kept := b.order[:0]
	for i, oid := range b.order {
		if len(b.order)-i+len(kept) > keepJobs && b.jobs[oid].finished() {
			delete(b.jobs, oid)
			continue
		}
		kept = append(kept, oid)
	}
	b.order = kept
}

// keepJobs bounds the background responses whose events are kept for
// resumption (each holds its whole event stream, a few KB to tens of KB).
const keepJobs = 2000

func (j *job) finished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done
}

func (b *background) get(id string) *job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.jobs[id]
}

// job is one background response: the object GET returns now and every
// event it has emitted (index = sequence_number), kept so any reader can
// resume from any point.
type job struct {
	ctx    context.Context // cancelled by POST …/cancel
	cancel context.CancelFunc
	pace   time.Duration // wait before each delta

	mu       sync.Mutex
	snap     response
	events   []sseEvent
	wake     chan struct{} // closed and replaced whenever events grow or the job ends
	terminal bool          // the terminal event was emitted
	done     bool
}

type sseEvent struct {
	typ  string
	data []byte
}

// emit implements emitter: it records the event with the next sequence
// number and wakes every reader. Once the job is cancelled nothing more is
// emitted, so a cancelled stream never ends in response.completed.
func (j *job) emit(typ string, fields map[string]any) {
	if typ == "response.output_text.delta" || typ == "response.function_call_arguments.delta" {
		sleep(j.ctx, j.pace)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ctx.Err() != nil || j.done {
		return
	}
	fields["type"] = typ
	fields["sequence_number"] = len(j.events)
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	j.events = append(j.events, sseEvent{typ: typ, data: b})
	switch typ {
	case "response.in_progress":
		j.snap.Status = "in_progress"
	case "response.completed", "response.incomplete", "response.failed":
		j.terminal = true
	}
	j.wakeAll()
}

func (j *job) wakeAll() {
	close(j.wake)
	j.wake = make(chan struct{})
}

// snapshot returns the response object as it is now.
func (j *job) snapshot() response {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snap
}

// wantsBackground peeks at a body for "background": true, so admit can leave
// a background response's latency to the generation instead of the POST.
func wantsBackground(body []byte) bool {
	if !bytes.Contains(body, []byte(`"background"`)) {
		return false
	}
	var b struct {
		Background bool `json:"background"`
	}
	return json.Unmarshal(body, &b) == nil && b.Background
}

// startBackground creates a background response and answers with it: the
// queued object, or (stream) its events as they come.
func (s *Server) startBackground(w http.ResponseWriter, r *http.Request, req request, items []entry, f fault) error {
	if req.Store != nil && !*req.Store {
		return invalid("background", "", "Background mode requires store to be true: a background response must be stored so it can be retrieved.")
	}
	resp, chain, err := s.answer(req, items)
	if err != nil {
		return err
	}
	resp.Background = true
	resp.finishAt(time.Now().Add(f.latency))
	s.bg.created.Add(1)
	s.bg.background.Add(1)

	ctx, cancel := context.WithCancel(context.Background())
	queued := started(resp, "queued")
	j := &job{ctx: ctx, cancel: cancel, pace: f.latency / time.Duration(deltas(resp)+1), snap: queued, wake: make(chan struct{})}
	s.bg.add(resp.ID, j)
	j.emit("response.created", map[string]any{"response": queued})
	j.emit("response.queued", map[string]any{"response": queued})
	go s.generate(j, resp, chain, f.streamError)

	if req.Stream {
		s.follow(w, r, j, -1)
		return nil
	}
	writeJSON(w, http.StatusOK, queued)
	return nil
}

// generate runs a background response to its end: completed (stored for
// previous_response_id), failed (stream-error fault) or cancelled.
func (s *Server) generate(j *job, resp response, chain []json.RawMessage, streamError bool) {
	defer j.cancel()
	sleep(j.ctx, j.pace)
	streamEvents(j, resp, streamError)

	j.mu.Lock()
	final := resp
	switch {
	case streamError:
		final = started(resp, "failed")
		final.Error = &apiError{Message: "sandbox fault: stream-error", Type: "server_error", Code: nullable("server_error")}
	case !j.terminal:
		final = started(resp, "cancelled")
	}
	if final.CompletedAt == nil {
		final.finishAt(time.Now())
	}
	j.snap, j.done = final, true
	j.wakeAll()
	j.mu.Unlock()

	if final.Status == resp.Status {
		if st, err := storedOf(resp, chain); err == nil {
			s.save(resp.ID, st)
		}
	}
}

// deltas counts the delta events streamEvents will emit for resp.
func deltas(resp response) int {
	n := 0
	for _, it := range resp.Output {
		switch v := it.(type) {
		case messageItem:
			for _, p := range v.Content {
				n += len(chunks(p.Text, 3))
			}
		case functionCallItem:
			n += len(byteChunks(v.Arguments, 8))
		}
	}
	return n
}

// follow writes the job's events after sequence number after, then the live
// ones, until the job ends or the client goes away (the job goes on).
func (s *Server) follow(w http.ResponseWriter, r *http.Request, j *job, after int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	next := max(after+1, 0)
	for {
		j.mu.Lock()
		var evs []sseEvent
		if next < len(j.events) {
			evs = j.events[next:]
		}
		done, wake := j.done, j.wake
		j.mu.Unlock()
		for _, e := range evs {
			if _, err := w.Write([]byte("event: " + e.typ + "\ndata: " + string(e.data) + "\n\n")); err != nil {
				return
			}
		}
		if fl != nil {
			fl.Flush()
		}
		next += len(evs)
		if done {
			_, _ = w.Write([]byte(doneLine))
			if fl != nil {
				fl.Flush()
			}
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}

// getBackground serves GET /v1/responses/{id} for background responses
// (and ?stream=true for any id); it reports false when the plain stored
// lookup should answer.
func (s *Server) getBackground(w http.ResponseWriter, r *http.Request) bool {
	s.bg.reads.Add(1)
	id := r.PathValue("id")
	j := s.bg.get(id)
	q := r.URL.Query()
	if q.Get("stream") != "true" {
		if j == nil {
			return false
		}
		writeJSON(w, http.StatusOK, j.snapshot())
		return true
	}
	s.bg.resumes.Add(1)
	if j == nil {
		if _, ok := s.lookup(id); ok {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "stream", "",
				"Response '"+id+"' was not created in background mode (or its events are no longer kept): only background responses can be streamed with GET.")
			return true
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "", "Response with id '"+id+"' not found.")
		return true
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "starting_after", "", "Invalid 'starting_after': expected an integer sequence number.")
			return true
		}
		after = n
	}
	s.follow(w, r, j, after)
	return true
}

// cancelBackground serves POST /v1/responses/{id}/cancel: a running
// background response stops and becomes cancelled; a finished one is
// returned unchanged, as OpenAI does.
func (s *Server) cancelBackground(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j := s.bg.get(id)
	if j == nil {
		if _, ok := s.lookup(id); ok {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "Only background responses can be cancelled.")
			return
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "", "Response with id '"+id+"' not found.")
		return
	}
	j.mu.Lock()
	running := !j.done
	j.mu.Unlock()
	if running {
		s.bg.cancels.Add(1)
		j.cancel()
		for { // generate notices at once: wait for the final object
			j.mu.Lock()
			done, wake := j.done, j.wake
			j.mu.Unlock()
			if done {
				break
			}
			select {
			case <-wake:
			case <-r.Context().Done():
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, j.snapshot())
}
