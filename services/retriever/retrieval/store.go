// Package retrieval indexes a workspace's source into JetStream and searches
// it. The chunks' source of truth is a KV bucket (one entry per file), so any
// number of retriever replicas can build their own on-disk bleve index (BM25)
// from it and follow its updates; IndexDir writes only to the bucket.
//
// Chunk ids are "ck_" and 16 hex digits of SHA-256 over workspace, repo,
// path, the chunk's symbol, its ordinal among identical chunks of the file
// and its text. They do not depend on line numbers, so re-indexing an
// unchanged file yields the same ids, and editing one function of a file
// changes only the ids of the chunks whose text changed.
package retrieval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Bucket is the KV bucket holding every indexed file's chunks.
const Bucket = "aptix_chunks"

// MaxEntryBytes keeps a file's entry under JetStream's default 1 MB message
// limit, with room for the KV headers.
const MaxEntryBytes = 1000 * 1000

// chunkerVersion is part of every file's hash: bumping it when the chunkers
// change makes the next `aptix index` re-chunk every file.
const chunkerVersion = "1"

// FileRecord is one file's entry: its chunks and the hash that makes
// re-indexing incremental. Hash and NChunks come before Chunks so the
// indexer can read them without decoding the chunks (see peekHeader).
type FileRecord struct {
	Workspace string   `json:"workspace"`
	Repo      string   `json:"repo"`
	Path      string   `json:"path"`
	Language  string   `json:"language"`
	Tags      []string `json:"tags,omitempty"`
	Hash      string   `json:"hash"`
	NChunks   int      `json:"nChunks"`
	Chunks    []Chunk  `json:"chunks"`
}

// Chunk is a stored chunk. Lines are 1-based and inclusive.
type Chunk struct {
	Id        string `json:"id"`
	StartLine int    `json:"startLine"`
	EndLine   int    `json:"endLine"`
	Symbol    string `json:"symbol,omitempty"`
	Content   string `json:"content"`
}

// fileKey is <workspace>.<repo>.<24 hex of SHA-256 of the path>: KV keys
// cannot hold every character a path can, and the prefix lets one
// workspace/repo be listed with a subject wildcard.
func fileKey(workspace, repo, path string) string {
	h := sha256.Sum256([]byte(path))
	return workspace + "." + repo + "." + hex.EncodeToString(h[:12])
}

// fileHash covers what the stored entry is built from: the content, the
// tags and the chunker version.
func fileHash(content []byte, tags []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "v%s\x00%s\x00", chunkerVersion, strings.Join(tags, "\x01"))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// chunkID is described in the package documentation.
func chunkID(workspace, repo, path, symbol, content string, ordinal int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00", workspace, repo, path, symbol, ordinal)
	h.Write([]byte(content))
	return "ck_" + hex.EncodeToString(h.Sum(nil)[:8])
}

// openBucket creates the bucket if missing. History 1: only the current
// version of a file matters, and a deleted file leaves a delete marker that
// watchers see.
func openBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "aptix: indexed source chunks, one entry per file", History: 1,
		MaxValueSize: MaxEntryBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("open KV bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

func validScope(workspace, repo string) error {
	if !contracts.IsToken(workspace) {
		return fmt.Errorf("workspace %q: must be 1-128 characters of [A-Za-z0-9_-]", workspace)
	}
	if !contracts.IsToken(repo) {
		return fmt.Errorf("repo %q: must be 1-128 characters of [A-Za-z0-9_-]", repo)
	}
	return nil
}

// stored is what the indexer needs to know of a file already in the bucket.
type stored struct {
	hash    string
	nChunks int
}

// existing returns every file stored for workspace/repo, by key. A watch
// streams all current values at once, far quicker than a Get per key.
func existing(ctx context.Context, kv jetstream.KeyValue, workspace, repo string) (map[string]stored, error) {
	w, err := kv.Watch(ctx, workspace+"."+repo+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read stored files: %w", err)
	}
	defer w.Stop()
	out := map[string]stored{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read stored files: watch closed")
			}
			if e == nil {
				return out, nil // caught up
			}
			out[e.Key()] = peekHeader(e.Value())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// peekHeader reads a FileRecord's hash and chunk count without decoding its
// chunks, which hold nearly all of its bytes.
func peekHeader(data []byte) stored {
	var s stored
	d := json.NewDecoder(bytes.NewReader(data))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return s
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return s
		}
		switch t {
		case "hash":
			_ = d.Decode(&s.hash)
		case "nChunks":
			_ = d.Decode(&s.nChunks)
		case "chunks":
			return s
		default:
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				return s
			}
		}
	}
	return s
}
