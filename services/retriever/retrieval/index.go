package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/services/retriever/codetext"
	"github.com/aptix-dev/aptix/services/retriever/termindex"
	"github.com/aptix-dev/aptix/services/retriever/usage"
)

// Options configure an Index. Zero values take the defaults.
type Options struct {
	// DataDir holds the local bleve index; each replica needs its own.
	DataDir string
	// K is the number of chunks a search returns (default 8).
	K int
	// MaxChars bounds the total content of a search's chunks (default 24000).
	MaxChars int
	// FreshWait bounds how long a search waits for this replica to apply
	// the chunk store's writes that finished before the search began
	// (default 5s; negative: search at once on what is applied).
	FreshWait time.Duration
	Logger    *slog.Logger
}

// ErrNotReady is returned by Search while a replica whose local index has
// never been complete is still loading the bucket: the stage retries with
// backoff rather than run a turn on a half-built index.
var ErrNotReady = errors.New("retrieval: local index is still loading the chunk store")

// Index is a replica's local search index, kept in step with the bucket.
type Index struct {
	o   Options
	kv  jetstream.KeyValue
	nc  *nats.Conn
	idx bleve.Index
	// mem scores the searches (see termindex); it is rebuilt from the
	// bucket on every start and follows it with idx. Until it has loaded
	// the whole bucket (memReady), searches are run by idx.
	mem      *termindex.Index
	memReady atomic.Bool
	log      *slog.Logger
	applied  atomic.Uint64 // highest bucket revision applied to idx
	ready    atomic.Bool   // idx has held the whole bucket at least once
	stop     context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	err      error  // why following stopped, if it did
	rebuilt  string // why Open discarded the local index it found, if it did
	abbrevs  abbrevCache
	// relatedWords: the words related to a query term (related.go)
	relatedWords relatedCache
	// vecs: each term's word vector and weight by term id (wordvec.go)
	vecs vecCache
}

// Internal keys kept in the bleve index next to the documents.
var (
	schemaKey   = []byte("schema")
	completeKey = []byte("complete") // set once the initial load finished
)

// Open opens (or creates) the local index under o.DataDir, catches it up
// with the bucket in the background and keeps following the bucket until
// Close. Files whose hash is unchanged since the last run are not re-indexed.
func Open(ctx context.Context, js jetstream.JetStream, o Options) (*Index, error) {
	if o.DataDir == "" {
		return nil, errors.New("retrieval: a data directory is required")
	}
	if o.K <= 0 {
		o.K = 8
	}
	if o.MaxChars <= 0 {
		o.MaxChars = 24000
	}
	if o.FreshWait == 0 {
		o.FreshWait = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := openBucket(ctx, js)
	if err != nil {
		return nil, err
	}
	source, err := bucketSource(ctx, js, kv)
	if err != nil {
		return nil, err
	}
	idx, rebuilt, err := openLocal(filepath.Join(o.DataDir, "chunks.bleve"), source, o.Logger)
	if err != nil {
		return nil, err
	}
	ix := &Index{o: o, kv: kv, nc: js.Conn(), idx: idx, mem: termindex.New(), log: o.Logger.With("component", "retrieval"), done: make(chan struct{}), rebuilt: rebuilt}
	if v, _ := idx.GetInternal(completeKey); v != nil {
		ix.ready.Store(true) // stale at worst until the watch catches up
	}
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		idx.Close()
		return nil, fmt.Errorf("watch %s: %w", Bucket, err)
	}
	fctx, stop := context.WithCancel(context.Background())
	ix.stop = stop
	go ix.follow(fctx, w)
	return ix, nil
}

