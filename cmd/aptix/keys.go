package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/gateway/auth"
)

// aptix keys: the gateway's API keys (APTIX_AUTH=keys), kept hashed in the
// JetStream KV bucket aptix_keys. The key is printed once, by create.
func init() {
	keys := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke the HTTP gateway's API keys (APTIX_AUTH=keys)",
		Long: "The gateway's API keys live in the JetStream KV bucket " + auth.KeyBucket + " as a SHA-256 and metadata;\n" +
			"the key itself is printed once by create and kept nowhere. A revoked or expired key is refused\n" +
			"by every gateway replica at its next request (each request reads the bucket).",
	}
	var name, expires, principal, budget, budgetTokens string
	var admin bool
	create := &cobra.Command{
		Use:   "create --name NAME [--expires 90d] [--budget 0.10/day] [--budget-tokens 100000/day]",
		Short: "Create an API key and print it (once: only its hash is stored)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("--name is required")
			}
			ttl, err := auth.ParseTTL(expires)
			if err != nil {
				return usagef("--expires: %w", err)
			}
			budgets, err := auth.BudgetsFromFlags(budget, budgetTokens)
			if err != nil {
				return usagef("--budget: %w", err)
			}
			return withKeys(cmd.Context(), "keys create", func(ctx context.Context, k *auth.Keys) error {
				var roles []string
				if admin {
					roles = []string{auth.RoleAdmin} // opens the web console (/console/)
				}
				key, rec, err := k.CreateKey(ctx, auth.KeyRecord{Name: name, Principal: principal, Roles: roles, Budgets: budgets}, ttl)
				if errors.Is(err, auth.ErrDuplicateName) {
					return usagef("--name: %w", err)
				}
				if err != nil {
					return err
				}
				exp := "never"
				if rec.ExpiresAt != nil {
					exp = rec.ExpiresAt.Format(time.RFC3339)
				}
				caps := ""
				for _, b := range rec.Budgets {
					caps += ", budget " + b.String()
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "key %s for %s (principal %s), expires %s%s; shown once, keep it now:\n", rec.ID, rec.Name, rec.Principal, exp, caps)
				fmt.Fprintln(cmd.OutOrStdout(), key)
				return nil
			})
		},
	}
	create.Flags().StringVar(&name, "name", "", "who or what the key is for (the principal is key:NAME)")
	create.Flags().StringVar(&expires, "expires", "", "lifetime: days (90d) or a Go duration (12h); default never")
	create.Flags().StringVar(&principal, "principal", "", "principal the key acts as (default key:NAME; keys of one principal share its responses)")
	create.Flags().StringVar(&budget, "budget", "", "spending cap in USD per day or month, e.g. 0.10/day or 5/month: a turn is refused (429 budget_exceeded) once it is spent")
	create.Flags().StringVar(&budgetTokens, "budget-tokens", "", "cap on input plus output tokens per day or month, e.g. 100000/day")
	create.Flags().BoolVar(&admin, "admin", false, "give the key the admin role: it opens the web console at /console/ (which shows every principal's turns)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the API keys (ids, names, principals, status; never the keys)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withKeys(cmd.Context(), "keys list", func(ctx context.Context, k *auth.Keys) error {
				recs, err := k.List(ctx)
				if err != nil {
					return err
				}
				printKeys(cmd.OutOrStdout(), recs, time.Now())
				return nil
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke ID|NAME",
		Short: "Revoke a key by id, or every active key of a name; refused by every replica at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withKeys(cmd.Context(), "keys revoke", func(ctx context.Context, k *auth.Keys) error {
				done, err := k.Revoke(ctx, args[0])
				if err != nil {
					return err
				}
				if len(done) == 0 {
					return usagef("no active key with id or name %q", args[0])
				}
				for _, r := range done {
					fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s)\n", r.ID, r.Name)
				}
				return nil
			})
		},
	}
	keys.AddCommand(create, list, revoke)
	root.AddCommand(keys)
}

func withKeys(ctx context.Context, name string, f func(context.Context, *auth.Keys) error) error {
	nc, closeNC, err := connectNATS(name)
	if err != nil {
		return err
	}
	defer closeNC()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	replicas, _ := strconv.Atoi(envOr(layout.EnvReplicas, "1"))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	k, err := auth.OpenKeys(ctx, js, replicas)
	if err != nil {
		return err
	}
	return f(ctx, k)
}

func printKeys(w io.Writer, recs []auth.KeyRecord, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPRINCIPAL\tCREATED\tEXPIRES\tBUDGET\tSTATUS")
	for _, r := range recs {
		exp, status := "never", "active"
		if r.ExpiresAt != nil {
			exp = r.ExpiresAt.Format(time.RFC3339)
		}
		switch {
		case r.RevokedAt != nil:
			status = "revoked " + r.RevokedAt.Format(time.RFC3339)
		case !r.Active(now):
			status = "expired"
		}
		caps := make([]string, 0, len(r.Budgets))
		for _, b := range r.Budgets {
			caps = append(caps, b.String())
		}
		budget := strings.Join(caps, ", ")
		if budget == "" {
			budget = "none"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, r.Principal, r.CreatedAt.Format(time.RFC3339), exp, budget, status)
	}
	_ = tw.Flush()
}
