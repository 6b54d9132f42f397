package layout

import (
	"slices"
	"strings"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
)

// StageSpec declares one stage of the pipeline: what it consumes, what it
// may emit and what it writes. Stages is the one place the topology is
// stated; provision, status, the trimming choice and the NATS permissions
// test (deploy/nats/auth.conf) are derived from it, and each service's
// Stage() is checked against it, so a stage or subject added in one place
// and not the others fails a test instead of a deployment.
type StageSpec struct {
	// Name is the service: its durable consumer is Durable(Name), its dead
	// letters go to contracts.DeadSubject(Name), its micro service is
	// aptix-<Name> and its NATS user is Name.
	Name string
	// In is the event stage it consumes, Out the one a handled turn goes to
	// unless Route picks one of Routes.
	In, Out string
	Routes  []string
	// KV and Objects are the buckets it writes, beyond the claim-check
	// store every stage may write (contracts.ClaimBucket).
	KV, Objects []string
	// Publishes are the other subjects it publishes: live deltas, usage
	// records, the queue's keeper message, requests it moves.
	Publishes []string
	// Acks are the other consumers it acknowledges, as "STREAM.durable".
	Acks []string
	// Trim runs the history trimmer in the stage's process: the stage where
	// turns end, whose NATS user alone may purge APTIX.
	Trim bool
	// Local says the stage waits on nothing but its process and the bus (no
	// model, no tool): it takes at most a small number of events at once
	// (pipeline.LocalMaxAckPending), whatever a deployment sets for the
	// stages that wait on models; more would only queue on the bus's acks,
	// holding memory without adding throughput.
	Local bool
	// Skippable says a turn that needs none of the stage's work may enter
	// the pipeline at Out instead of In: an entry point (Entries) that a
	// trusted client (the gateway, pipeline.Entrance) publishes to with the
	// stage's section filled as the stage fills it for such a turn, and the
	// event marked contracts.HeaderSkipped so history shows the stage as
	// skipped, not run. Only a stage every turn reaches first may be skipped
	// (a leading stage); a client on the bus still enters at In, where the
	// stage validates what it sends.
	Skippable bool
}

// Stages is the pipeline's topology, in pipeline order (the toolrunner,
// off the main line, last).
var Stages = []StageSpec{
	{
		Name: "retriever", In: contracts.StageRequested, Out: contracts.StageRetrieved, Local: true,
		// A turn with no retrieval (ragScope none: every transparent HTTP
		// turn) enters at aptix.retrieved (docs/architecture.md#entry-points).
		Skippable: true,
		// The queue's keeper message, and requests moved from a
		// single-stream deployment's old consumer (migrate.go), which it
		// acknowledges on APTIX.
		Publishes: []string{contracts.QueueKeeperSubject, contracts.StageFilter(contracts.StageRequested)},
		Acks:      []string{contracts.StreamName + "." + Durable("retriever")},
	},
	{
		Name: "envelope", In: contracts.StageRetrieved, Out: contracts.StageEnveloped, Local: true,
		// A turn with server-side tools goes to the toolrunner first.
		Routes: []string{contracts.StageToolRound},
		// A transparent turn that starts its conversation and asks for
		// nothing the envelope adds (no retrieval, tools, framing or
		// record to read) enters at aptix.enveloped, its body built as
		// the envelope builds it (docs/architecture.md#entry-points).
		Skippable: true,
	},
	{
		Name: "llmcaller", In: contracts.StageEnveloped, Out: contracts.StageResponded,
		// A result calling server-side tools goes to the toolrunner. The
		// history stores are written for backends without
		// previous_response_id only; conversation recovery reads the
		// conversation's events (APTIX), which needs no publish permission.
		Routes:    []string{contracts.StageToolRound},
		KV:        []string{"aptix_llm_results", "aptix_history_kv"},
		Objects:   []string{"aptix_history"},
		Publishes: []string{contracts.DeltaPrefix + ".>"},
	},
	{
		Name: "mapper", In: contracts.StageResponded, Out: contracts.StageCompleted, Local: true,
		KV:        []string{store.ConversationsBucket, store.UsageBucket},
		Publishes: []string{store.UsageSubject + ".>"},
		// The usage fold runs in the mapper's process.
		Acks: []string{store.UsageStream + "." + store.UsageFolder},
		Trim: true,
	},
	{
		// The toolrunner answers a round of server-side tool calls with the
		// next round's enveloped event, or a loop that ended with the
		// responded event (docs/architecture.md#the-server-side-tool-loop).
		Name: "toolrunner", In: contracts.StageToolRound, Out: contracts.StageEnveloped,
		Routes:    []string{contracts.StageResponded},
		KV:        []string{"aptix_tool_results"},
		Publishes: []string{contracts.DeltaPrefix + ".>"},
	},
}

