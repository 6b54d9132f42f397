// Package termindex is the retriever's in-memory scoring index: per-field
// postings with term frequencies and field lengths, kept in step with the
// chunk store one file at a time, and a query evaluator that scores exactly
// as the bleve query the retriever builds would (BM25 per field, nested
// disjunctions scaled by the share of their clauses that matched, a
// should-clause bonus, bleve's query norm), in a few tight loops over
// arrays instead of bleve's searcher tree. bleve scores every chunk that
// holds any looked-up term through iterators, heaps and pooled matches;
// here the same postings are walked term at a time into score
// accumulators (figures: docs/retrieval.md, "Engine pass").
//
// The index holds what scoring needs and no text: the stored fields stay in
// the replica's bleve index.
package termindex

import (
	"math"
	"math/bits"
	"slices"
	"sync"
)

// Text fields, scored with BM25.
const (
	Symbol = iota
	Doc
	Path
	Content
	NumText
)

// TextFieldNames are the text fields' names, in field order.
var TextFieldNames = [NumText]string{"symbol", "doc", "path", "content"}

// Keyword fields: one value each (Tags, Platform and Uses: several),
// matched whole.
// Uses holds the names a chunk refers to (package usage), counted with
// Counts: how many chunks use a declaration.
const (
	Workspace = iota
	Repo
	Lang
	File
	Dir
	Kind
	Tags
	Platform
	Uses
	NumKeyword
)

// KeywordFieldNames are the keyword fields' names, in field order.
var KeywordFieldNames = [NumKeyword]string{"workspace", "repo", "lang", "file", "dir", "kind", "tags", "platform", "uses"}

// BM25 parameters, bleve's (search.BM25_k1, search.BM25_b).
const (
	K1 = 1.2
	B  = 0.75
)

// Chunk is one document as the index takes it: the analysed terms of each
// text field (every token, repeats included: the field's length is their
// number) and the keyword values.
type Chunk struct {
	ID      string
	Text    [NumText][]string
	Keyword [NumKeyword][]string
	// Summary is the analysed terms of the doc comment's first sentence,
	// a subset of the Doc field's: Matched reports them as field Summary;
	// they are not searched.
	Summary []string
	// Meta is the caller's, returned with a hit (path, lines, language...).
	Meta any
	// Vector is the chunk's place in meaning, unit length, each coordinate
	// times 127 (nil: none): Query.Near finds the nearest (near.go).
	Vector []int8
}

type posting struct {
	doc uint32
	tf  uint32
}

type textField struct {
	ids    map[string]uint32           // term → term number
	terms  []string                    // term number → term
	post   [][]posting                 // term number → postings, doc order (dead docs included until compaction)
	df     []uint32                    // live documents holding the term
	short  [256][MaxShort + 1][]uint32 // terms of up to MaxShort bytes by first byte and length, see ShortTerms
	vocab  int                         // terms with df > 0
	sumLen float64                     // the live chunks' lengths, for MeanLength
}

func (f *textField) termID(t string) uint32 {
	if id, ok := f.ids[t]; ok {
		return id
	}
	id := uint32(len(f.terms))
	f.ids[t] = id
	f.terms = append(f.terms, t)
	f.post = append(f.post, nil)
	f.df = append(f.df, 0)
	if len(t) <= MaxShort && t != "" {
		f.short[t[0]][len(t)] = append(f.short[t[0]][len(t)], id)
	}
	return id
}

// doc is a chunk. Its slices are flat with offsets: the fewer pointers the
// index holds, the less the garbage collector has to scan.
type doc struct {
	id      string
	live    bool
	lens    [NumText]float64    // field length as bleve recovers it from its float32 norm
	terms   []uint32            // distinct terms of each field, sorted, for deletion and Matched; then the summary's
	termOff [NumText + 2]uint32 // the last segment: the summary's terms in order (Chunk.Summary)
	kw      []uint32            // keyword value numbers of each field
	kwOff   [NumKeyword + 1]uint16
	vec     int32 // its row in Index.vecDocs; -1: no vector (or dead)
	meta    any
}

