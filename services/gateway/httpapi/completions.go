package httpapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
)

// completions shares one client.Completions watch among every request of
// the process, and replaces it every rotateEvery. Why: a gateway replica
// sees every completion of the bus (other replicas', `aptix exec`'s), and
// client.Completions keeps each one nobody claims for as long as it runs.
// A request takes the current watch before it submits (so its completion
// cannot arrive before the watch started) and waits on that one; a replaced
// watch stops when its last waiter is done, and what it kept goes with it.
// Memory is bounded by the completions of one period.
type completions struct {
	js          jetstream.JetStream
	rotateEvery time.Duration
	// life ends at stop: every wait ends with it (the gateway is closing,
	// for good or to start again on a new connection).
	life context.Context
	end  context.CancelFunc

	mu  sync.Mutex
	cur *watchGen
}

type watchGen struct {
	c       *client.Completions
	started time.Time
	waiters int
	retired bool
}

func newCompletions(ctx context.Context, js jetstream.JetStream, rotateEvery time.Duration) (*completions, error) {
	c := &completions{js: js, rotateEvery: rotateEvery}
	c.life, c.end = context.WithCancel(context.Background())
	w, err := client.WatchCompletions(context.WithoutCancel(ctx), js, "*")
	if err != nil {
		return nil, err
	}
	c.cur = &watchGen{c: w, started: time.Now()}
	return c, nil
}

// acquire returns the watch a request submitting now must wait on; release
// it when done waiting.
func (c *completions) acquire(ctx context.Context) *watchGen {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.cur.started) > c.rotateEvery {
		if w, err := client.WatchCompletions(context.WithoutCancel(ctx), c.js, "*"); err == nil {
			old := c.cur
			old.retired = true
			if old.waiters == 0 {
				old.c.Stop()
			}
			c.cur = &watchGen{c: w, started: time.Now()}
		} // else keep the current one; the next request tries again
	}
	c.cur.waiters++
	return c.cur
}

func (c *completions) release(g *watchGen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g.waiters--
	if g.retired && g.waiters == 0 {
		g.c.Stop()
	}
}

// wait waits on g for the conversation's turn and releases g. The turn is
// what a response is built from (completedTurn): its request and retrieved
// chunks are not decoded.
func (c *completions) wait(ctx context.Context, g *watchGen, conv, turnID string) (contracts.Turn, error) {
	defer c.release(g)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	data, err := g.c.WaitEvent(ctx, conv, turnID)
	if err != nil {
		return contracts.Turn{}, err
	}
	t, err := decodeCompleted(data)
	if err == nil && (t.TurnId != turnID || t.ConversationId != conv) {
		err = fmt.Errorf("its event names turn %q of conversation %q", t.TurnId, t.ConversationId)
	}
	if err != nil {
		return contracts.Turn{}, g.c.DecodeFailed(conv, turnID, err)
	}
	return t, nil
}

// completedTurn is a completed event decoded for its response: every
// section of contracts.Turn except the bulk no response reads, the
// request (its input and tools: only its instruction is read, for a
// file_search call's query) and the retrieved chunks (only the query is
// read; the response's sources are the envelope's). TestCompletedTurnFields
// keeps it in step with contracts.Turn.
type completedTurn struct {
	Version        int    `json:"version"`
	ConversationId string `json:"conversationId"`
	TurnId         string `json:"turnId"`
	Request        struct {
		Instruction string `json:"instruction"`
	} `json:"request"`
	Retrieval *struct {
		Query string `json:"query"`
	} `json:"retrieval,omitempty"`
	Envelope *contracts.Envelope             `json:"envelope,omitempty"`
	LLM      *contracts.LLMResult            `json:"llm,omitempty"`
	Response *contracts.AgentExecuteResponse `json:"response,omitempty"`
	Tools    *contracts.ToolLoop             `json:"tools,omitempty"`
	Warnings []string                        `json:"warnings,omitempty"`
	Failure  *contracts.Failure              `json:"failure,omitempty"`
}

// turnCodec reads events as encoding/json would, with the v2 engine (the
// pipeline's own codec, about half the CPU).
var turnCodec = jsonv1.DefaultOptionsV1()

// decodeCompleted decodes a completed event's data (completedTurn).
func decodeCompleted(data []byte) (contracts.Turn, error) {
	var c completedTurn
	if err := jsonv2.Unmarshal(data, &c, turnCodec); err != nil {
		return contracts.Turn{}, err
	}
	t := contracts.Turn{Version: c.Version, ConversationId: c.ConversationId, TurnId: c.TurnId,
		Envelope: c.Envelope, LLM: c.LLM, Response: c.Response, Tools: c.Tools, Warnings: c.Warnings, Failure: c.Failure}
	t.Request.Instruction = c.Request.Instruction
	if c.Retrieval != nil {
		t.Retrieval = &contracts.Retrieval{Query: c.Retrieval.Query}
	}
	return t, nil
}

// stopped reports whether stop was called (a wait that ended early ended
// because the gateway closed, not because its turn is slow).
func (c *completions) stopped() bool { return c.life.Err() != nil }

func (c *completions) stop() {
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur.c.Stop()
}