// StageNames lists the declared stages, "retriever, envelope, …", for
// help texts and error messages.
func StageNames() string {
	names := make([]string, len(Stages))
	for i, s := range Stages {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// StageByName is the declared stage of a service; ok is false for a name
// not in Stages (a test's own stage).
func StageByName(name string) (StageSpec, bool) {
	for _, s := range Stages {
		if s.Name == name {
			return s, true
		}
	}
	return StageSpec{}, false
}

// Emits are the event stages a handled turn of this stage may go to: Out,
// the Route alternatives, and the error completion every stage may end a
// turn with.
func (s StageSpec) Emits() []string {
	out := []string{s.Out}
	for _, r := range append(slices.Clone(s.Routes), contracts.StageCompleted) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// Consumer is the stream and durable consumer the stage reads In through.
func (s StageSpec) Consumer() (stream, durable string) {
	return contracts.StreamOf(s.In), Durable(s.Name)
}

// PublishSubjects are the subjects the stage's NATS user must be allowed
// to publish, beyond what every JetStream client needs ($JS.API.>, $JS.FC.>,
// _INBOX.>): its events, its dead letters, the stores it writes and the
// acknowledgements of its consumers.
func (s StageSpec) PublishSubjects() []string {
	var out []string
	for _, e := range s.Emits() {
		out = append(out, contracts.StageFilter(e))
	}
	out = append(out, contracts.DeadSubject(s.Name), "$O."+contracts.ClaimBucket+".>")
	for _, b := range s.KV {
		out = append(out, "$KV."+b+".>")
	}
	for _, b := range s.Objects {
		out = append(out, "$O."+b+".>")
	}
	out = append(out, s.Publishes...)
	stream, durable := s.Consumer()
	out = append(out, "$JS.ACK."+stream+"."+durable+".>")
	for _, a := range s.Acks {
		out = append(out, "$JS.ACK."+a+".>")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Entries are the event stages a turn may enter the pipeline at, first the
// one every client may use (the first stage's In), then, past each leading
// Skippable stage, its Out.
func Entries() []string {
	out := []string{Stages[0].In}
	for _, s := range Stages {
		if s.In != out[len(out)-1] || !s.Skippable {
			break
		}
		out = append(out, s.Out)
	}
	return out
}

// SkippedAt names the stages a turn entering at the event stage entry does
// not visit, in pipeline order: none for the first stage's In, nil (and ok
// false) for a stage that is no entry point.
func SkippedAt(entry string) (skipped []string, ok bool) {
	at := Stages[0].In
	for _, s := range Stages {
		if at == entry {
			return skipped, true
		}
		if s.In != at || !s.Skippable {
			break
		}
		skipped, at = append(skipped, s.Name), s.Out
	}
	if at == entry {
		return skipped, true
	}
	return nil, false
}

// Trims says whether the named stage runs the history trimmer.
func Trims(name string) bool {
	s, ok := StageByName(name)
	return ok && s.Trim
}