func (d *doc) keywords(field int) []uint32 { return d.kw[d.kwOff[field]:d.kwOff[field+1]] }

// keywordField interns a keyword field's values.
type keywordField struct {
	ids   map[string]uint32
	df    []int      // live documents holding the value
	post  [][]uint32 // the documents holding the value (dead ones until compaction)
	vocab int        // values with df > 0
}

// noValue is a keyword value no document holds.
const noValue = math.MaxUint32

func (k *keywordField) id(v string) uint32 {
	if id, ok := k.ids[v]; ok {
		return id
	}
	return noValue
}

func (k *keywordField) count(v string) int {
	if id, ok := k.ids[v]; ok {
		return k.df[id]
	}
	return 0
}

// Index is safe for concurrent use: searches share a read lock, updates
// take the write lock.
type Index struct {
	mu    sync.RWMutex
	text  [NumText]textField
	kw    [NumKeyword]keywordField
	docs  []doc
	byID  map[string]uint32
	files map[string]fileEntry
	live  int
	dead  int // dead entries still in the postings
	pool  sync.Pool
	// The chunks' vectors (near.go), a row each, live and dead until
	// compaction, in the order they were added: row i is chunk vecDocs[i]'s,
	// its coordinates vecs[i·dim:] and its signs signs[i·signWords(dim):].
	dim     int
	vecDocs []uint32
	vecs    []int8
	signs   []uint64
}

type fileEntry struct {
	hash string
	docs []string
}

// New returns an empty index.
func New() *Index {
	ix := &Index{byID: map[string]uint32{}, files: map[string]fileEntry{}}
	for i := range ix.text {
		ix.text[i].ids = map[string]uint32{}
	}
	for i := range ix.kw {
		ix.kw[i].ids = map[string]uint32{}
	}
	return ix
}

// FileHash is the hash the file key was last replaced with, and whether
// the index holds the file at all.
func (ix *Index) FileHash(key string) (string, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	e, ok := ix.files[key]
	return e.hash, ok
}

// Update is a batch of file replacements and deletions, applied at once.
type Update struct {
	files []fileUpdate
}

type fileUpdate struct {
	key, hash string
	del       bool
	chunks    []Chunk
}

// Replace sets a file's chunks (its earlier ones are removed).
func (u *Update) Replace(key, hash string, chunks []Chunk) {
	u.files = append(u.files, fileUpdate{key: key, hash: hash, chunks: chunks})
}

// Delete removes a file's chunks.
func (u *Update) Delete(key string) { u.files = append(u.files, fileUpdate{key: key, del: true}) }

// Len is the number of file operations in u.
func (u *Update) Len() int { return len(u.files) }

// Apply applies u in order: a file's chunks are replaced as a whole, so a
// search sees a file before or after an update, never half of it.
func (ix *Index) Apply(u *Update) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range u.files {
		if old, ok := ix.files[f.key]; ok {
			for _, id := range old.docs {
				ix.remove(id)
			}
			delete(ix.files, f.key)
		}
		if f.del {
			continue
		}
		ids := make([]string, 0, len(f.chunks))
		for i := range f.chunks {
			ix.add(&f.chunks[i])
			ids = append(ids, f.chunks[i].ID)
		}
		ix.files[f.key] = fileEntry{hash: f.hash, docs: ids}
	}
	if ix.dead > 1024 && ix.dead > ix.live/4 {
		ix.compact()
	}
}

// fieldLength is the length bleve's BM25 sees: zap stores the norm
// 1/sqrt(length) as a float32 and the scorer computes 1/norm².
func fieldLength(n int) float64 {
	if n == 0 {
		return math.Inf(1) // no posting ever reads it
	}
	norm := float64(float32(1 / math.Sqrt(float64(n))))
	return 1 / (norm * norm)
}

