package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-enry/go-enry/v2"
	"github.com/nats-io/nats.go/jetstream"
	gitignore "github.com/sabhiram/go-gitignore"

	"github.com/aptix-dev/aptix/services/retriever/chunk"
)

// MaxFileBytes skips larger files: they are data, logs or bundles, not code
// a developer wants in a prompt, and their entry would not fit in the bucket.
const MaxFileBytes = 1 << 20

// Skip reasons counted in Summary.Skipped.
const (
	SkipIgnored     = "gitignored"
	SkipHidden      = "hidden"
	SkipVendored    = "vendored"
	SkipGenerated   = "generated"
	SkipBinary      = "binary"
	SkipTooLarge    = "over 1 MiB"
	SkipEntryLarge  = "entry over 1 MB"
	SkipInvalidUTF8 = "invalid UTF-8"
	SkipUnreadable  = "unreadable"
	SkipEmpty       = "empty"
	SkipUnknownLang = "unknown language"
)

// IndexOptions say what the files belong to.
type IndexOptions struct {
	Workspace string
	Repo      string
	// Tags are stored with every chunk of this run, for the request's Tags filter.
	Tags []string
	// Progress, when set, receives a progress line (rewritten in place) as files are read.
	Progress io.Writer
	Logger   *slog.Logger
}

// Summary tells what an IndexDir run did.
type Summary struct {
	Files       int            `json:"files"`       // source files indexed
	Unchanged   int            `json:"unchanged"`   // of those, left as stored (same hash)
	Written     int            `json:"written"`     // of those, chunked and written
	Deleted     int            `json:"deleted"`     // stored files no longer indexed
	Chunks      int            `json:"chunks"`      // chunks in the files written
	TotalChunks int            `json:"totalChunks"` // chunks of all indexed files
	Skipped     map[string]int `json:"skipped"`     // by reason
	Took        time.Duration  `json:"took"`
}