// openLocal opens the bleve index at path, creating it, or recreating it
// when it was built with another schema version or synced from another
// chunk store than source (see bucketSource). rebuilt says why an existing
// index was discarded.
func openLocal(path, source string, log *slog.Logger) (idx bleve.Index, rebuilt string, err error) {
	idx, err = bleve.OpenUsing(path, map[string]any{"bolt_timeout": openTimeout.String()})
	if err == nil {
		v, verr := idx.GetInternal(schemaKey)
		from, ferr := idx.GetInternal(sourceKey)
		switch {
		case verr != nil || string(v) != schemaVersion:
			rebuilt = fmt.Sprintf("local index %s has schema %q, not %q", path, v, schemaVersion)
		case ferr != nil || len(from) == 0:
			rebuilt = fmt.Sprintf("local index %s does not record the chunk store it was synced from", path)
		case string(from) != source:
			rebuilt = fmt.Sprintf("local index %s was synced from another chunk store (%s; this server has %s)", path, from, source)
		default:
			return idx, "", nil
		}
		idx.Close()
		log.Info("discarding the local index: rebuilding it from the chunk store", "path", path, "reason", rebuilt)
		if err := os.RemoveAll(path); err != nil {
			return nil, "", fmt.Errorf("remove outdated local index: %w", err)
		}
	} else if errors.Is(err, bleve.ErrorIndexMetaMissing) || errors.Is(err, bleve.ErrorIndexMetaCorrupt) {
		// bleve writes its metadata file without an fsync: a power loss
		// soon after the index was created can leave the directory without
		// it. The index is a cache of the chunk store, so it is rebuilt
		// rather than stopping the server.
		rebuilt = fmt.Sprintf("local index %s is damaged (%v)", path, err)
		log.Warn("discarding the local index: rebuilding it from the chunk store", "path", path, "reason", rebuilt)
		if err := os.RemoveAll(path); err != nil {
			return nil, "", fmt.Errorf("remove damaged local index: %w", err)
		}
	} else if !errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
		return nil, "", fmt.Errorf("open local index %s (is another retriever using this data dir?): %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", fmt.Errorf("create index dir: %w", err)
	}
	idx, err = bleve.New(path, indexMapping())
	if err != nil {
		return nil, "", fmt.Errorf("create local index %s: %w", path, err)
	}
	for k, v := range map[string]string{string(schemaKey): schemaVersion, string(sourceKey): source} {
		if err := idx.SetInternal([]byte(k), []byte(v)); err != nil {
			idx.Close()
			return nil, "", fmt.Errorf("create local index: %w", err)
		}
	}
	return idx, rebuilt, nil
}

// openTimeout bounds the wait for the local index's file lock: a second
// process on the same data dir gets an error instead of blocking for ever.
const openTimeout = 2 * time.Second

// schemaVersion is kept in the local index; an index built with another
// mapping or document shape is discarded and rebuilt from the bucket.
const schemaVersion = "aptix-chunks-5"

// indexMapping: code-aware text fields (codetext: identifiers split into
// words, lower-cased, English stop words out, stemmed) scored with BM25, and
// keyword fields for the filters and the deterministic sort. Nothing else is
// indexed: no dynamic fields and no _all field, which would double the index.
func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = "bm25"
	text := func(store bool) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = codetext.AnalyzerName
		f.Store = store
		f.IncludeTermVectors = false
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	kw := func(store bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Analyzer = keyword.Name
		f.Store = store
		f.IncludeTermVectors = false
		f.IncludeInAll = false
		return f
	}
	num := bleve.NewNumericFieldMapping()
	num.IncludeInAll = false
	doc := bleve.NewDocumentMapping()
	doc.Dynamic = false
	doc.AddFieldMappingsAt("content", text(true))
	doc.AddFieldMappingsAt("symbol", text(true))
	doc.AddFieldMappingsAt("doc", text(false))
	doc.AddFieldMappingsAt("path", text(false))
	doc.AddFieldMappingsAt("file", kw(true))
	doc.AddFieldMappingsAt("repo", kw(true))
	doc.AddFieldMappingsAt("language", kw(true))
	for _, f := range []string{"workspace", "lang", "tags", "dir", "kind"} {
		doc.AddFieldMappingsAt(f, kw(false))
	}
	doc.AddFieldMappingsAt("startLine", num)
	doc.AddFieldMappingsAt("endLine", num)
	im.DefaultMapping = doc
	im.DefaultAnalyzer = codetext.AnalyzerName
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	return im
}

