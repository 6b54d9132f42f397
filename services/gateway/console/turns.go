package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/profiles/pricelist"
)

// step is one stored stage of a turn in its waterfall.
type step struct {
	Stage, Producer string
	Present         bool
	// Skipped is a stage the turn did not visit (it entered past it,
	// history.Skipped): a row of its own, with no event.
	Skipped      bool
	At           time.Time
	Offset, Took time.Duration
	Size         int
	Trace        string
	Seq          uint64
	X, W         float64 // the bar, as fractions of the turn's span
}

// turnSummary is a turn as the conversation page lists it.
type turnSummary struct {
	Conversation, Turn string
	Stage              string // the most advanced stored stage
	Done               bool
	Instruction        string
	// Rule is which rule built the model's input (docs/request.md#which-rule-applies-when).
	Rule           string
	Text           string
	ToolCalls      []contracts.AgentToolCall
	Kind, Finish   string
	Backend, Model string
	Usage          contracts.LlmUsage
	Cost           *contracts.Cost
	Span           time.Duration
	Steps          []step
	Rounds         int
	Executions     []contracts.ToolExecution
	ReplayOf       string
	Error          string
	Warnings       []string
	Failure        *contracts.Failure
}

// waterfall lays the stages' stored times out on one span.
func waterfall(times map[string]time.Time, msgs map[string]msgInfo) ([]step, time.Duration) {
	var first, last time.Time
	for _, s := range history.Stages {
		if at, ok := times[s]; ok {
			if first.IsZero() {
				first = at
			}
			last = at
		}
	}
	total := last.Sub(first)
	var steps []step
	var prev time.Time
	entered := false
	for _, s := range history.Stages {
		st := step{Stage: s, Producer: history.Producer[s]}
		at, ok := times[s]
		if ok && !entered {
			// The turn's entry event: a row for each stage it skipped, whose
			// events (the retrieved event of a turn that skipped the
			// envelope too) never existed and get no row.
			entered = true
			for _, sk := range msgs[s].skipped {
				steps = append(steps, step{Stage: s, Producer: sk, Skipped: true})
			}
			if n := len(msgs[s].skipped); n > 0 {
				steps = slices.DeleteFunc(steps, func(x step) bool { return !x.Skipped })
			}
		}
		if ok {
			st.Producer = cmp.Or(msgs[s].writer, st.Producer)
			st.Present, st.At, st.Offset = true, at, at.Sub(first)
			if !prev.IsZero() {
				st.Took = at.Sub(prev)
			}
			mi := msgs[s]
			st.Size, st.Trace, st.Seq = mi.size, mi.trace, mi.seq
			if total > 0 {
				st.X = float64(st.Offset-st.Took) / float64(total)
				st.W = float64(st.Took) / float64(total)
			}
			st.W = max(st.W, 0.006) // the first stage (and instant hops) still show
			st.X = min(st.X, 1-st.W)
			prev = at
		}
		steps = append(steps, st)
	}
	return steps, total
}

// msgInfo is what the waterfall shows of a stored event.
type msgInfo struct {
	seq   uint64
	size  int
	trace string
	// skipped are the stages a turn entering with this event did not
	// visit; writer who stored it (history.Writer).
	skipped []string
	writer  string
}

// headerInfo is what a stored event's headers tell the waterfall.
func headerInfo(seq uint64, size int, stage string, h map[string][]string) msgInfo {
	return msgInfo{seq: seq, size: size, trace: history.TraceID(h), skipped: history.Skipped(h), writer: history.Writer(stage, h)}
}

func rawInfo(m *jetstream.RawStreamMsg) msgInfo {
	if m == nil {
		return msgInfo{}
	}
	stage, _, _, _ := contracts.ParseSubject(m.Subject)
	return headerInfo(m.Sequence, len(m.Data), stage, m.Header)
}

// summarize fills a turn summary from its most advanced stored event.
func summarize(ts *turnSummary, stage string, t contracts.Turn) {
	ts.Stage, ts.Done = stage, stage == contracts.StageCompleted
	ts.Instruction = t.Request.Instruction
	ts.Rule = "AGN-003 framing ([MODE]/[INSTRUCTION], system prompt once)"
	if !t.Request.Framed() {
		ts.Rule = "transparent: the client's input and instructions as sent"
	}
	if ac := t.Request.AgentContext; ac != nil {
		ts.Backend, ts.Model = ac.Backend, ac.Model
	}
	if e := t.Envelope; e != nil {
		ts.Backend, ts.Model = e.Backend, e.Model
	}
	if r := t.Response; r != nil {
		ts.Text, ts.ToolCalls, ts.Kind, ts.Finish, ts.Usage, ts.Cost = shownText(r.Text), r.ToolCalls, r.Kind, r.FinishReason, r.Usage, r.Cost
		if r.ModelId != "" {
			ts.Model = r.ModelId
		}
		if r.Kind == contracts.KindError {
			ts.Error = strings.TrimPrefix(r.ErrorCode+": "+r.ErrorMessage, ": ")
		}
		ts.Warnings = r.Warnings
	} else {
		ts.Warnings = t.Warnings
	}
	if t.Tools != nil {
		ts.Rounds, ts.Executions = t.Tools.Round, t.Tools.Executions
	}
	ts.Failure = t.Failure
}

