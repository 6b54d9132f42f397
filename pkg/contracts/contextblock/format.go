// Package contextblock renders retrieved chunks as the AGN-002 [CONTEXT] block
// and parses such a block back. Every rule of AGN-002 lives in this file:
//
//	[CONTEXT]                 the single header (§3)
//	                          one blank line after the header (§7)
//	=== CHUNK N ===           1-based, sequential (§4)
//	Id: / Path: / Lines: / Language:   always in this order (§5)
//	```<language>             fenced content with the language tag (§6)
//	```
//	                          one blank line between chunks (§7)
//
// The block ends with the last chunk's closing fence and no trailing newline,
// exactly as the seed's canonical example (§8) does.
//
// Beyond the seed: a chunk whose content contains a run of backticks gets a
// longer fence (CommonMark's rule), so no content can close the fence early
// and break the block; and a size budget drops the lowest-ranked chunks.
package contextblock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Header opens every context block.
const Header = "[CONTEXT]"

// Options bound the block's size. Zero means no limit.
type Options struct {
	// MaxChars caps the block's length in bytes.
	MaxChars int
	// MaxTokens caps the block's estimated tokens (EstimateTokens).
	MaxTokens int
}

// Block is a rendered context block and what went into it.
type Block struct {
	// Text is the block; empty when no chunk was given or none fit, so the
	// caller omits the [CONTEXT] part entirely (AGN-003 §3.2).
	Text string
	// Included are the chunks in the block, in the order given.
	Included []contracts.RagChunk
	// Dropped are the chunks the budget left out, lowest-ranked last.
	Dropped []contracts.RagChunk
	// Warnings explain drops, for AgentExecuteResponse.Warnings.
	Warnings []string
}

// EstimateTokens is the usual four-bytes-a-token estimate; good enough for a
// budget, and it needs no tokenizer per model.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// Format renders chunks, given best-ranked first, as an AGN-002 block. When a
// budget is set it keeps the longest prefix of chunks that fits, so the
// chunks dropped are always the lowest-ranked ones.
func Format(chunks []contracts.RagChunk, o Options) Block {
	var b Block
	if len(chunks) == 0 {
		return b
	}
	// The chunks that fit are chosen by their sizes first, then written
	// once into a block of that size.
	fences := make([]fence, 0, len(chunks))
	size := len(Header)
	for i, c := range chunks {
		f := fence{tag: FenceTag(c.Language), fence: Fence(c.Content)}
		n := chunkSize(len(b.Included)+1, c, f)
		if !o.fits(size + 2 + n) {
			b.Dropped = append(b.Dropped, chunks[i:]...)
			break
		}
		size += 2 + n
		fences = append(fences, f)
		b.Included = append(b.Included, c)
	}
	if len(b.Dropped) > 0 {
		b.Warnings = append(b.Warnings, dropWarning(b.Dropped, len(chunks), o))
	}
	if len(b.Included) > 0 {
		var sb strings.Builder
		sb.Grow(size)
		sb.WriteString(Header)
		for i, c := range b.Included {
			sb.WriteString("\n\n")
			writeChunk(&sb, i+1, c, fences[i])
		}
		b.Text = sb.String()
	}
	return b
}

func (o Options) fits(n int) bool {
	if o.MaxChars > 0 && n > o.MaxChars {
		return false
	}
	if o.MaxTokens > 0 && (n+3)/4 > o.MaxTokens {
		return false
	}
	return true
}

func dropWarning(dropped []contracts.RagChunk, total int, o Options) string {
	ids := make([]string, 0, 5)
	for i, c := range dropped {
		if i == 5 {
			ids = append(ids, "…")
			break
		}
		ids = append(ids, c.Id)
	}
	budget := strconv.Itoa(o.MaxChars) + " chars"
	if o.MaxChars == 0 || (o.MaxTokens > 0 && o.MaxTokens*4 < o.MaxChars) {
		budget = "~" + strconv.Itoa(o.MaxTokens) + " tokens"
	}
	return fmt.Sprintf("context truncated: dropped %d of %d chunks (%s) to fit the %s budget",
		len(dropped), total, strings.Join(ids, ", "), budget)
}

// fence is a chunk's fence tag and fence.
type fence struct{ tag, fence string }

// writeChunk writes one chunk from its header to its closing fence; Format
// writes the blank line before each chunk. chunkSize is its length.
func writeChunk(sb *strings.Builder, n int, c contracts.RagChunk, f fence) {
	var num [20]byte
	sb.WriteString("=== CHUNK ")
	sb.Write(strconv.AppendInt(num[:0], int64(n), 10))
	sb.WriteString(" ===\nId: ")
	sb.WriteString(metaValue(c.Id))
	sb.WriteString("\nPath: ")
	sb.WriteString(metaValue(c.Path))
	sb.WriteString("\nLines: ")
	sb.Write(strconv.AppendInt(num[:0], int64(c.StartLine), 10))
	sb.WriteString("-")
	sb.Write(strconv.AppendInt(num[:0], int64(c.EndLine), 10))
	sb.WriteString("\nLanguage: ")
	sb.WriteString(f.tag)
	sb.WriteString("\n")
	sb.WriteString(f.fence)
	sb.WriteString(f.tag)
	sb.WriteString("\n")
	sb.WriteString(c.Content)
	sb.WriteString("\n")
	sb.WriteString(f.fence)
}

// chunkSize is the length writeChunk writes (metaValue keeps a value's length).
func chunkSize(n int, c contracts.RagChunk, f fence) int {
	var num [20]byte
	digits := func(v int) int { return len(strconv.AppendInt(num[:0], int64(v), 10)) }
	return len("=== CHUNK ") + digits(n) + len(" ===\nId: ") + len(c.Id) + len("\nPath: ") + len(c.Path) +
		len("\nLines: ") + digits(c.StartLine) + 1 + digits(c.EndLine) + len("\nLanguage: ") + len(f.tag) + 1 +
		len(f.fence) + len(f.tag) + 1 + len(c.Content) + 1 + len(f.fence)
}

// Fence returns the backtick fence for content: three backticks, or one more
// than the longest backtick run in the content, so no line of the content
// can close it (CommonMark §4.5).
func Fence(content string) string {
	longest, run := 0, 0
	for i := 0; i < len(content); i++ {
		if content[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// metaValue keeps a metadata value on its one line: a path or id holding a
// line break would otherwise forge the next metadata line.
func metaValue(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
