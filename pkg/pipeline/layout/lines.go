package layout

import (
	"slices"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Every list of stages outside Stages (the status pages, replay's choices,
// the stack's stop order, the bench's columns, admission's estimates) is
// derived here, so a stage added, moved or skipped is declared once.

// MainLine is the way every turn goes: from the stage that takes requests,
// each stage's Out to the stage consuming it, up to the completion. Routes
// (the server-side tool loop) are off it.
func MainLine() []StageSpec {
	var line []StageSpec
	for in := contracts.StageRequested; in != contracts.StageCompleted && len(line) < len(Stages); {
		s, ok := consumerOf(in)
		if !ok {
			break
		}
		line = append(line, s)
		in = s.Out
	}
	return line
}

// consumerOf is the declared stage consuming the event stage in.
func consumerOf(in string) (StageSpec, bool) {
	for _, s := range Stages {
		if s.In == in {
			return s, true
		}
	}
	return StageSpec{}, false
}

// MainNames are the main line's stage names in order: retriever, envelope,
// llmcaller, mapper.
func MainNames() []string {
	var names []string
	for _, s := range MainLine() {
		names = append(names, s.Name)
	}
	return names
}

// EventStages are the event stages a turn's main line stores, in order:
// the request, then each main-line stage's output (requested, retrieved,
// enveloped, responded, completed).
func EventStages() []string {
	line := MainLine()
	if len(line) == 0 {
		return nil
	}
	out := []string{line[0].In}
	for _, s := range line {
		out = append(out, s.Out)
	}
	return out
}

// ProducerOf is the main-line stage that stores the event stage (the
// retriever for retrieved, ...); ok is false for the request, which a
// client stores, and for stages off the main line.
func ProducerOf(event string) (string, bool) {
	for _, s := range MainLine() {
		if s.Out == event {
			return s.Name, true
		}
	}
	return "", false
}

// EventsToEnd is how many events a turn waiting at the named stage still
// stores up to and including its completion, following Out (a tool round
// adds more; admission leaves room for those). 0 for a name not in Stages.
func EventsToEnd(name string) int {
	s, ok := StageByName(name)
	for n := 1; ok && n <= len(Stages); n++ {
		if s.Out == contracts.StageCompleted {
			return n
		}
		s, ok = consumerOf(s.Out)
	}
	return 0
}

// StopOrder groups the declared stages in the order they stop, upstream
// first, so a turn in flight when a process stops still completes: each
// group is a set of stages that feed each other (the LLM caller and the
// toolrunner), after every group that feeds it.
func StopOrder() [][]string {
	// feeds[i][j]: stage i emits what stage j consumes.
	n := len(Stages)
	reach := make([][]bool, n)
	for i, a := range Stages {
		reach[i] = make([]bool, n)
		reach[i][i] = true
		for j, b := range Stages {
			if slices.Contains(a.Emits(), b.In) {
				reach[i][j] = true
			}
		}
	}
	for k := range n { // transitive closure (Warshall)
		for i := range n {
			for j := range n {
				reach[i][j] = reach[i][j] || reach[i][k] && reach[k][j]
			}
		}
	}
	// A group is a set of stages reaching each other; it stops after the
	// groups that reach it, i.e. ordered by how many stages reach it.
	var groups [][]string
	var upstream []int
	done := make([]bool, n)
	for i := range n {
		if done[i] {
			continue
		}
		var g []string
		for j := range n {
			if reach[i][j] && reach[j][i] {
				g = append(g, Stages[j].Name)
				done[j] = true
			}
		}
		ups := 0
		for j := range n {
			if reach[j][i] {
				ups++
			}
		}
		at, _ := slices.BinarySearch(upstream, ups)
		for at < len(upstream) && upstream[at] == ups {
			at++ // stable: declaration order among equals
		}
		groups = slices.Insert(groups, at, g)
		upstream = slices.Insert(upstream, at, ups)
	}
	return groups
}