type conversationData struct {
	ID        string
	Turns     []turnSummary
	Hidden    int
	Now       time.Time
	InFlight  bool
	TurnLimit int
}

// maxTurnsShown bounds the conversation page (the newest turns are shown).
const maxTurnsShown = 200

// conversation lists a conversation's turns in order with their waterfalls.
// Reads: one stream info with the conversation's filter, the last event of
// each of its subjects (headers only), the completed events, and the latest
// event of each turn not yet completed.
func (c *Console) conversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !validID(id) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "Conversation ids are 1-128 characters of [A-Za-z0-9_-].")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	d, err := c.conversationData(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, "conversation", "Conversation "+id, d)
}

func (c *Console) conversationData(ctx context.Context, id string) (*conversationData, error) {
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	filter := contracts.ConversationFilter(id)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	if len(info.State.Subjects) == 0 {
		return nil, fmt.Errorf("no stored events for conversation %s (trimmed from history, or a typo?): %w", id, history.ErrNotStored)
	}
	type turnAcc struct {
		first  uint64
		times  map[string]time.Time
		msgs   map[string]msgInfo
		replay string
		latest string
	}
	turns := map[string]*turnAcc{}
	err = readOrdered(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true},
		len(info.State.Subjects), func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
			stage, _, turn, ok := contracts.ParseSubject(m.Subject())
			if !ok {
				return true
			}
			ta := turns[turn]
			if ta == nil {
				ta = &turnAcc{first: md.Sequence.Stream, times: map[string]time.Time{}, msgs: map[string]msgInfo{}}
				turns[turn] = ta
			}
			ta.first = min(ta.first, md.Sequence.Stream)
			size, _ := strconv.Atoi(m.Headers().Get(nats.MsgSize))
			ta.times[stage] = md.Timestamp
			ta.msgs[stage] = headerInfo(md.Sequence.Stream, size, stage, m.Headers())
			if v := m.Headers().Get(contracts.HeaderReplayOf); v != "" {
				ta.replay = v
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	order := make([]string, 0, len(turns))
	for t := range turns {
		order = append(order, t)
	}
	sort.Slice(order, func(i, j int) bool { return turns[order[i]].first < turns[order[j]].first })
	d := &conversationData{ID: id, Now: c.cfg.Now(), TurnLimit: maxTurnsShown}
	if len(order) > maxTurnsShown {
		d.Hidden = len(order) - maxTurnsShown
		order = order[len(order)-maxTurnsShown:]
	}
	// Every completed turn's payload in one read; the others one by one.
	bodies := map[string]contracts.Turn{}
	if info.State.Subjects != nil {
		var completed int
		for subj := range info.State.Subjects {
			if strings.HasPrefix(subj, contracts.SubjectPrefix+"."+contracts.StageCompleted+".") {
				completed++
			}
		}
		if completed > 0 {
			err = readOrdered(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{contracts.Subject(contracts.StageCompleted, id, "*")},
				DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy}, completed, func(m jetstream.Msg, _ *jetstream.MsgMetadata) bool {
				_, _, turn, _ := contracts.ParseSubject(m.Subject())
				if _, shown := turns[turn]; !shown {
					return true
				}
				data, err := claim.EventData(ctx, c.js, m.Headers(), m.Data())
				if err != nil {
					return true
				}
				var t contracts.Turn
				if json.Unmarshal(data, &t) == nil {
					bodies[turn] = t
				}
				return true
			})
			if err != nil {
				return nil, err
			}
		}
	}
	for _, turn := range order {
		ta := turns[turn]
		ts := turnSummary{Conversation: id, Turn: turn, ReplayOf: ta.replay}
		ts.Steps, ts.Span = waterfall(ta.times, ta.msgs)
		if t, ok := bodies[turn]; ok {
			summarize(&ts, contracts.StageCompleted, t)
		} else {
			for i := len(history.Stages) - 1; i >= 0; i-- {
				st := history.Stages[i]
				if _, ok := ta.times[st]; !ok {
					continue
				}
				if _, data, err := history.TurnEvent(ctx, c.js, st, id, turn); err == nil {
					var t contracts.Turn
					if json.Unmarshal(data, &t) == nil {
						summarize(&ts, st, t)
					}
				}
				break
			}
			if ts.Stage == "" {
				ts.Stage = "dead letter or tool round only"
			}
			d.InFlight = true
		}
		d.Turns = append(d.Turns, ts)
	}
	return d, nil
}