func (ix *Index) add(c *Chunk) {
	if _, ok := ix.byID[c.ID]; ok {
		ix.remove(c.ID) // the same chunk in two files' entries: the last one wins, as in bleve
	}
	d := uint32(len(ix.docs))
	nd := doc{id: c.ID, live: true, meta: c.Meta, vec: -1}
	counts := map[string]uint32{}
	for f := range NumText {
		nd.termOff[f] = uint32(len(nd.terms))
		clear(counts)
		for _, t := range c.Text[f] {
			counts[t]++
		}
		tf := &ix.text[f]
		nd.lens[f] = fieldLength(len(c.Text[f]))
		if len(c.Text[f]) > 0 {
			tf.sumLen += nd.lens[f]
		}
		for t, n := range counts {
			id := tf.termID(t)
			tf.post[id] = append(tf.post[id], posting{doc: d, tf: n})
			if tf.df[id] == 0 {
				tf.vocab++
			}
			tf.df[id]++
			nd.terms = append(nd.terms, id)
		}
		slices.Sort(nd.terms[nd.termOff[f]:]) // Matched searches them
	}
	nd.termOff[NumText] = uint32(len(nd.terms))
	for _, t := range c.Summary[:min(len(c.Summary), maxSummary)] { // ids of the doc field's terms, in order, no postings
		if id, ok := ix.text[Doc].ids[t]; ok {
			nd.terms = append(nd.terms, id)
		}
	}
	nd.termOff[NumText+1] = uint32(len(nd.terms))
	nd.terms = slices.Clip(nd.terms)
	for f := range NumKeyword {
		nd.kwOff[f] = uint16(len(nd.kw))
		k := &ix.kw[f]
		for _, v := range c.Keyword[f][:min(len(c.Keyword[f]), MaxKeywords-len(nd.kw))] {
			id, ok := k.ids[v]
			if !ok {
				id = uint32(len(k.df))
				k.ids[v] = id
				k.df = append(k.df, 0)
				k.post = append(k.post, nil)
			}
			if f != Uses { // counted, never filtered on
				k.post[id] = append(k.post[id], d)
			}
			if k.df[id] == 0 {
				k.vocab++
			}
			k.df[id]++
			nd.kw = append(nd.kw, id)
		}
	}
	nd.kwOff[NumKeyword] = uint16(len(nd.kw))
	ix.docs = append(ix.docs, nd)
	ix.byID[c.ID] = d
	ix.addVector(d, c.Vector)
	ix.live++
}

func (ix *Index) remove(id string) {
	d, ok := ix.byID[id]
	if !ok {
		return
	}
	delete(ix.byID, id)
	nd := &ix.docs[d]
	nd.live = false
	for f := range NumText {
		tf := &ix.text[f]
		if !math.IsInf(nd.lens[f], 1) {
			tf.sumLen -= nd.lens[f]
		}
		for _, t := range nd.terms[nd.termOff[f]:nd.termOff[f+1]] {
			tf.df[t]--
			if tf.df[t] == 0 {
				tf.vocab--
			}
		}
	}
	for f := range NumKeyword {
		for _, v := range nd.keywords(f) {
			if ix.kw[f].df[v]--; ix.kw[f].df[v] == 0 {
				ix.kw[f].vocab--
			}
		}
	}
	nd.terms, nd.kw, nd.meta, nd.vec = nil, nil, nil, -1 // its vector row goes at the next compaction
	ix.live--
	ix.dead++
}

// compact drops dead documents' postings (their numbers are not reused).
func (ix *Index) compact() {
	for f := range NumText {
		tf := &ix.text[f]
		for t, ps := range tf.post {
			tf.post[t] = slices.DeleteFunc(ps, func(p posting) bool { return !ix.docs[p.doc].live })
		}
	}
	for f := range NumKeyword {
		k := &ix.kw[f]
		for v, ds := range k.post {
			k.post[v] = slices.DeleteFunc(ds, func(d uint32) bool { return !ix.docs[d].live })
		}
	}
	ix.compactVectors()
	ix.dead = 0
}

