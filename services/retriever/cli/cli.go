// Package cli holds the retriever's cobra commands (`aptix index`,
// `aptix search`); the aptix root command wires them in.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
)

// Connect returns a NATS connection and its release function, which drains
// the connection and waits until it is closed (an index run must not exit
// with writes still buffered).
type Connect func(name string) (*nats.Conn, func(), error)

// Commands returns `index` and `search`. dataDir is where `search` keeps
// its own local index (under <dataDir>/search-index: `aptix up` holds the
// lock on <dataDir>/index while it runs).
func Commands(connect Connect, dataDir func() string) []*cobra.Command {
	return []*cobra.Command{indexCommand(connect), searchCommand(connect, dataDir)}
}

func indexCommand(connect Connect) *cobra.Command {
	var o retrieval.IndexOptions
	cmd := &cobra.Command{
		Use:   "index PATH [--workspace W] [--repo R] [--tag T]",
		Short: "Index a directory's source into the chunk store (incremental)",
		Long: "index walks PATH (honouring .gitignore; skipping vendored, generated, binary and large files),\n" +
			"chunks each source file on code boundaries and stores the chunks in JetStream (KV " + retrieval.Bucket + "),\n" +
			"where every retriever replica picks them up. Unchanged files are not re-chunked; files gone\n" +
			"since the last run are removed.",
		Example: `  aptix index . --workspace aptix --repo aptix
  aptix index ~/src/billing --workspace acme --repo billing --tag backend`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if info, err := os.Stat(args[0]); err != nil {
				return inputf("index %w", err)
			} else if !info.IsDir() {
				return inputf("index %s: not a directory", args[0])
			}
			if !contracts.IsToken(o.Workspace) || o.Repo != "" && !contracts.IsToken(o.Repo) {
				return inputf("--workspace %q, --repo %q: ids are 1-128 characters of [A-Za-z0-9_-]", o.Workspace, o.Repo)
			}
			if o.Repo == "" {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return err
				}
				o.Repo = token(filepath.Base(abs))
			}
			js, release, err := openJetStream(connect, "index")
			if err != nil {
				return err
			}
			defer release()
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				o.Progress = f
			}
			s, err := retrieval.IndexDir(cmd.Context(), js, args[0], o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %s into workspace %s, repo %s: %s\n", args[0], o.Workspace, o.Repo, s)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Workspace, "workspace", retrieval.DefaultWorkspace, "workspace id (what requests name in workspaceId)")
	cmd.Flags().StringVar(&o.Repo, "repo", "", "repository name (default: the directory's name)")
	cmd.Flags().StringSliceVar(&o.Tags, "tag", nil, "tag every chunk of this run (repeatable)")
	return cmd
}

// openJetStream connects and returns the JetStream context and the
// connection's release, which must drain and close it.
func openJetStream(connect Connect, name string) (jetstream.JetStream, func(), error) {
	nc, release, err := connect(name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		release()
		return nil, nil, err
	}
	return js, release, nil
}

// token makes a directory name usable as a repo id.
func token(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '-'
		}
	}
	if len(b) == 0 || !contracts.IsToken(string(b)) {
		return "repo"
	}
	return string(b)
}

