package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReposInput is list_repos's arguments.
type ReposInput struct {
	Workspace string `json:"workspace,omitempty" jsonschema:"only this workspace; default: every workspace"`
}

// ReposOutput is list_repos's structured result.
type ReposOutput struct {
	DefaultWorkspace string `json:"defaultWorkspace" jsonschema:"the workspace search_code and read_file_lines use when given none"`
	Repos            []Repo `json:"repos" jsonschema:"the indexed repositories"`
}

var reposTool = &mcp.Tool{
	Name:        "list_repos",
	Description: "List the indexed repositories (workspace, name, number of files): the values search_code and read_file_lines take as workspace and repo.",
	Annotations: readOnly("List repositories"),
}

func (t *tools) listRepos(ctx context.Context, _ *mcp.CallToolRequest, in ReposInput) (*mcp.CallToolResult, ReposOutput, error) {
	if in.Workspace != "" {
		if err := checkScope(in.Workspace, ""); err != nil {
			return nil, ReposOutput{}, err
		}
	}
	repos, err := t.src.Repos(ctx, in.Workspace)
	if err != nil {
		t.log.Warn("list_repos failed", "err", err)
		return nil, ReposOutput{}, fmt.Errorf("list repositories: %w", err)
	}
	if repos == nil {
		repos = []Repo{}
	}
	out := ReposOutput{DefaultWorkspace: t.workspace, Repos: repos}
	var b strings.Builder
	if len(repos) == 0 {
		b.WriteString("Nothing is indexed")
		if in.Workspace != "" {
			fmt.Fprintf(&b, " in workspace %s", in.Workspace)
		}
		b.WriteString(" (index a directory with `aptix index PATH`).")
	}
	for _, r := range repos {
		fmt.Fprintf(&b, "workspace %s, repo %s: %d files\n", r.Workspace, r.Repo, r.Files)
	}
	return textResult(b.String()), out, nil
}