// Len is the number of live chunks.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// DocFreq is the number of chunks whose field holds term.
func (ix *Index) DocFreq(field int, term string) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.docFreq(field, term)
}

func (ix *Index) docFreq(field int, term string) int {
	tf := &ix.text[field]
	if id, ok := tf.ids[term]; ok {
		return int(tf.df[id])
	}
	return 0
}

// KeywordValues returns a keyword field's values with their chunk counts.
func (ix *Index) KeywordValues(field int) map[string]int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	k := &ix.kw[field]
	out := make(map[string]int, k.vocab)
	for v, id := range k.ids {
		if k.df[id] > 0 {
			out[v] = k.df[id]
		}
	}
	return out
}

// MaxKeywords bounds a chunk's keyword values, all fields together; values
// beyond it are dropped.
const MaxKeywords = math.MaxUint16

// Counts sets out[i] to the number of live chunks whose keyword field holds
// values[i] (0 for ""), under one read lock.
func (ix *Index) Counts(field int, values []string, out []int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i, v := range values {
		out[i] = ix.kw[field].count(v)
	}
}

// Has reports whether the index holds the chunk.
func (ix *Index) Has(id string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.byID[id]
	return ok
}

// Holds reports whether the chunk's field holds term; known is false when
// the index does not hold the chunk.
func (ix *Index) Holds(id string, field int, term string) (holds, known bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	d, ok := ix.byID[id]
	if !ok {
		return false, false
	}
	t, ok := ix.text[field].ids[term]
	if !ok {
		return false, true
	}
	nd := &ix.docs[d]
	_, found := slices.BinarySearch(nd.terms[nd.termOff[field]:nd.termOff[field+1]], t)
	return found, true
}

// Summary is the pseudo-field Matched reports after the text fields: the
// doc comment's first sentence (Chunk.Summary). NumMatched counts them all.
const (
	Summary    = NumText
	NumMatched = NumText + 1
)

// maxSummary bounds the summary terms a chunk keeps.
const maxSummary = 48

// MaxGroups is the most term groups Matched can report.
const MaxGroups = 64

// Match is what Matched reports of a hit.
type Match struct {
	// Fields has bit g of field f set when the field holds one of
	// groups[g]'s terms.
	Fields [NumMatched]uint64
	// Pairs counts the question's consecutive word pairs (groups g and
	// g+1) that the summary holds in that order, at most one word apart,
	// each pair once: a phrase of the question said again.
	Pairs int
	// Lens are the text fields' lengths in terms (0 for an empty field).
	Lens [NumText]float64
}

// Text is the groups any text field holds.
func (m Match) Text() uint64 {
	var all uint64
	for _, g := range m.Fields[:NumText] {
		all |= g
	}
	return all
}