// eventView is one stored event of a turn on its page.
type eventView struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Stage   string
	Size    int
	Trace   string
	Headers []string
	JSON    string
	Full    int  // the event's size, claimed or not
	Clipped bool // JSON is its first maxShown bytes (large.go)
}

type contextView struct {
	Found  bool
	Chunks []chunkView
	Raw    string // the block as sent, when it could not be parsed
	Err    string
}

type chunkView struct {
	N                  int
	Id, Path, Language string
	StartLine, EndLine int
	Content            string
	Href               string
	External           bool
}

type turnData struct {
	turnSummary
	Trace        string
	Events       []eventView
	Dead         []history.DeadLetter
	Request      string // the AgentExecuteRequest
	Body         string // the upstream request body, [CONTEXT] block replaced by a marker
	Context      contextView
	Retrieved    []contracts.RagChunk
	Upstream     string // the raw upstream response
	UpstreamNote string
	UpstreamSize int    // its size, when clipped
	UpstreamCut  bool   // Upstream is its first maxShown bytes (large.go)
	Response     string // the AgentExecuteResponse
	ResponseCut  bool
	HasResponse  bool
	LLMError     *contracts.UpstreamError
	// Fallbacks are the backends tried before the one that served
	// (docs/backends.md#fallbacks), each with how it failed.
	Fallbacks []contracts.BackendAttempt
	// PriceSource says which prices the cost is at: the built-in price
	// list (and its date) or a profile's own (pricelist.Source).
	PriceSource string
	Backends    []backendView
	From        []string
	Now         time.Time
	Other       string
}

type backendView struct{ Name, Model string }

// turn shows everything stored of one turn. The id may be a resp_… id.
func (c *Console) turn(w http.ResponseWriter, r *http.Request) {
	id, conv := r.PathValue("id"), r.URL.Query().Get("c")
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if strings.HasPrefix(id, "resp_") {
		cv, turn, ok, err := c.lookupResponse(ctx, id)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if !ok {
			c.message(w, r, http.StatusNotFound, "Not found", "No response "+id+" is stored.")
			return
		}
		id, conv = turn, cv
	}
	if !validID(id) || (conv != "" && !validID(conv)) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "Turn and conversation ids are 1-128 characters of [A-Za-z0-9_-].")
		return
	}
	d, err := c.turnData(ctx, conv, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, "turn", "Turn "+id, d)
}

func (c *Console) turnData(ctx context.Context, conv, id string) (*turnData, error) {
	v, err := history.LoadTurn(ctx, c.js, conv, id)
	if err != nil && !isNotStored(err) {
		return nil, err
	}
	if err != nil {
		// Not at any of the four stages: a turn still queued, or dead in the
		// retriever, is known only by its dead letter or tool round.
		if conv == "" {
			return nil, err
		}
		v = history.TurnView{Conversation: conv, Turn: id, Turns: map[string]contracts.Turn{}, Times: map[string]time.Time{}, Msgs: map[string]*jetstream.RawStreamMsg{}}
	}
	d := &turnData{Now: c.cfg.Now(), Trace: v.TraceOf(), From: layout.MainNames()}
	d.Conversation, d.Turn = v.Conversation, v.Turn
	msgs := map[string]msgInfo{}
	for s, m := range v.Msgs {
		msgs[s] = rawInfo(m)
	}
	d.Steps, d.Span = waterfall(v.Times, msgs)
	if stage, t, ok := v.Last(); ok {
		summarize(&d.turnSummary, stage, t)
		d.Request, _ = shownValue(t.Request)
		if m := v.Msgs[stage]; m != nil {
			d.ReplayOf = m.Header.Get(contracts.HeaderReplayOf)
		}
	}
	if t, ok := v.Turns[contracts.StageRetrieved]; ok && t.Retrieval != nil {
		d.Retrieved = t.Retrieval.Chunks
	}
	if e := v.Turns[contracts.StageEnveloped].Envelope; e != nil && len(e.Body) > 0 {
		d.Body, d.Context = splitContext(e.Body, c.cfg.SourceURL)
	}
	if l := v.Turns[contracts.StageResponded].LLM; l != nil {
		body := l.Body
		if l.UpstreamBody != "" {
			body = l.UpstreamBody
			d.UpstreamNote = "verbatim upstream body (tool emulation rewrote the one the mapper read)"
		}
		d.Upstream, d.UpstreamCut = shown([]byte(body))
		d.UpstreamSize = len(body)
		d.LLMError = l.Error
		d.Fallbacks = l.Fallbacks
	}
	if d.Cost != nil {
		d.PriceSource = pricelist.Source(d.Cost.PriceVersion)
	}
	if r := v.Turns[contracts.StageCompleted].Response; r != nil {
		d.Response, d.ResponseCut = shownValue(r)
		d.HasResponse = true
	}
	if d.Events, err = c.turnEvents(ctx, v.Conversation, v.Turn); err != nil {
		return nil, err
	}
	if d.Dead, err = c.turnDeadLetters(ctx, v.Conversation, v.Turn); err != nil {
		return nil, err
	}
	if len(d.Events) == 0 && len(d.Dead) == 0 {
		return nil, fmt.Errorf("no stored events for turn %s of conversation %s: %w", id, v.Conversation, history.ErrNotStored)
	}
	if c.cfg.Profiles != nil {
		for _, name := range c.cfg.Profiles.Names() {
			if p, err := c.cfg.Profiles.Get(name); err == nil {
				d.Backends = append(d.Backends, backendView{Name: name, Model: p.Model("")})
			}
		}
	}
	return d, nil
}