// String is the summary `aptix index` prints.
func (s Summary) String() string {
	reasons := make([]string, 0, len(s.Skipped))
	for r, n := range s.Skipped {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(reasons)
	skipped := "none"
	if len(reasons) > 0 {
		skipped = strings.Join(reasons, ", ")
	}
	return fmt.Sprintf("%d files (%d unchanged, %d written, %d deleted), %d chunks (%d written); skipped: %s; took %.2fs",
		s.Files, s.Unchanged, s.Written, s.Deleted, s.TotalChunks, s.Chunks, skipped, s.Took.Seconds())
}

// IndexDir walks root and brings the bucket's entries for workspace/repo in
// line with it: new and changed files are chunked and written, unchanged
// files are left alone, and entries of files that are gone (or now skipped)
// are deleted. A file that cannot be read or is not source is skipped with a
// reason; only a root that cannot be walked at all is an error.
func IndexDir(ctx context.Context, js jetstream.JetStream, root string, o IndexOptions) (Summary, error) {
	info, err := os.Stat(root)
	if err != nil {
		return Summary{}, fmt.Errorf("index %s: %w", root, err)
	}
	if !info.IsDir() {
		return Summary{}, fmt.Errorf("index %s: not a directory", root)
	}
	return indexFS(ctx, js, os.DirFS(root), o)
}

// file is one file to read, found by the walk.
type file struct {
	rel  string
	size int64
}

// result is a worker's verdict on one file.
type result struct {
	rel    string
	key    string
	skip   string
	hash   string
	n      int
	data   []byte // the marshalled FileRecord; nil when unchanged
	detail error
}

func indexFS(ctx context.Context, js jetstream.JetStream, fsys fs.FS, o IndexOptions) (Summary, error) {
	start := time.Now()
	s := Summary{Skipped: map[string]int{}}
	if err := validScope(o.Workspace, o.Repo); err != nil {
		return s, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := openBucket(ctx, js)
	if err != nil {
		return s, err
	}
	old, err := existing(ctx, kv, o.Workspace, o.Repo)
	if err != nil {
		return s, err
	}
	files, err := walk(fsys, func(rel, reason string) {
		s.Skipped[reason]++
		o.Logger.Debug("skipped", "path", rel, "reason", reason)
	})
	if err != nil {
		return s, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan file)
	results := make(chan result, 64)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for f := range jobs {
				r := prepare(fsys, f, o, old)
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, f := range files {
			select {
			case jobs <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	seen := make(map[string]bool, len(files))
	lastProgress := time.Time{}
	for r := range results {
		if r.skip != "" {
			s.Skipped[r.skip]++
			o.Logger.Debug("skipped", "path", r.rel, "reason", r.skip, "err", r.detail)
			continue
		}
		s.Files++
		s.TotalChunks += r.n
		seen[r.key] = true
		if r.data == nil {
			s.Unchanged++
		} else {
			if _, err := kv.Put(ctx, r.key, r.data); err != nil {
				return s, fmt.Errorf("store %s: %w", r.rel, err)
			}
			s.Written++
			s.Chunks += r.n
		}
		if o.Progress != nil && time.Since(lastProgress) > 100*time.Millisecond {
			lastProgress = time.Now()
			fmt.Fprintf(o.Progress, "\r\033[Kindexing %d/%d files, %d chunks: %s", s.Files, len(files), s.TotalChunks, clip(r.rel, 60))
		}
	}
	if o.Progress != nil {
		fmt.Fprint(o.Progress, "\r\033[K")
	}
	if err := ctx.Err(); err != nil {
		return s, err // interrupted: delete nothing on the strength of a partial walk
	}
	for key := range old {
		if seen[key] {
			continue
		}
		if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return s, fmt.Errorf("delete entry of a removed file: %w", err)
		}
		s.Deleted++
	}
	s.Took = time.Since(start)
	o.Logger.Info("indexed", "workspace", o.Workspace, "repo", o.Repo, "files", s.Files, "written", s.Written,
		"deleted", s.Deleted, "chunks", s.TotalChunks, "took", s.Took)
	return s, nil
}

// prepare reads, classifies and (unless its hash is already stored) chunks
// and marshals one file.
func prepare(fsys fs.FS, f file, o IndexOptions, old map[string]stored) result {
	r := result{rel: f.rel, key: fileKey(o.Workspace, o.Repo, f.rel)}
	if f.size > MaxFileBytes {
		r.skip = SkipTooLarge
		return r
	}
	data, err := readFile(fsys, f.rel)
	switch {
	case err != nil:
		r.skip, r.detail = SkipUnreadable, err
		return r
	case len(data) > MaxFileBytes: // grew since the walk
		r.skip = SkipTooLarge
		return r
	case len(data) == 0:
		r.skip = SkipEmpty
		return r
	case enry.IsBinary(data):
		r.skip = SkipBinary
		return r
	case !utf8.Valid(data):
		r.skip = SkipInvalidUTF8
		return r
	case (path.Ext(f.rel) != ".go" || onePlatform(f.rel)) && enry.IsGenerated(f.rel, data):
		// Generated Go is code a developer calls and asks about (go/types
		// from types2, the bundled HTTP/2, syscall wrappers, stringers):
		// it is indexed, and the reranker weighs it (fGenerated). But not
		// when it is built for one operating system and one architecture
		// (zerrors_linux_amd64.go): such files come in families, one per
		// platform, declaring the same names (the syscall package's error
		// numbers, call numbers and struct layouts, half the standard
		// library's generated Go), and they cost every search more than
		// they answer. Other languages' generated files are lock files,
		// minified scripts and designer output: skipped.
		r.skip = SkipGenerated
		return r
	}
	lang := enry.GetLanguage(path.Base(f.rel), data)
	if lang == "" {
		r.skip = SkipUnknownLang
		return r
	}
	r.hash = fileHash(data, o.Tags)
	if prev, ok := old[r.key]; ok && prev.hash == r.hash {
		r.n = prev.nChunks
		return r
	}
	rec := FileRecord{Workspace: o.Workspace, Repo: o.Repo, Path: f.rel, Language: lang, Tags: o.Tags, Hash: r.hash}
	rec.Chunks = chunks(o.Workspace, o.Repo, f.rel, lang, string(data))
	rec.NChunks = len(rec.Chunks)
	r.n = rec.NChunks
	r.data, err = json.Marshal(rec)
	if err != nil {
		r.skip, r.detail = SkipUnreadable, err
		return r
	}
	if len(r.data) > MaxEntryBytes-1024 {
		r.skip, r.data = SkipEntryLarge, nil
	}
	return r
}

// readFile reads a file through fsys. A variable so a test can make one
// file unreadable even when it runs as root.
var readFile = fs.ReadFile

func chunks(workspace, repo, path, language, content string) []Chunk {
	pieces := chunk.Split(language, content)
	out := make([]Chunk, 0, len(pieces))
	seen := map[string]int{}
	for _, p := range pieces {
		k := p.Symbol + "\x00" + p.Content
		n := seen[k]
		seen[k]++
		out = append(out, Chunk{Id: chunkID(workspace, repo, path, p.Symbol, p.Content, n),
			StartLine: p.StartLine, EndLine: p.EndLine, Symbol: p.Symbol, Content: p.Content})
	}
	return out
}

// ignoreFile is a .gitignore and the directory (relative to the root) it governs.
type ignoreFile struct {
	dir string
	m   *gitignore.GitIgnore
}

// walk lists the regular files under fsys's root with their slash-separated
// paths. Files and directories excluded by a .gitignore (at any level),
// hidden ones and vendored ones are reported to skipped instead.
func walk(fsys fs.FS, skipped func(rel, reason string)) ([]file, error) {
	var ignores []ignoreFile
	ignored := func(rel string, isDir bool) bool {
		for _, ig := range ignores {
			sub := rel
			if ig.dir != "." {
				if !strings.HasPrefix(rel, ig.dir+"/") {
					continue
				}
				sub = rel[len(ig.dir)+1:]
			}
			if ig.m.MatchesPath(sub) || isDir && ig.m.MatchesPath(sub+"/") {
				return true
			}
		}
		return false
	}
	var files []file
	err := fs.WalkDir(fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			skipped(rel, SkipUnreadable)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if rel != "." {
				switch {
				case strings.HasPrefix(name, "."):
					if name != ".git" {
						skipped(rel, SkipHidden)
					}
					return fs.SkipDir
				case ignored(rel, true):
					skipped(rel, SkipIgnored)
					return fs.SkipDir
				case enry.IsVendor(rel + "/"):
					skipped(rel, SkipVendored)
					return fs.SkipDir
				}
			}
			if data, err := fs.ReadFile(fsys, path.Join(rel, ".gitignore")); err == nil {
				ignores = append(ignores, ignoreFile{dir: rel, m: gitignore.CompileIgnoreLines(strings.Split(string(data), "\n")...)})
			}
			return nil
		}
		switch {
		case !d.Type().IsRegular():
			return nil // symlinks, devices, sockets
		case strings.HasPrefix(name, "."):
			skipped(rel, SkipHidden)
		case ignored(rel, false):
			skipped(rel, SkipIgnored)
		case enry.IsVendor(rel):
			skipped(rel, SkipVendored)
		default:
			var size int64
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			files = append(files, file{rel: rel, size: size})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk: %w", err)
	}
	return files, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
