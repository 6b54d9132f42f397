package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/contracts/contextblock"
	"github.com/aptix-dev/aptix/pkg/contracts/tooldef"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/envelope/request"
	"github.com/aptix-dev/aptix/services/llmcaller/anthropicmessages"
	"github.com/aptix-dev/aptix/services/llmcaller/chatcompletions"
)

// render shows the exact /responses body the envelope stage would send for a
// request, without a bus or a model: the quickest way to see AGN-002 and
// AGN-003 applied to your own input, and, for a profile with toolMode
// prompt, the tool-call instructions (docs/tool-emulation.md) that replace the function
// tools (in the body's "instructions"; --instructions prints them as text).
func init() {
	var (
		requestFile, chunksFile, profile, priorToolsFile string
		maxChars                                         int
		instructionsOnly                                 bool
	)
	cmd := &cobra.Command{
		Use:   "render --request FILE [--chunks FILE] [--profile NAME]",
		Short: "Print the /responses request body Aptix builds for an AgentExecuteRequest (the /chat/completions body for a chat-completions profile)",
		Example: `  aptix render --request examples/ddr-turn1.request.json --chunks examples/chunks.json
  aptix render --request examples/ddr-turn2.request.json --prior-tools tools.json --profile sandbox
  APTIX_PROFILES=profiles.json aptix render --request examples/ddr-turn1.request.json --profile local --instructions`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req contracts.AgentExecuteRequest
			if err := readJSONFile(requestFile, &req); err != nil {
				return err
			}
			if err := req.Validate(); err != nil {
				return usagef("%s: %w", requestFile, err)
			}
			var chunks []contracts.RagChunk
			if chunksFile != "" {
				if err := readJSONFile(chunksFile, &chunks); err != nil {
					return err
				}
			}
			set, err := profiles.FromEnv()
			if err != nil {
				return usagef("%w", err)
			}
			if profile == "" && req.AgentContext != nil {
				profile = req.AgentContext.Backend
			}
			p, err := set.Get(profile)
			if err != nil {
				return usagef("%w", err)
			}
			var prior []tooldef.Tool
			if priorToolsFile != "" {
				if err := readJSONFile(priorToolsFile, &prior); err != nil {
					return err
				}
			}
			block := contextblock.Format(chunks, contextblock.Options{MaxChars: maxChars})
			in := request.Input{Request: req, ContextBlock: block.Text, Capabilities: p.Capabilities, PriorTools: prior, DefaultModel: p.DefaultModel}
			if req.ConversationContext != nil {
				in.Conversation = *req.ConversationContext
			}
			res, err := request.Build(in)
			if err != nil {
				return usagef("%w", err)
			}
			for _, w := range block.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			if res.Emulation != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: profile %s has toolMode prompt: %d function tool(s) are described in \"instructions\" instead of sent in \"tools\"\n",
					p.Name, len(res.Emulation.Tools))
			}
			if instructionsOnly {
				var body struct {
					Instructions string `json:"instructions"`
				}
				if err := json.Unmarshal(res.Body, &body); err != nil {
					return fmt.Errorf("read the built body: %w", err)
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), body.Instructions)
				return err
			}
			if p.ChatCompletions() {
				// What goes on the wire to a Chat Completions server
				// (docs/backends.md): the same body, translated.
				chat, err := chatcompletions.Request(res.Body, p.Chat)
				if err == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: profile %s speaks Chat Completions: this is the POST %s/chat/completions body\n", p.Name, p.BaseURL)
					return printJSON(cmd, chat)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "note: profile %s speaks Chat Completions; the LLM caller translates this body after replaying the conversation (%v)\n", p.Name, err)
			}
			if p.API == profiles.APIAnthropicMessages {
				// What goes on the wire to an Anthropic Messages server.
				msg, err := anthropicmessages.Request(res.Body, anthropicmessages.Defaults{MaxTokens: p.Anthropic.MaxTokens})
				if err == nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: profile %s speaks Anthropic Messages: this is the POST %s/messages body\n", p.Name, p.BaseURL)
					return printJSON(cmd, msg)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "note: profile %s speaks Anthropic Messages; the LLM caller translates this body after replaying the conversation (%v)\n", p.Name, err)
			}
			return printJSON(cmd, res.Body)
		},
	}
	cmd.Flags().StringVar(&requestFile, "request", "", "AgentExecuteRequest JSON file (- for stdin)")
	cmd.Flags().StringVar(&chunksFile, "chunks", "", "JSON array of RagChunks to format as the [CONTEXT] block")
	cmd.Flags().StringVar(&profile, "profile", "", "backend profile whose capabilities apply (default: the request's agentContext.backend)")
	cmd.Flags().StringVar(&priorToolsFile, "prior-tools", "", "JSON array of the tools the conversation last sent (continuation turns)")
	cmd.Flags().IntVar(&maxChars, "max-context-chars", 0, "size budget of the [CONTEXT] block (0: none)")
	cmd.Flags().BoolVar(&instructionsOnly, "instructions", false, "print only the body's instructions, as plain text (a toolMode prompt profile's tool-call injection)")
	_ = cmd.MarkFlagRequired("request")
	root.AddCommand(cmd)
}

// readJSONFile decodes a file (or stdin for "-"), rejecting unknown fields so
// a typo in a hand-written request is reported, not ignored.
func readJSONFile(path string, v any) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = readAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return usagef("%w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return usagef("%s: %w", path, err)
	}
	return nil
}

func readAll(f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}

// printJSON pretty-prints a JSON document to stdout without HTML escaping.
func printJSON(cmd *cobra.Command, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("print: %w", err)
	}
	buf.WriteByte('\n')
	_, err := cmd.OutOrStdout().Write(buf.Bytes())
	return err
}