// turnEvents reads every stored event of the turn (retries, tool rounds
// and redrives included), in stream order: one filtered read of the turn's
// own subjects.
func (c *Console) turnEvents(ctx context.Context, conv, turn string) ([]eventView, error) {
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	filter := contracts.SubjectPrefix + ".*." + conv + "." + turn
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var total int
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return nil, nil
	}
	var out []eventView
	err = readOrdered(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}, min(total, 500), func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		data, full, err := c.eventStart(ctx, m.Headers(), m.Data())
		if err != nil {
			data, full = m.Data(), len(m.Data())
		}
		stage, _, _, _ := contracts.ParseSubject(m.Subject())
		ev := eventView{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(), Stage: stage,
			Size: len(m.Data()), Full: full, Trace: history.TraceID(m.Headers()), Headers: headerLines(m.Headers())}
		ev.JSON, ev.Clipped = shown(data)
		out = append(out, ev)
		return true
	})
	return out, err
}

// turnDeadLetters finds the turn's dead letters: their headers are read
// (payloads only for the turn's own).
func (c *Console) turnDeadLetters(ctx context.Context, conv, turn string) ([]history.DeadLetter, error) {
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contracts.DeadPrefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var total int
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return nil, nil
	}
	var seqs []uint64
	err = readOrdered(ctx, s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{contracts.DeadPrefix + ".>"}, HeadersOnly: true}, total,
		func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
			if _, cv, t, ok := contracts.ParseSubject(m.Headers().Get(contracts.HeaderDeadSubject)); ok && cv == conv && t == turn {
				seqs = append(seqs, md.Sequence.Stream)
			}
			return true
		})
	if err != nil {
		return nil, err
	}
	var out []history.DeadLetter
	for _, seq := range seqs {
		if d, err := history.GetDeadLetter(ctx, c.js, seq); err == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// headerLines are an event's headers as "name: value" lines, sorted.
func headerLines(h map[string][]string) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k+": "+strings.Join(vs, ", "))
	}
	slices.Sort(out)
	return out
}

// replay re-runs the turn from a stage (what `aptix replay` does) and sends
// the browser to the new turn's page. It does not wait for the replay: the
// page shows it moving through the stages.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	id, conv := r.PathValue("id"), r.PostFormValue("c")
	if !validID(id) || !validID(conv) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "Turn and conversation ids are 1-128 characters of [A-Za-z0-9_-].")
		return
	}
	spec := history.ReplaySpec{Conversation: conv, Turn: id, From: r.PostFormValue("from"),
		Backend: strings.TrimSpace(r.PostFormValue("backend")), Model: strings.TrimSpace(r.PostFormValue("model")), Pin: true,
		DefaultModel: func(backend string) (string, error) {
			if c.cfg.Profiles == nil {
				return "", errors.New("no backend profiles are configured")
			}
			p, err := c.cfg.Profiles.Get(backend)
			if err != nil {
				return "", err
			}
			return p.Model(""), nil
		}}
	if err := spec.Validate(); err != nil {
		c.fail(w, r, err)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		what := fmt.Sprintf("Replay turn %s from the %s", id, spec.From)
		if spec.Backend != "" || spec.Model != "" {
			what += fmt.Sprintf(" with backend %q and model %q", history.OrNone(spec.Backend), history.OrNone(spec.Model))
		}
		c.confirm(w, r, what+"? A replay from the llmcaller or earlier calls the model again.", "Replay", r.URL.Path, turnURL(conv, id),
			map[string]string{"c": conv, "from": spec.From, "backend": spec.Backend, "model": spec.Model})
		return
	}
	spec.NewTurn = uuid.Must(uuid.NewV7()).String()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	ev, err := history.BuildReplay(ctx, c.js, spec)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if err := pipeline.PublishReplay(ctx, c.js, ev); err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: replay published", "principal", from(r).principal.ID, "of", id, "turn", ev.TurnId, "from", spec.From)
	http.Redirect(w, r, turnURL(ev.ConversationId, ev.TurnId), http.StatusSeeOther)
}

