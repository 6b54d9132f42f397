package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/profiles"
)

// replayFlags say which stored event to re-drive and what to change in it.
type replayFlags struct {
	conversation, turn, from, backend, model, into, newTurn string
	stream, cont, asJSON                                    bool
	timeout                                                 time.Duration
}

func init() {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay --conversation C [--turn T] --from " + strings.Join(layout.MainNames(), "|") + " [flags]",
		Short: "Re-run a stored turn from one stage under a new turn id, and print the new result",
		Long: "replay reads the event the --from stage consumed for the turn (retriever: the request, as its\n" +
			"retrieved event recorded it; envelope: the retrieved event; llmcaller: the enveloped event, with\n" +
			"the exact /responses body; mapper: the responded event), gives it a new turn id (and conversation\n" +
			"with --into), applies --backend/--model, and publishes it on that stage's subject with the header\n" +
			"aptix-replay-of: <turn> and a trace linked to the original's. A replay of the llmcaller calls the\n" +
			"model again (pay-once is per turn id). A replay does not move the conversation's continuation\n" +
			"record unless --continue (or it runs in another conversation, --into).\n" +
			"Without --turn, --from requested|retriever re-runs the whole conversation turn by turn into a new\n" +
			"conversation (--into, default a new id). Compare the result with `aptix diff`.",
		Example: `  aptix replay --conversation demo --turn 01a2... --from llmcaller --backend openai --model gpt-5.1-mini
  aptix replay --conversation demo --turn 01a2... --from envelope --stream
  aptix replay --conversation demo --from requested --into demo-again`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			nc, err := connectRunning("replay")
			if err != nil {
				return err
			}
			defer nc.Close()
			stop, err := pipeline.StartTelemetry(cmd.Context(), "aptix-replay")
			if err != nil {
				return err
			}
			defer stop()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return bounded(ctx, func(ctx context.Context) error {
				if f.turn == "" {
					return replayConversation(ctx, js, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
				}
				_, err := replayTurn(ctx, js, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.conversation, "conversation", "", "the original turn's conversation id")
	fl.StringVar(&f.turn, "turn", "", "the turn to replay (without it, --from requested replays the whole conversation)")
	fl.StringVar(&f.from, "from", "", "the stage to re-run from: "+history.ReplayChoices())
	fl.StringVar(&f.backend, "backend", "", "backend profile for the replay (not with --from mapper)")
	fl.StringVar(&f.model, "model", "", "model for the replay (not with --from mapper)")
	fl.StringVar(&f.into, "into", "", "conversation to replay into (default: the original's for one turn, a new one for a conversation)")
	fl.StringVar(&f.newTurn, "new-turn", "", "turn id of the replay (default: a new UUIDv7)")
	fl.BoolVar(&f.stream, "stream", false, "stream the replay's answer as it is generated")
	fl.BoolVar(&f.cont, "continue", false, "let the replay become the conversation's latest turn (its continuation record)")
	fl.BoolVar(&f.asJSON, "json", false, "print the replay's whole AgentExecuteResponse as JSON")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the replay to complete")
	root.AddCommand(cmd)
}

func (f replayFlags) validate() error {
	if f.conversation == "" || !contracts.IsToken(f.conversation) {
		return usagef("--conversation is required: 1-%d characters of [A-Za-z0-9_-]", contracts.MaxIDLen)
	}
	in, ok := history.ReplayInput[f.from]
	if !ok {
		return usagef("--from %q: want %s", f.from, history.ReplayChoices())
	}
	if f.turn == "" && in != contracts.StageRequested {
		return usagef("--turn is required with --from %s (only --from requested replays a whole conversation)", f.from)
	}
	for name, id := range map[string]string{"--turn": f.turn, "--into": f.into, "--new-turn": f.newTurn} {
		if id != "" && !contracts.IsToken(id) {
			return usagef("%s %q: ids are 1-%d characters of [A-Za-z0-9_-]", name, id, contracts.MaxIDLen)
		}
	}
	if f.from == "mapper" && (f.backend != "" || f.model != "") {
		return usagef("--backend and --model change the model call: replay --from llmcaller (or earlier) for that")
	}
	if f.turn == "" && f.into == f.conversation {
		return usagef("a whole conversation replays into another conversation: drop --into or give a new id")
	}
	return nil
}

// buildReplay turns the stored input of the --from stage into the event to
// publish (history.BuildReplay). pin says to keep the original's
// continuation (previous response id) so the replay sees the conversation
// as the original did. A new --backend without --model takes that
// profile's default model, as this process's profiles (APTIX_PROFILES,
// env) define it.
func buildReplay(ctx context.Context, js jetstream.JetStream, f replayFlags, pin bool) (pipeline.ReplayEvent, error) {
	turn := f.newTurn
	if turn == "" {
		turn = newID()
	}
	ev, err := history.BuildReplay(ctx, js, history.ReplaySpec{
		Conversation: f.conversation, Turn: f.turn, From: f.from, Backend: f.backend, Model: f.model,
		Into: f.into, NewTurn: turn, Stream: f.stream, Continue: f.cont, Pin: pin,
		DefaultModel: func(backend string) (string, error) {
			set, err := profiles.FromEnv()
			if err != nil {
				return "", err
			}
			p, err := set.Get(backend)
			if err != nil {
				return "", err
			}
			return p.Model(""), nil
		},
	})
	var ie history.InputError
	if errors.As(err, &ie) {
		return ev, usagef("%w", err)
	}
	return ev, err
}

// replayTurn publishes one replay, waits for it and prints its result.
func replayTurn(ctx context.Context, js jetstream.JetStream, f replayFlags, stdout, stderr io.Writer) (contracts.Turn, error) {
	ev, err := buildReplay(ctx, js, f, true)
	if err != nil {
		return contracts.Turn{}, err
	}
	return runReplayEvent(ctx, js, f, ev, stdout, stderr)
}

func runReplayEvent(ctx context.Context, js jetstream.JetStream, f replayFlags, ev pipeline.ReplayEvent, stdout, stderr io.Writer) (contracts.Turn, error) {
	var live *liveText
	if f.stream && !f.asJSON {
		live = &liveText{w: stdout}
		nc := js.Conn()
		sub, err := nc.Subscribe(contracts.DeltaSubject(ev.ConversationId, ev.TurnId), live.onDelta)
		if err != nil {
			return contracts.Turn{}, fmt.Errorf("subscribe to deltas: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := nc.Flush(); err != nil {
			return contracts.Turn{}, err
		}
	}
	if err := pipeline.PublishReplay(ctx, js, ev); err != nil {
		return contracts.Turn{}, err
	}
	fmt.Fprintf(stderr, "aptix: replay of turn %s from %s: conversation %s, turn %s sent\n", ev.Of, f.from, ev.ConversationId, ev.TurnId)
	if sk := history.Skipped(ev.OrigHeader); len(sk) > 0 && ev.Stage == contracts.StageRequested {
		// The original entered past these stages (no work for them); the
		// replay runs through them, which write what the entry wrote.
		fmt.Fprintf(stderr, "aptix: turn %s skipped the %s (nothing for it to do); the replay runs it\n", ev.Of, strings.Join(sk, ", "))
	}
	t, err := client.Await(ctx, js, ev.ConversationId, ev.TurnId)
	if err != nil {
		return t, err
	}
	if t.Response == nil {
		return t, fmt.Errorf("completed event of turn %s carries no response", ev.TurnId)
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t.Response); err != nil {
			return t, err
		}
	} else {
		printResponse(stdout, *t.Response, live)
	}
	summarize(stderr, t)
	fmt.Fprintf(stderr, "aptix: compare with: %s\n", hint(clientServer(), "diff", ev.Of, ev.TurnId))
	if t.Response.Kind == contracts.KindError {
		return t, fmt.Errorf("replay failed: %s: %s", t.Response.ErrorCode, t.Response.ErrorMessage)
	}
	return t, nil
}

// replayConversation re-runs every turn of a conversation, in order, in a
// new conversation: each replayed turn continues from the replay before it.
func replayConversation(ctx context.Context, js jetstream.JetStream, f replayFlags, stdout, stderr io.Writer) error {
	turns, err := history.ConversationTurns(ctx, js, f.conversation, false)
	if err != nil {
		return err
	}
	if len(turns) == 0 {
		return fmt.Errorf("conversation %s has no stored retrieved events to replay", f.conversation)
	}
	if f.into == "" {
		f.into = "r-" + newID()
	}
	f.newTurn = ""
	for i, turn := range turns {
		one := f
		one.turn = turn
		ev, err := buildReplay(ctx, js, one, false)
		if err != nil {
			return fmt.Errorf("turn %d of %d (%s): %w", i+1, len(turns), turn, err)
		}
		fmt.Fprintf(stdout, "--- turn %d of %d: %s → %s\n", i+1, len(turns), turn, ev.TurnId)
		if _, err := runReplayEvent(ctx, js, one, ev, stdout, stderr); err != nil {
			return fmt.Errorf("turn %d of %d (%s): %w", i+1, len(turns), turn, err)
		}
	}
	fmt.Fprintf(stderr, "aptix: conversation %s replayed as %s (%d turns)\n", f.conversation, f.into, len(turns))
	return nil
}