// chunkDoc is what bleve indexes for one chunk.
type chunkDoc struct {
	Content   string   `json:"content"`
	Symbol    string   `json:"symbol"`
	Doc       string   `json:"doc"` // the chunk's leading comment: what the code says it does
	Path      string   `json:"path"`
	File      string   `json:"file"`
	Workspace string   `json:"workspace"`
	Repo      string   `json:"repo"`
	Language  string   `json:"language"`
	Lang      string   `json:"lang"` // lower-cased Language, for the filter
	Tags      []string `json:"tags"`
	Dir       string   `json:"dir"`  // the file's directory: its package, in Go
	Kind      string   `json:"kind"` // kindPackageDoc for a package's doc comment
	StartLine int      `json:"startLine"`
	EndLine   int      `json:"endLine"`
}

// kindPackageDoc marks the chunk holding a Go package's doc comment: the
// package's own summary of what it is for, searched first (see packages).
const kindPackageDoc = "pkgdoc"

func kind(language, comment, content string) string {
	if language == "Go" && (strings.HasPrefix(comment, "Package ") || strings.Contains(comment, "\nPackage ")) && strings.Contains(content, "\npackage ") {
		return kindPackageDoc
	}
	return ""
}

// symbolWords is the symbol as indexed: without the declaration keyword
// every Go function and type has ("func", "type"), which would only add a
// word that matches everything to the field.
func symbolWords(symbol string) string {
	for _, kw := range []string{"func ", "type "} {
		if rest, ok := strings.CutPrefix(symbol, kw); ok {
			return rest
		}
	}
	return symbol
}

// leadingComment returns the comment lines a chunk starts with (a Go doc
// comment, a shell or Python header; blank lines between comment blocks are
// skipped) without their markers. They say in words what the code does, so
// they are a field of their own: a question that matches them matches the
// declaration's purpose, not a passing use. In Markdown a # is a heading,
// already the chunk's symbol.
func leadingComment(language, content string) string {
	marks := []string{"//", "/*", "*", "#"}
	if language == "Markdown" {
		marks = marks[:3]
	}
	var b strings.Builder
	for line := range strings.Lines(content) {
		t := strings.TrimSpace(line)
		if t == "" {
			continue // a licence header, a blank line, then the package's doc comment
		}
		var ok bool
		for _, mark := range marks {
			if rest, found := strings.CutPrefix(t, mark); found {
				t, ok = strings.TrimSpace(rest), true
				break
			}
		}
		if !ok {
			break
		}
		b.WriteString(t)
		b.WriteByte('\n')
	}
	return b.String()
}

// summarySpan is where a doc comment's summary lies in it: its first
// sentence, after a licence header when the comment starts with one (a
// file's first chunk holds the licence, then the package's doc comment,
// which leadingComment joins). A licence with no package doc comment after
// it has no summary.
func summarySpan(comment string) [2]int {
	from := 0
	first, _, _ := strings.Cut(comment, "\n")
	if strings.HasPrefix(strings.ToLower(first), "copyright") || strings.HasPrefix(first, "SPDX-") {
		i := strings.Index(comment, "\nPackage ")
		if i < 0 {
			return [2]int{}
		}
		from = i + 1
	}
	return [2]int{from, from + len(firstSentence(comment[from:]))}
}

// summary is the doc comment's summary text (summarySpan).
func summary(comment string) string {
	sp := summarySpan(comment)
	return comment[sp[0]:sp[1]]
}

