package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// SearchInput is search_code's arguments.
type SearchInput struct {
	Query     string `json:"query" jsonschema:"what to look for: identifiers, words or a question about the code (e.g. 'where are retries scheduled')"`
	Repo      string `json:"repo,omitempty" jsonschema:"only chunks of this repository (see list_repos); default: every repository of the workspace"`
	Language  string `json:"language,omitempty" jsonschema:"only chunks of this language, e.g. Go, Python, Markdown (any case)"`
	K         int    `json:"k,omitempty" jsonschema:"how many chunks to return: 1 to 50, default 8"`
	Workspace string `json:"workspace,omitempty" jsonschema:"the workspace to search; default: the server's default workspace"`
}

// SearchOutput is search_code's structured result.
type SearchOutput struct {
	Workspace string  `json:"workspace" jsonschema:"the workspace searched"`
	Terms     string  `json:"terms" jsonschema:"the query terms the search used, after analysis"`
	Chunks    []Chunk `json:"chunks" jsonschema:"matching chunks, best first"`
}

// Chunk is one search hit: a span of an indexed file.
type Chunk struct {
	Id        string  `json:"id" jsonschema:"the chunk id"`
	Repo      string  `json:"repo" jsonschema:"the repository"`
	Path      string  `json:"path" jsonschema:"the file, relative to the repository root"`
	StartLine int     `json:"startLine" jsonschema:"first line of the chunk (1-based)"`
	EndLine   int     `json:"endLine" jsonschema:"last line of the chunk (inclusive)"`
	Language  string  `json:"language" jsonschema:"the file's language"`
	Score     float64 `json:"score" jsonschema:"relevance, higher is better: the best hit 1 once the index is loaded (a learned reranking of BM25's hits), a BM25 score before"`
	Content   string  `json:"content" jsonschema:"the chunk's text"`
}

var searchTool = &mcp.Tool{
	Name: "search_code",
	Description: "Search the indexed source code (BM25 over code-aware terms, then a learned reranking; function, type and file names weigh more). " +
		"Returns the best-matching chunks, each with its id, repository, path, start and end line, language, score and content. " +
		"Use read_file_lines with a hit's path to read around it.",
	Annotations: readOnly("Search code"),
}

func (t *tools) searchCode(ctx context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
	ws := t.ws(in.Workspace)
	if strings.TrimSpace(in.Query) == "" {
		return nil, SearchOutput{}, errors.New("query is empty: say what to look for")
	}
	if err := checkScope(ws, in.Repo); err != nil {
		return nil, SearchOutput{}, err
	}
	k := in.K
	switch {
	case k < 0:
		return nil, SearchOutput{}, fmt.Errorf("k %d: must be between 1 and %d", k, MaxK)
	case k == 0:
		k = DefaultK
	case k > MaxK:
		k = MaxK
	}
	req := contracts.AgentExecuteRequest{Instruction: in.Query, WorkspaceId: ws, Language: in.Language, RagScope: contracts.RagScopeWorkspace}
	if in.Repo != "" { // a filter, not the workspace scope's mere boost
		req.Repo, req.RagScope = in.Repo, contracts.RagScopeRepo
	}
	res, err := t.src.Search(ctx, req)
	if errors.Is(err, retrieval.ErrNotReady) {
		return nil, SearchOutput{}, errors.New("the index is still loading the chunk store: try again in a few seconds")
	}
	if err != nil {
		t.log.Warn("search_code failed", "workspace", ws, "err", err)
		return nil, SearchOutput{}, fmt.Errorf("search failed: %w", err)
	}
	out := SearchOutput{Workspace: ws, Terms: res.Query, Chunks: make([]Chunk, 0, min(k, len(res.Chunks)))}
	for _, c := range res.Chunks[:min(k, len(res.Chunks))] {
		out.Chunks = append(out.Chunks, Chunk{Id: c.Id, Repo: c.Repo, Path: c.Path, StartLine: c.StartLine, EndLine: c.EndLine,
			Language: c.Language, Score: c.Score, Content: c.Content})
	}
	return textResult(searchText(in, out)), out, nil
}

// checkScope refuses ids that could not have been indexed (and could not
// be part of a bucket key or subject filter).
func checkScope(workspace, repo string) error {
	if !contracts.IsToken(workspace) {
		return fmt.Errorf("workspace %q: ids are 1-128 characters of [A-Za-z0-9_-]", workspace)
	}
	if repo != "" && !contracts.IsToken(repo) {
		return fmt.Errorf("repo %q: ids are 1-128 characters of [A-Za-z0-9_-]", repo)
	}
	return nil
}

// searchText is the readable form of a search: a header line per chunk,
// then its content in a fence.
func searchText(in SearchInput, out SearchOutput) string {
	var b strings.Builder
	if len(out.Chunks) == 0 {
		fmt.Fprintf(&b, "No chunks match %q in workspace %s", in.Query, out.Workspace)
		if in.Repo != "" {
			fmt.Fprintf(&b, ", repo %s", in.Repo)
		}
		if in.Language != "" {
			fmt.Fprintf(&b, ", language %s", in.Language)
		}
		b.WriteString(". Try other words, fewer filters, or list_repos to see what is indexed.")
		return b.String()
	}
	fmt.Fprintf(&b, "%d chunks for %q in workspace %s:\n", len(out.Chunks), in.Query, out.Workspace)
	for i, c := range out.Chunks {
		fence := fenceFor(c.Content)
		fmt.Fprintf(&b, "\n%d. %s:%d-%d (repo %s, %s, score %.3f, id %s)\n%s%s\n%s\n%s\n",
			i+1, c.Path, c.StartLine, c.EndLine, c.Repo, c.Language, c.Score, c.Id, fence, strings.ToLower(c.Language), c.Content, fence)
	}
	return b.String()
}

// fenceFor returns a backtick fence longer than any run of backticks in s,
// so content holding Markdown fences cannot close it early.
func fenceFor(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
