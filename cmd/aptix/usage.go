package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/pipeline/spend"
	"github.com/aptix-dev/aptix/pkg/pipeline/store"
	"github.com/aptix-dev/aptix/pkg/profiles/pricelist"
)

// aptix usage: the spend totals the mapper folds completed turns into
// (docs/usage-and-budgets.md), read from the bus like aptix keys: an
// operator's view of every principal, or one.
func init() {
	var principal, model, from, to string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage [--principal P] [--model M] [--from YYYY-MM-DD] [--to YYYY-MM-DD]",
		Short: "Print tokens and cost by principal, model and day (what GET /v1/aptix/usage answers)",
		Long: "Completed turns add their tokens and cost (at the backend profile's prices) to their principal's\n" +
			"totals, once per turn. This prints those totals: every principal's, or one's with --principal\n" +
			"(key:NAME for an API key, jwt:SUB for a token, empty for bus clients without one).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := spend.Filter{Principal: principal, All: !cmd.Flags().Changed("principal"), Model: model}
			for _, d := range []struct {
				flag, v string
				dst     *string
			}{{"--from", from, &f.From}, {"--to", to, &f.To}} {
				if d.v == "" {
					continue
				}
				day, err := time.Parse(time.DateOnly, d.v)
				if err != nil {
					return usagef("%s %q: want a UTC date as YYYY-MM-DD", d.flag, d.v)
				}
				*d.dst = day.Format("20060102")
			}
			nc, closeNC, err := connectNATS("usage")
			if err != nil {
				return err
			}
			defer closeNC()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			replicas, _ := strconv.Atoi(envOr(layout.EnvReplicas, "1"))
			u, err := store.OpenUsage(ctx, js, replicas)
			if err != nil {
				return err
			}
			rep, err := u.Report(ctx, f)
			if err != nil {
				return err
			}
			pending, _ := u.Pending(ctx)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printUsage(cmd.OutOrStdout(), rep, f)
			if pending > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "aptix: %d completed turn(s) not yet in the totals; run again in a moment\n", pending)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&principal, "principal", "", "only this principal (key:NAME, jwt:SUB; empty for bus clients)")
	fl.StringVar(&model, "model", "", "only this model")
	fl.StringVar(&from, "from", "", "first UTC day counted, YYYY-MM-DD")
	fl.StringVar(&to, "to", "", "last UTC day counted, YYYY-MM-DD")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON (the shape of GET /v1/aptix/usage)")
	root.AddCommand(cmd)
}

// costText is a cost as the CLI prints it: $0.001234 USD, or unpriced.
func costText(c *contracts.Cost) string {
	switch {
	case c == nil:
		return "cost unknown"
	case c.Unpriced:
		return "cost unpriced"
	}
	return "cost $" + strconv.FormatFloat(c.Total, 'f', -1, 64)
}

func printUsage(w io.Writer, r spend.Report, f spend.Filter) {
	who := "all principals"
	if !f.All {
		who = strconv.Quote(f.Principal)
	}
	fmt.Fprintf(w, "%s: %d turn(s), %d input tokens (%d cached), %d output tokens (%d reasoning), $%s USD",
		who, r.Turns, r.InputTokens, r.CachedTokens, r.OutputTokens, r.ReasoningTokens, strconv.FormatFloat(r.Cost.Total, 'f', -1, 64))
	if r.Unpriced > 0 {
		fmt.Fprintf(w, " (%d unpriced turn(s) not in the cost)", r.Unpriced)
	}
	if r.Replays > 0 {
		fmt.Fprintf(w, "; %d replay(s) among them", r.Replays)
	}
	fmt.Fprintln(w)
	for _, sec := range []struct {
		title string
		m     map[string]spend.Counts
	}{{"PRINCIPAL", r.ByPrincipal}, {"KEY", r.ByKey}, {"MODEL", r.ByModel}, {"DAY", r.ByDay}, {"PRICED AT", r.ByPrice}} {
		if len(sec.m) == 0 || (sec.title == "PRINCIPAL" && !f.All) {
			continue
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tTURNS\tINPUT\tOUTPUT\tCOST USD\n", sec.title)
		keys := make([]string, 0, len(sec.m))
		for k := range sec.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c := sec.m[k]
			name := k
			if sec.title == "PRINCIPAL" && k == "" {
				name = `""`
			}
			if sec.title == "PRICED AT" {
				// Which prices charged the turns: the built-in list (dated) or a profile's.
				name = pricelist.Source(k)
			}
			if sec.title == "DAY" && len(k) == 8 {
				name = strings.Join([]string{k[:4], k[4:6], k[6:]}, "-")
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", name, c.Turns, c.InputTokens, c.OutputTokens,
				strconv.FormatFloat(contracts.CostFromNanos(c.CostNanos).Total, 'f', -1, 64))
		}
		_ = tw.Flush()
	}
}