// firstSentence is a doc comment's summary: up to its first full stop
// followed by a space or a line's end, or its first paragraph. Go's doc
// convention puts what a declaration does there, in the words a question
// would use; the rest of a long doc comment matches questions about other
// things (see rerank).
func firstSentence(comment string) string {
	for i := 0; i < len(comment); i++ {
		switch comment[i] {
		case '.':
			if i+1 == len(comment) || comment[i+1] == ' ' || comment[i+1] == '\n' {
				return comment[:i]
			}
		case '\n':
			if i+1 < len(comment) && comment[i+1] == '\n' {
				return comment[:i]
			}
		}
	}
	return comment
}

// Per-file internal keys: the stored hash and the chunk ids a file has in the index.
func hashKey(fileKey string) []byte { return []byte("hash:" + fileKey) }
func idsKey(fileKey string) []byte  { return []byte("ids:" + fileKey) }

// maxBatchDocs bounds one bleve batch: big enough that the initial load
// makes few segments, small enough to bound memory. A batch's analysed
// chunks (bleve's and the scoring index's) stay live until both have
// taken them, and the collector lets the heap grow to about twice what is
// live: at 5,000 the standard library's indexing peaked at 764-908 MB, at
// 2,500 at 642-691 MB, in the same time (docs/retrieval.md, eighteenth
// pass).
const maxBatchDocs = 2500

// follow applies bucket updates in batches until ctx ends. During the
// initial load it fills each batch before committing it; afterwards it
// commits whatever has arrived, so an update is searchable at once.
func (ix *Index) follow(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(ix.done)
	defer w.Stop()
	updates := w.Updates()
	loading := true
	for {
		b := newBatch(ix)
		caughtUp := false
	fill:
		for b.docs < maxBatchDocs && b.memDocs < maxBatchDocs {
			var e jetstream.KeyValueEntry
			var ok bool
			if loading || b.entries == 0 {
				select {
				case <-ctx.Done():
					return
				case e, ok = <-updates:
				}
			} else {
				select {
				case e, ok = <-updates:
				default:
					break fill
				}
			}
			switch {
			case !ok:
				if ctx.Err() != nil || ix.closing() {
					// Close, or the process draining its connection to
					// stop: a clean stop, no error to report.
					ix.log.Debug("local index stopped following the chunk store: the connection closed")
					ix.setErr(errors.New("the NATS connection closed"))
					return
				}
				ix.fail(errors.New("bucket watch ended"))
				return
			case e == nil: // every value present at Open has been delivered
				caughtUp = loading
				loading = false
				break fill
			}
			b.add(e)
		}
		if caughtUp {
			b.b.SetInternal(completeKey, []byte("1"))
		}
		if err := b.commit(); err != nil {
			ix.fail(err)
			return
		}
		if caughtUp {
			ix.ready.Store(true)
			ix.memReady.Store(true)
			ix.log.Info("local index caught up with the chunk store", "revision", ix.applied.Load())
		}
	}
}

func (ix *Index) fail(err error) {
	ix.setErr(err)
	ix.log.Error("local index stopped following the chunk store", "err", err)
}

func (ix *Index) setErr(err error) {
	ix.mu.Lock()
	ix.err = err
	ix.mu.Unlock()
}

// closing reports whether the index's NATS connection is being drained or
// was closed by its owner.
func (ix *Index) closing() bool {
	return ix.nc != nil && (ix.nc.IsDraining() || ix.nc.IsClosed())
}

// batch gathers updates for one bleve batch. pending remembers the ids a
// file got earlier in the same batch, which bleve cannot yet answer.
type batch struct {
	ix      *Index
	b       *bleve.Batch
	memOps  []memOp // for the scoring index, analysed in commit
	memDocs int
	memSeen map[string]bool // files replaced or deleted in mem by this batch
	pending map[string][]string
	hashes  map[string]string
	maxRev  uint64
	docs    int
	entries int
	err     error
}