// Matched reports, for each hit, which of the term groups (a question's
// words, each with its expansions) each text field and the summary hold,
// and the question's word pairs the summary repeats: which of the
// question's words a chunk answers, and where, for reranking. A hit no
// longer in the index matches nothing. Groups past MaxGroups are not looked
// up.
func (ix *Index) Matched(hits []Hit, groups [][]string, out []Match) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	groups = groups[:min(len(groups), MaxGroups)]
	var ids [NumText][][]uint32 // each group's term ids per field
	for f := range NumText {
		ids[f] = make([][]uint32, len(groups))
		for g, ts := range groups {
			for _, t := range ts {
				if id, ok := ix.text[f].ids[t]; ok {
					ids[f][g] = append(ids[f][g], id)
				}
			}
		}
	}
	inGroups := map[uint32]uint64{} // a doc term's groups, for the summary
	for g, want := range ids[Doc] {
		for _, id := range want {
			inGroups[id] |= 1 << g
		}
	}
	var seq []uint64
	for i, h := range hits {
		out[i] = Match{}
		d, ok := ix.byID[h.ID]
		if !ok {
			continue
		}
		nd := &ix.docs[d]
		for f := range NumText {
			if !math.IsInf(nd.lens[f], 1) {
				out[i].Lens[f] = nd.lens[f]
			}
			held := nd.terms[nd.termOff[f]:nd.termOff[f+1]]
			for g, want := range ids[f] {
				for _, id := range want {
					if _, found := slices.BinarySearch(held, id); found {
						out[i].Fields[f] |= 1 << g
						break
					}
				}
			}
		}
		seq = seq[:0]
		for _, id := range nd.terms[nd.termOff[Summary]:nd.termOff[Summary+1]] {
			seq = append(seq, inGroups[id])
			out[i].Fields[Summary] |= inGroups[id]
		}
		var pairs uint64 // bit g: groups g and g+1 follow each other
		for p, gs := range seq {
			next := gs << 1 // the groups that would follow these
			for q := p + 1; q < min(p+3, len(seq)); q++ {
				pairs |= (seq[q] & next) >> 1
			}
		}
		out[i].Pairs = bits.OnesCount64(pairs)
	}
}

// MaxShort is the longest term ShortTerms can list.
const MaxShort = 5

// ShortTerms calls fn with each term of a text field held by a live chunk
// that starts with first and is minLen to maxLen (at most MaxShort) bytes
// long, and its document frequency: the candidates for an abbreviation,
// found without walking the field's whole vocabulary.
func (ix *Index) ShortTerms(field int, first byte, minLen, maxLen int, fn func(term string, df int)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	tf := &ix.text[field]
	for n := max(minLen, 1); n <= min(maxLen, MaxShort); n++ {
		for _, id := range tf.short[first][n] {
			if tf.df[id] > 0 {
				fn(tf.terms[id], int(tf.df[id]))
			}
		}
	}
}

// CoOccur counts the chunks whose field holds both a and b.
func (ix *Index) CoOccur(field int, a, b string) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	tf := &ix.text[field]
	ia, ok1 := tf.ids[a]
	ib, ok2 := tf.ids[b]
	if !ok1 || !ok2 {
		return 0
	}
	pa, pb := tf.post[ia], tf.post[ib]
	n := 0
	for i, j := 0, 0; i < len(pa) && j < len(pb); {
		switch {
		case pa[i].doc < pb[j].doc:
			i++
		case pa[i].doc > pb[j].doc:
			j++
		default:
			if ix.docs[pa[i].doc].live {
				n++
			}
			i++
			j++
		}
	}
	return n
}

// EachTermID calls fn, hit by hit in the hits' order, with the id of each
// term hit i holds in field, or of each term of its first sentence in
// order for Summary (ids of the Doc
// field's dictionary). Term resolves an id; an id names the same term for
// the index's life (terms are never renumbered). fn must not call the
// index.
func (ix *Index) EachTermID(hits []Hit, field int, fn func(i int, id uint32)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for i, h := range hits {
		d, ok := ix.byID[h.ID]
		if !ok {
			continue
		}
		nd := &ix.docs[d]
		for _, id := range nd.terms[nd.termOff[field]:nd.termOff[field+1]] {
			fn(i, id)
		}
	}
}

// Term is the term of id in field's dictionary (Summary: Doc's); "" for
// an id it does not hold.
func (ix *Index) Term(field int, id uint32) string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	dict := ix.text[dictField(field)].terms
	if int(id) >= len(dict) {
		return ""
	}
	return dict[id]
}

// TermCount is the size of field's dictionary (Summary: Doc's): every id
// EachTermID hands out is below it.
func (ix *Index) TermCount(field int) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.text[dictField(field)].terms)
}

// dictField is the field whose dictionary numbers field's terms: the
// summary's terms are the doc comment's.
func dictField(field int) int {
	if field == Summary {
		return Doc
	}
	return field
}
