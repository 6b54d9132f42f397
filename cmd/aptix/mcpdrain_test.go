package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPStdioAnswersPendingCallsAtEOF: a client that sends a call and
// closes its input at once (printf ... | aptix mcp --stdio) gets the
// call's answer before the server exits; it was dropped, the SDK closing
// the connection at end of input with the call still running.
func TestMCPStdioAnswersPendingCallsAtEOF(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return nil, struct{}{}, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow answer"}}}, struct{}{}, nil
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, drainTransport{&mcp.IOTransport{Reader: inR, Writer: outW}, 10 * time.Second})
	}()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{}}}`+"\n")
		_ = inW.Close()
	}()
	var lines []string
	sc := bufio.NewScanner(outR)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	<-done
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, `"id":2`) || !strings.Contains(all, "slow answer") {
		t.Fatalf("the pending call was not answered before exit:\n%s", all)
	}
}