func newBatch(ix *Index) *batch {
	return &batch{ix: ix, b: ix.idx.NewBatch(), pending: map[string][]string{}, hashes: map[string]string{}, memSeen: map[string]bool{}}
}

func (b *batch) oldIDs(key string) []string {
	if ids, ok := b.pending[key]; ok {
		return ids
	}
	raw, err := b.ix.idx.GetInternal(idsKey(key))
	if err != nil || raw == nil {
		return nil
	}
	var ids []string
	_ = json.Unmarshal(raw, &ids)
	return ids
}

func (b *batch) add(e jetstream.KeyValueEntry) {
	b.maxRev = max(b.maxRev, e.Revision())
	b.entries++
	key := e.Key()
	if e.Operation() != jetstream.KeyValuePut {
		for _, id := range b.oldIDs(key) {
			b.b.Delete(id)
		}
		b.pending[key] = nil
		b.b.DeleteInternal(idsKey(key))
		b.b.DeleteInternal(hashKey(key))
		b.memOps = append(b.memOps, memOp{key: key})
		b.memSeen[key] = true
		return
	}
	var rec FileRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		b.ix.log.Warn("undecodable chunk entry skipped", "key", key, "err", err)
		return
	}
	b.addMem(key, &rec)
	if h, ok := b.hashes[key]; ok && h == rec.Hash {
		return
	}
	if h, _ := b.ix.idx.GetInternal(hashKey(key)); string(h) == rec.Hash {
		if _, inBatch := b.pending[key]; !inBatch {
			return // already indexed by an earlier run of this replica
		}
	}
	for _, id := range b.oldIDs(key) {
		b.b.Delete(id)
	}
	ids := make([]string, 0, len(rec.Chunks))
	for _, c := range rec.Chunks {
		comment := leadingComment(rec.Language, c.Content)
		doc := chunkDoc{Content: c.Content, Symbol: symbolWords(c.Symbol), Doc: comment, Path: rec.Path, Dir: path.Dir(rec.Path), Kind: kind(rec.Language, comment, c.Content), File: rec.Path, Workspace: rec.Workspace,
			Repo: rec.Repo, Language: rec.Language, Lang: strings.ToLower(rec.Language), Tags: rec.Tags, StartLine: c.StartLine, EndLine: c.EndLine}
		if err := b.b.Index(c.Id, doc); err != nil {
			b.ix.log.Warn("chunk not indexed", "id", c.Id, "err", err)
			continue
		}
		ids = append(ids, c.Id)
		b.docs++
	}
	b.pending[key] = ids
	b.hashes[key] = rec.Hash
	raw, _ := json.Marshal(ids)
	b.b.SetInternal(idsKey(key), raw)
	b.b.SetInternal(hashKey(key), []byte(rec.Hash))
}

// memOp is a file to replace (rec) or delete in the scoring index.
type memOp struct {
	key string
	rec *FileRecord
}

// addMem replaces the file's chunks in the scoring index, unless it holds
// them already (same hash, not changed earlier in this batch).
func (b *batch) addMem(key string, rec *FileRecord) {
	if h, ok := b.ix.mem.FileHash(key); ok && h == rec.Hash && !b.memSeen[key] {
		return
	}
	b.memSeen[key] = true
	b.memOps = append(b.memOps, memOp{key: key, rec: rec})
	b.memDocs += len(rec.Chunks)
}

// memUpdate analyses the batch's files for the scoring index. Terms are
// interned across the batch: a corpus repeats its words, and one string
// per distinct term is much less garbage than one per token.
func (b *batch) memUpdate() *termindex.Update {
	var u termindex.Update
	intern := map[string]string{}
	for _, op := range b.memOps {
		if op.rec == nil {
			u.Delete(op.key)
			continue
		}
		u.Replace(op.key, op.rec.Hash, memChunks(op.rec, intern))
	}
	return &u
}

