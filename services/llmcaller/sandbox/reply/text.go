package reply

import (
	"fmt"
	"strings"
)

// Sentence is the deterministic text answer: it names the mode, the
// instruction's first line, the context chunk ids and, on a continuation,
// the previous response. texts are the text parts of the user's latest
// message.
func Sentence(texts []string, prevID string) string {
	ids := ChunkIDs(texts)
	chunks := "none"
	if len(ids) > 0 {
		chunks = strings.Join(ids, ", ")
	}
	text := fmt.Sprintf("Sandbox reply (mode %s) to: %s. Context chunks: %s.", ModeOf(texts), InstructionOf(texts), chunks)
	if prevID != "" {
		text += " Continuing from " + prevID + "."
	}
	return text
}

// Request is what the user asks, as the tool and value rules read it: the
// user's own text parts (the AGN-002 [CONTEXT] parts dropped: retrieved
// code is context, not the request), from the [INSTRUCTION] on when there
// is one, [MODE: …] lines dropped.
func Request(texts []string) string {
	own := OwnTexts(texts)
	for i, t := range own {
		if _, after, ok := strings.Cut(t, "[INSTRUCTION]"); ok {
			own = append([]string{after}, own[i+1:]...)
			break
		}
	}
	var lines []string
	for _, t := range own {
		for _, l := range strings.Split(t, "\n") {
			if tl := strings.TrimSpace(l); tl != "" && !strings.HasPrefix(tl, "[MODE:") {
				lines = append(lines, tl)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// OwnTexts drops the AGN-002 [CONTEXT] parts.
func OwnTexts(texts []string) []string {
	var out []string
	for _, t := range texts {
		if !strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			out = append(out, t)
		}
	}
	return out
}

// ModeOf finds "[MODE: X]" in the texts ("unspecified" when there is none).
func ModeOf(texts []string) string {
	for _, t := range texts {
		if i := strings.Index(t, "[MODE:"); i >= 0 {
			rest := t[i+len("[MODE:"):]
			if j := strings.Index(rest, "]"); j >= 0 {
				return strings.TrimSpace(rest[:j])
			}
		}
	}
	return "unspecified"
}

// InstructionOf returns the first line after "[INSTRUCTION]", or else the
// first non-empty line that is not a [MODE]/[CONTEXT] marker ("(empty)"
// when there is none).
func InstructionOf(texts []string) string {
	for _, t := range texts {
		if _, after, ok := strings.Cut(t, "[INSTRUCTION]"); ok {
			for _, line := range strings.Split(after, "\n") {
				if l := strings.TrimSpace(line); l != "" {
					return l
				}
			}
		}
	}
	for _, t := range texts {
		if strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			continue
		}
		for _, line := range strings.Split(t, "\n") {
			l := strings.TrimSpace(line)
			if l != "" && !strings.HasPrefix(l, "[MODE:") {
				return l
			}
		}
	}
	return "(empty)"
}

// ChunkIDs parses the AGN-002 "Id: <id>" line that follows each
// "=== CHUNK N ===" header of a [CONTEXT] part, so an "Id:" inside a
// chunk's code is never mistaken for one.
func ChunkIDs(texts []string) []string {
	var ids []string
	for _, t := range texts {
		if !strings.HasPrefix(strings.TrimSpace(t), "[CONTEXT]") {
			continue
		}
		lines := strings.Split(t, "\n")
		for i := 0; i+1 < len(lines); i++ {
			l := strings.TrimSpace(lines[i])
			if strings.HasPrefix(l, "=== CHUNK ") && strings.HasSuffix(l, " ===") {
				if id, ok := strings.CutPrefix(strings.TrimSpace(lines[i+1]), "Id: "); ok {
					ids = append(ids, strings.TrimSpace(id))
				}
			}
		}
	}
	return ids
}
