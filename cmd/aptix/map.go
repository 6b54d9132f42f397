package main

import (
	"bytes"
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/services/mapper/mapping"
)

// map shows the AgentExecuteResponse the mapper stage would publish for a raw
// /responses result (AGN-004), without a bus or a model.
func init() {
	var (
		responseFile, requestFile string
		status                    int
	)
	cmd := &cobra.Command{
		Use:   "map --response FILE [--status N] [--request FILE]",
		Short: "Print the AgentExecuteResponse Aptix maps from a raw /responses result",
		Example: `  aptix map --response examples/tool-only.response.json --request examples/ddr-turn1.request.json
  aptix map --response examples/rate-limited.response.json --status 429`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := os.ReadFile(responseFile)
			if err != nil {
				return usagef("%w", err)
			}
			var req contracts.AgentExecuteRequest
			if requestFile != "" {
				if err := readJSONFile(requestFile, &req); err != nil {
					return err
				}
			}
			resp := mapping.Map(mapping.Input{Request: req, LLM: contracts.LLMResult{Status: status, Body: string(bytes.TrimSpace(body))}})
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(resp); err != nil {
				return err
			}
			return printJSON(cmd, buf.Bytes())
		},
	}
	cmd.Flags().StringVar(&responseFile, "response", "", "raw /responses body (or error body) file")
	cmd.Flags().IntVar(&status, "status", 200, "HTTP status the body came with")
	cmd.Flags().StringVar(&requestFile, "request", "", "the AgentExecuteRequest the result answers (for ids and mode)")
	_ = cmd.MarkFlagRequired("response")
	root.AddCommand(cmd)
}