func memChunks(rec *FileRecord, intern map[string]string) []termindex.Chunk {
	dir := path.Dir(rec.Path)
	lang := strings.ToLower(rec.Language)
	chunks := make([]termindex.Chunk, 0, len(rec.Chunks))
	pkg, imports := goPackage(rec)
	var head string
	if len(rec.Chunks) > 0 {
		head = rec.Chunks[0].Content
	}
	fs, plat := fileShape(rec.Path, head)
	platKeys := plat.keywords(narrowPlatforms)
	for _, c := range rec.Chunks {
		comment := leadingComment(rec.Language, c.Content)
		sym := symbolWords(c.Symbol)
		m := &memMeta{file: rec.Path, repo: rec.Repo, language: rec.Language, symbol: sym, startLine: c.StartLine, endLine: c.EndLine, shape: shapeOf(c.Symbol) | fs, plat: plat}
		tc := termindex.Chunk{ID: c.Id, Meta: m}
		if rec.Language == "Go" {
			m.use, m.decl = usage.Key(pkg, c.Symbol)
			tc.Keyword[termindex.Uses] = internAll(usage.Refs(pkg, imports, c.Content), intern)
			if m.decl != "" {
				tc.Keyword[termindex.Uses] = append(tc.Keyword[termindex.Uses], m.decl)
			}
		}
		for f, text := range [termindex.NumText]string{sym, comment, rec.Path, c.Content} {
			if f == termindex.Doc {
				var i, j int
				tc.Text[f], i, j = analyzedSpan(text, summarySpan(text), intern)
				tc.Summary = tc.Text[f][i:j] // the summary's terms are a run of the doc's
				continue
			}
			tc.Text[f] = analyzed(text, intern)
		}
		m.symbolLen = uint8(min(len(tc.Text[termindex.Symbol]), math.MaxUint8))
		tc.Vector = chunkVector(tc.Text[termindex.Doc], tc.Text[termindex.Symbol], tc.Text[termindex.Content])
		tc.Keyword[termindex.Workspace] = []string{rec.Workspace}
		tc.Keyword[termindex.Repo] = []string{rec.Repo}
		tc.Keyword[termindex.Lang] = []string{lang}
		tc.Keyword[termindex.File] = []string{rec.Path}
		tc.Keyword[termindex.Dir] = []string{dir}
		if k := kind(rec.Language, comment, c.Content); k != "" {
			tc.Keyword[termindex.Kind] = []string{k}
		}
		tc.Keyword[termindex.Tags] = rec.Tags
		tc.Keyword[termindex.Platform] = platKeys
		chunks = append(chunks, tc)
	}
	return chunks
}

// memMeta is what a scoring-index hit carries: the stored fields a search
// needs, but the text, which stays in bleve.
type memMeta struct {
	file, repo, language, symbol string
	startLine, endLine           int
	use, decl                    string    // the declaration's keys in the Uses field, see usageFactors
	shape                        uint8     // shapeFunc, shapeMethod..., see rerank
	symbolLen                    uint8     // the symbol field's terms, see rerank
	plat                         platforms // those its file builds for, see filePlatforms
}

// goPackage is the package a Go file declares and the names its imports
// are known by, read from its chunks before the first declaration (the
// package clause and the import declarations are there).
func goPackage(rec *FileRecord) (pkg string, imports map[string]bool) {
	if rec.Language != "Go" {
		return "", nil
	}
	var head strings.Builder
	for _, c := range rec.Chunks {
		if c.Symbol != "" && head.Len() > 0 {
			break
		}
		head.WriteString(c.Content)
		head.WriteByte('\n')
	}
	return usage.Package(head.String()), usage.Imports(head.String())
}

// internAll replaces each string of ss by intern's copy.
func internAll(ss []string, intern map[string]string) []string {
	for i, s := range ss {
		if v, ok := intern[s]; ok {
			ss[i] = v
		} else {
			intern[s] = s
		}
	}
	return ss
}

