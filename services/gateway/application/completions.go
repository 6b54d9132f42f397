package application

import (
	"context"
	"sync"
	"time"

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

// wait waits on g for the conversation's turn and releases g.
func (c *completions) wait(ctx context.Context, g *watchGen, conv, turnID string) (contracts.Turn, error) {
	defer c.release(g)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	return g.c.Wait(ctx, conv, turnID)
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
