package main

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpDrainWait bounds how long a stdio server whose client closed stdin
// keeps answering the calls it had already read.
const mcpDrainWait = time.Minute

// drainTransport is a transport whose connection, when its input ends
// (a stdio client closes stdin, often right after its last request, as
// `printf ... | aptix mcp --stdio` does), answers the calls it has read
// before it reports the end: the SDK closes the connection at end of
// input, and calls still running were dropped unanswered.
type drainTransport struct {
	mcp.Transport
	wait time.Duration
}

func (t drainTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	d := &drainConn{Connection: c, wait: t.wait, pending: map[jsonrpc.ID]bool{}}
	d.idle = sync.NewCond(&d.mu)
	return d, nil
}

// drainConn counts the calls read and not yet answered.
type drainConn struct {
	mcp.Connection
	wait    time.Duration
	mu      sync.Mutex
	idle    *sync.Cond
	pending map[jsonrpc.ID]bool
}

func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil {
		c.drain(ctx)
		return nil, err
	}
	if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
		c.mu.Lock()
		c.pending[r.ID] = true
		c.mu.Unlock()
	}
	return m, nil
}

func (c *drainConn) Write(ctx context.Context, m jsonrpc.Message) error {
	err := c.Connection.Write(ctx, m)
	if r, ok := m.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, r.ID)
		c.idle.Broadcast()
		c.mu.Unlock()
	}
	return err
}

// drain waits until every call read has been answered, the wait has
// passed, or ctx ends.
func (c *drainConn) drain(ctx context.Context) {
	stop := context.AfterFunc(ctx, c.wake)
	defer stop()
	t := time.AfterFunc(c.wait, c.wake)
	defer t.Stop()
	deadline := time.Now().Add(c.wait)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 && ctx.Err() == nil && time.Now().Before(deadline) {
		c.idle.Wait()
	}
}

func (c *drainConn) wake() {
	c.mu.Lock()
	c.idle.Broadcast()
	c.mu.Unlock()
}