// analyzed is text's token stream as the index analyses it: every term,
// repeats included, each distinct term one string of intern.
func analyzed(text string, intern map[string]string) []string {
	out, _, _ := analyzedSpan(text, [2]int{}, intern)
	return out
}

// analyzedSpan is analyzed, and which of the terms, out[i:j], come from
// text[span[0]:span[1]].
func analyzedSpan(text string, span [2]int, intern map[string]string) (out []string, i, j int) {
	if text == "" {
		return nil, 0, 0
	}
	ts := analyzer().Analyze([]byte(text))
	out = make([]string, len(ts))
	i = len(ts)
	for k, t := range ts {
		s, ok := intern[string(t.Term)]
		if !ok {
			s = string(t.Term)
			intern[s] = s
		}
		out[k] = s
		if t.Start >= span[0] && t.End <= span[1] {
			i, j = min(i, k), k+1
		}
	}
	if j == 0 {
		return out, 0, 0
	}
	return out, i, j
}

// commit applies the batch to bleve and, once bleve has it, to the scoring
// index (so a hit of the scoring index is in bleve's stored fields). The
// scoring index's analysis runs while bleve indexes.
func (b *batch) commit() error {
	done := make(chan error, 1)
	go func() { done <- b.ix.idx.Batch(b.b) }()
	u := b.memUpdate()
	if err := <-done; err != nil {
		return fmt.Errorf("apply index batch: %w", err)
	}
	b.ix.mem.Apply(u)
	b.ix.abbrevs.reset() // the symbol vocabulary may have changed
	b.ix.relatedWords.reset()
	b.ix.vecs.reset() // term ids and idf move with the index
	if b.maxRev > b.ix.applied.Load() {
		b.ix.applied.Store(b.maxRev)
	}
	return nil
}

// WaitSynced returns once the local index has loaded the bucket and applied
// every update that existed when it was called.
func (ix *Index) WaitSynced(ctx context.Context) error {
	target, err := ix.lastRevision(ctx)
	if err != nil {
		return err
	}
	return ix.waitApplied(ctx, target)
}

// lastRevision is the bucket's newest revision: what a search must see to
// include every write that finished before it.
func (ix *Index) lastRevision(ctx context.Context) (uint64, error) {
	st, err := ix.kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("chunk store status: %w", err)
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		return bs.StreamInfo().State.LastSeq, nil
	}
	return 0, nil
}

func (ix *Index) waitApplied(ctx context.Context, target uint64) error {
	for !ix.ready.Load() || ix.applied.Load() < target {
		ix.mu.Lock()
		err := ix.err
		ix.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local index at revision %d of %d: %w", ix.applied.Load(), target, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// catchUp makes a search read its writer's writes: `aptix index` returns
// once the bucket holds every file, but this replica applies them a moment
// later (seconds for a whole repository on a busy machine), and a turn sent
// in between would otherwise search a half-applied index. It waits at most
// FreshWait, then lets the search run on what is applied.
func (ix *Index) catchUp(ctx context.Context) {
	if ix.o.FreshWait < 0 {
		return
	}
	target, err := ix.lastRevision(ctx)
	if err != nil {
		ix.log.Warn("searching without checking the chunk store for newer writes", "err", err)
		return
	}
	if ix.applied.Load() >= target {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, ix.o.FreshWait)
	defer cancel()
	if err := ix.waitApplied(wctx, target); err != nil && ctx.Err() == nil {
		ix.log.Warn("searching an index still applying newer writes", "err", err)
	}
}

// Rebuilt says why Open discarded the local index it found in DataDir
// (another schema, or synced from another chunk store) and is rebuilding
// it from the bucket; it is empty when the index was kept or new.
func (ix *Index) Rebuilt() string { return ix.rebuilt }

// Close stops following the bucket and closes the local index.
func (ix *Index) Close() error {
	ix.stop()
	<-ix.done
	return ix.idx.Close()
}