type diffData struct {
	A, B         history.TurnView
	Rows         []history.Row
	Chunks       idChanges
	Sources      idChanges
	Body         []string
	BodyNote     string
	TextA, TextB string
	SameText     bool
}

type idChanges struct {
	Shown          bool
	Removed, Added []string
	Reordered      bool
}

// diff compares two turns side by side (what `aptix diff` shows).
func (c *Console) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a, b := strings.TrimSpace(q.Get("a")), strings.TrimSpace(q.Get("b"))
	ca, cb := q.Get("ca"), q.Get("cb")
	for _, v := range []string{ca, cb} {
		if v != "" && !validID(v) {
			c.message(w, r, http.StatusBadRequest, "Bad request", "Conversation ids are 1-128 characters of [A-Za-z0-9_-].")
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	resolve := func(id, conv string) (string, string, error) {
		if strings.HasPrefix(id, "resp_") {
			cv, t, ok, err := c.lookupResponse(ctx, id)
			if err != nil {
				return "", "", err
			}
			if !ok {
				return "", "", fmt.Errorf("no response %s is stored: %w", id, history.ErrNotStored)
			}
			return t, cv, nil
		}
		if !validID(id) {
			return "", "", history.InputError{Err: fmt.Errorf("%q is not a turn id: ids are 1-128 characters of [A-Za-z0-9_-]", id)}
		}
		return id, conv, nil
	}
	var err error
	if a, ca, err = resolve(a, ca); err == nil {
		b, cb, err = resolve(b, cb)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	va, err := history.LoadTurn(ctx, c.js, ca, a)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	vb, err := history.LoadTurn(ctx, c.js, cb, b)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := diffData{A: va, B: vb, Rows: history.DiffRows(va, vb)}
	if ta, ok := va.Turns[contracts.StageRetrieved]; ok {
		if tb, ok := vb.Turns[contracts.StageRetrieved]; ok {
			d.Chunks = changes(history.ChunkIDs(ta), history.ChunkIDs(tb))
		}
	}
	ea, eb := va.Turns[contracts.StageEnveloped].Envelope, vb.Turns[contracts.StageEnveloped].Envelope
	if ea != nil && eb != nil {
		d.Sources = changes(history.SourceIDs(ea), history.SourceIDs(eb))
	}
	switch {
	case ea == nil || eb == nil || len(ea.Body) == 0 || len(eb.Body) == 0:
		d.BodyNote = "not comparable: a turn has no stored enveloped event (a replay from the mapper, or trimmed)"
	default:
		lines, err := history.JSONDiff(ea.Body, eb.Body)
		if err != nil {
			d.BodyNote = err.Error()
		} else if len(lines) == 0 {
			d.BodyNote = "identical"
		}
		d.Body = lines
	}
	d.TextA, d.TextB = va.Response().Text, vb.Response().Text
	d.SameText = d.TextA == d.TextB
	c.render(w, r, "diff", "Diff "+a+" ↔ "+b, d)
}

func changes(a, b []string) idChanges {
	removed, added, reordered := history.IDChanges(a, b)
	return idChanges{Shown: len(removed)+len(added) > 0 || reordered, Removed: removed, Added: added, Reordered: reordered}
}

// confirm renders the confirmation step of an action: the same POST again
// with confirm=yes, or back.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, question, button, action, back string, fields map[string]string) {
	type field struct{ Name, Value string }
	var fs []field
	for k, v := range fields {
		fs = append(fs, field{k, v})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	c.render(w, r, "confirm", "Confirm", map[string]any{"Question": question, "Button": button, "Action": action, "Fields": fs, "Back": back})
}
