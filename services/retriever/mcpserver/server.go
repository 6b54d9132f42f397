// Package mcpserver serves the Aptix code index as an MCP server, so any MCP
// client (an IDE, a desktop assistant, the pipeline's own tool loop) can
// search the indexed code and read its files. Everything it reads comes from
// the index and the chunk store, never from the local disk: a path that was
// not indexed cannot be read, whatever it names.
//
// Tools: search_code (the retriever's search, as it runs for a turn),
// read_file_lines (numbered lines of an indexed file) and list_repos.
// A tool failure is a tool result with IsError set and a message the model
// can act on, not a protocol error.
package mcpserver

import (
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// Options configure the server. Zero values take the defaults.
type Options struct {
	// Workspace is searched and read when a call names none
	// (default retrieval.DefaultWorkspace, what `aptix index` writes to).
	Workspace string
	// Version is reported to clients in the server's implementation info.
	Version string
	Logger  *slog.Logger
}

// Limits of the tools' answers: a model's context is the scarce resource.
const (
	DefaultK     = 8
	MaxK         = 50
	MaxReadLines = 400
	MaxReadBytes = 64 << 10
)

// Name is the server's implementation name, and the server label `aptix up`
// gives it.
const Name = "aptix"

// New returns an MCP server whose tools read src. Serve it with
// mcp.NewStreamableHTTPHandler or Server.Run.
func New(src Source, o Options) *mcp.Server {
	if o.Workspace == "" {
		o.Workspace = retrieval.DefaultWorkspace
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "Aptix code index", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Search and read the code indexed by Aptix. search_code finds chunks (path, lines, content) for a query; " +
			"read_file_lines reads more of a file it found; list_repos tells which repositories are indexed. " +
			"Paths are relative to the repository root. Default workspace: " + o.Workspace + ".",
		Logger:       o.Logger,
		Capabilities: &mcp.ServerCapabilities{}, // tools only: no logging capability
	})
	t := &tools{src: src, workspace: o.Workspace, log: o.Logger}
	mcp.AddTool(s, searchTool, t.searchCode)
	mcp.AddTool(s, readTool, t.readFileLines)
	mcp.AddTool(s, reposTool, t.listRepos)
	return s
}

// tools holds what the tool handlers share.
type tools struct {
	src       Source
	workspace string
	log       *slog.Logger
}

func (t *tools) ws(w string) string {
	if w == "" {
		return t.workspace
	}
	return w
}

// readOnly annotates every tool: they read the index and change nothing.
func readOnly(title string) *mcp.ToolAnnotations {
	closed := false
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed}
}