func searchCommand(connect Connect, dataDir func() string) *cobra.Command {
	var (
		req     contracts.AgentExecuteRequest
		k       int
		asJSON  bool
		explain bool
	)
	cmd := &cobra.Command{
		Use:   "search QUERY [--workspace W] [--repo R] [--k N] [--json] [--explain]",
		Short: "Search the index as the retriever stage would for a turn with this instruction",
		Example: `  aptix search "where are retries scheduled" --workspace aptix
  aptix search "parse a duration" --workspace go --k 3 --json
  aptix search "round a float to the nearest integer" --workspace go --explain`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Instruction = strings.Join(args, " ")
			// The filters are checked as a turn's would be, before connecting.
			check := req
			check.ConversationId, check.TurnId = "search", "search"
			if err := check.Validate(); err != nil {
				return inputError{err}
			}
			js, release, err := openJetStream(connect, "search")
			if err != nil {
				return err
			}
			defer release()
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			ix, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: filepath.Join(dataDir(), "search-index"), K: k})
			if err != nil {
				return err
			}
			defer ix.Close()
			if why := ix.Rebuilt(); why != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "aptix: %s: rebuilding it from this server's chunk store\n", why)
			}
			if err := ix.WaitSynced(ctx); err != nil {
				return err
			}
			res, err := ix.Search(ctx, req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				for _, c := range res.Chunks {
					if err := enc.Encode(c); err != nil {
						return err
					}
				}
				return nil
			}
			if len(res.Chunks) == 0 {
				fmt.Fprintf(out, "no hits in workspace %s\n", res.Index)
				return nil
			}
			if explain {
				fmt.Fprintf(out, "query terms: %s\n", res.Query)
			}
			for i, c := range res.Chunks {
				first, _, _ := strings.Cut(strings.TrimSpace(c.Content), "\n")
				fmt.Fprintf(out, "%d. %s:%d-%d  %s  score %.2f  %s\n     %s\n", i+1, c.Path, c.StartLine, c.EndLine, c.Language, c.Score, c.Id, first)
				if explain {
					fmt.Fprintf(out, "     matched: %s%s%s%s\n", Matches(c.Matches), Akin(c.Akin), NearBy(c.Near), UsedBy(c.Uses))
				}
			}
			fmt.Fprintf(out, "%d hits in %.1f ms\n", len(res.Chunks), res.TookMs)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.WorkspaceId, "workspace", retrieval.DefaultWorkspace, "workspace id")
	f.StringVar(&req.Repo, "repo", "", "only this repository")
	f.StringVar(&req.Language, "language", "", "only this language (e.g. Go)")
	f.StringVar(&req.RagScope, "scope", "", "none, activeFiles, repo, workspace (default)")
	f.StringSliceVar(&req.ActiveFiles, "active-file", nil, "boost (or with --scope activeFiles, restrict to) this file")
	f.StringSliceVar(&req.Tags, "tag", nil, "only chunks with this tag")
	f.IntVar(&k, "k", 8, "number of hits")
	f.BoolVar(&asJSON, "json", false, "one JSON RagChunk per line")
	f.BoolVar(&explain, "explain", false, "show the query's terms and, for each hit, which terms matched which field")
	return cmd
}

// NearBy says where a chunk ranks among those nearest the question in
// meaning, "" when it is not among them.
func NearBy(rank int) string {
	if rank == 0 {
		return ""
	}
	return fmt.Sprintf("  near in meaning #%d", rank)
}

// Akin renders the question's words a chunk says in near words
// ("  akin: meet~satisfi 0.43"), "" for none.
func Akin(as []contracts.RagAkin) string {
	if len(as) == 0 {
		return ""
	}
	parts := make([]string, 0, len(as))
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%s~%s %.2f", a.Term, a.Word, a.Cosine))
	}
	return "  akin: " + strings.Join(parts, ", ")
}

// UsedBy says how many chunks use what a chunk declares, "" for none.
func UsedBy(uses float64) string {
	if uses == 0 {
		return ""
	}
	return fmt.Sprintf("  used by %.4g", uses)
}

// Matches renders why a chunk was chosen on one line: each field with the
// query terms it matched, expansions (terms the retriever added) marked +.
func Matches(ms []contracts.RagMatch) string {
	if len(ms) == 0 {
		return "(nothing recorded)"
	}
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		terms := make([]string, 0, len(m.Terms))
		for _, t := range m.Terms {
			if slices.Contains(m.Expanded, t) {
				t = "+" + t
			}
			terms = append(terms, t)
		}
		parts = append(parts, m.Field+"["+strings.Join(terms, " ")+"]")
	}
	return strings.Join(parts, " ")
}
