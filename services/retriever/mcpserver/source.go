package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// Searcher is what search_code needs: *retrieval.Index satisfies it. Its
// own K bounds how many chunks a search can return.
type Searcher interface {
	Search(ctx context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error)
}

// Source is everything the tools read: the search, and the stored files
// read_file_lines and list_repos need. NewSource backs it with the chunk
// store; tests may substitute their own.
type Source interface {
	Searcher
	// File returns the stored record of one indexed file; an error wrapping
	// ErrNotIndexed when workspace/repo has no such file.
	File(ctx context.Context, workspace, repo, path string) (retrieval.FileRecord, error)
	// Repos lists the indexed repositories of workspace (every workspace
	// when it is empty), sorted by workspace and name.
	Repos(ctx context.Context, workspace string) ([]Repo, error)
}

// Repo is one indexed repository.
type Repo struct {
	Workspace string `json:"workspace" jsonschema:"the workspace the repository was indexed into"`
	Repo      string `json:"repo" jsonschema:"the repository name, as search_code and read_file_lines take it"`
	Files     int    `json:"files" jsonschema:"number of indexed files"`
}

// ErrNotIndexed says a file is not in the chunk store.
var ErrNotIndexed = errors.New("not an indexed file")

// NewSource reads through s for search and from the chunk store bucket
// (retrieval.Bucket) for files: what every replica shares, so the tools
// answer the same wherever the server runs, and never touch the local disk.
func NewSource(ctx context.Context, js jetstream.JetStream, s Searcher) (Source, error) {
	kv, err := js.KeyValue(ctx, retrieval.Bucket)
	if err != nil {
		return nil, fmt.Errorf("open chunk store %s: %w", retrieval.Bucket, err)
	}
	return &storeSource{Searcher: s, kv: kv}, nil
}

type storeSource struct {
	Searcher
	kv jetstream.KeyValue
}

func (s *storeSource) File(ctx context.Context, workspace, repo, path string) (retrieval.FileRecord, error) {
	var rec retrieval.FileRecord
	if !contracts.IsToken(workspace) || !contracts.IsToken(repo) {
		return rec, fmt.Errorf("%s/%s %s: %w", workspace, repo, path, ErrNotIndexed)
	}
	e, err := s.kv.Get(ctx, fileKey(workspace, repo, path))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, fmt.Errorf("%s/%s %s: %w", workspace, repo, path, ErrNotIndexed)
	}
	if err != nil {
		return rec, fmt.Errorf("read %s from the chunk store: %w", path, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, fmt.Errorf("decode stored %s: %w", path, err)
	}
	if rec.Path != path { // a key collision, however unlikely, must not serve another file
		return retrieval.FileRecord{}, fmt.Errorf("%s/%s %s: %w", workspace, repo, path, ErrNotIndexed)
	}
	return rec, nil
}

func (s *storeSource) Repos(ctx context.Context, workspace string) ([]Repo, error) {
	filter := ">"
	if workspace != "" {
		if !contracts.IsToken(workspace) {
			return nil, fmt.Errorf("workspace %q: must be 1-128 characters of [A-Za-z0-9_-]", workspace)
		}
		filter = workspace + ".>"
	}
	kl, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list the chunk store: %w", err)
	}
	defer kl.Stop()
	counts := map[[2]string]int{}
	seen := map[string]bool{} // the lister may repeat a key
	for key := range kl.Keys() {
		parts := strings.Split(key, ".")
		if len(parts) != 3 || seen[key] {
			continue
		}
		seen[key] = true
		counts[[2]string{parts[0], parts[1]}]++
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list the chunk store: %w", err)
	}
	out := make([]Repo, 0, len(counts))
	for k, n := range counts {
		out = append(out, Repo{Workspace: k[0], Repo: k[1], Files: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Workspace != out[j].Workspace {
			return out[i].Workspace < out[j].Workspace
		}
		return out[i].Repo < out[j].Repo
	})
	return out, nil
}

// fileKey is the bucket key of a file, as retrieval writes it:
// <workspace>.<repo>.<24 hex of SHA-256 of the path>. It is unexported
// there; the tests index through retrieval, so a change shows up as a failure.
func fileKey(workspace, repo, path string) string {
	h := sha256.Sum256([]byte(path))
	return workspace + "." + repo + "." + hex.EncodeToString(h[:12])
}
