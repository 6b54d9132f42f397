package main

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/services/gateway/application"
)

// A local receiver for the gateway's webhooks, so trying them needs no nc
// loop (which a fresh machine may lack, and which outlives its shell).
func init() {
	var listen, secret string
	var count int
	cmd := &cobra.Command{
		Use:   "webhook-receiver",
		Short: "Receive webhooks locally: print each delivery's headers and body, check its signature",
		Long: "webhook-receiver answers every POST with 200 and prints the delivery: the webhook-id,\n" +
			"webhook-timestamp, X-Aptix-Event and X-Aptix-Response-ID headers and the JSON body. With\n" +
			"APTIX_WEBHOOK_SECRET (or --secret) it checks the Standard Webhooks signature and says whether it\n" +
			"is valid. --count N exits after N deliveries. For trying webhooks against `aptix up`\n" +
			"(metadata.webhook_url http://" + defaultWebhookListen + "/hook), not for production.",
		Example: "  aptix webhook-receiver --count 1 &\n" +
			`  curl -s localhost:8080/v1/responses -H 'Content-Type: application/json' -d '{"input":"hi","background":true,"metadata":{"webhook_url":"http://` + defaultWebhookListen + `/hook"}}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var key []byte
			if secret != "" {
				k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
				if err != nil || len(k) == 0 {
					return usagef("--secret: not a whsec_<base64> secret")
				}
				key = k
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "aptix: receiving webhooks at http://%s/ (any path)\n", ln.Addr())
			return serveWebhooks(cmd.Context(), ln, key, count, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultWebhookListen, "address to receive on")
	cmd.Flags().StringVar(&secret, "secret", os.Getenv("APTIX_WEBHOOK_SECRET"), "the gateway's whsec_<base64> secret, to check signatures (env APTIX_WEBHOOK_SECRET)")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many deliveries (0: run until Ctrl-C)")
	root.AddCommand(cmd)
}

// serveWebhooks prints each delivery to out until ctx ends or count
// deliveries (count > 0) were printed.
func serveWebhooks(ctx context.Context, ln net.Listener, key []byte, count int, out io.Writer) error {
	var mu sync.Mutex
	received := 0
	enough := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST webhooks here", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "POST %s  event=%s response=%s webhook-id=%s webhook-timestamp=%s\n", r.URL.Path,
			r.Header.Get("X-Aptix-Event"), r.Header.Get("X-Aptix-Response-ID"), r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"))
		if key != nil {
			fmt.Fprintf(out, "signature: %s\n", checkSignature(key, r.Header, body))
		}
		fmt.Fprintf(out, "%s\n\n", body)
		w.WriteHeader(http.StatusOK)
		if received++; count > 0 && received == count {
			close(enough)
		}
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case <-enough:
	case err := <-errc:
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(c); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkSignature says whether a delivery carries a valid Standard Webhooks
// signature (one of the space-separated "v1,<base64>" values) for key.
func checkSignature(key []byte, h http.Header, body []byte) string {
	sigs := h.Get("webhook-signature")
	if sigs == "" {
		return "MISSING (the gateway has no APTIX_WEBHOOK_SECRET?)"
	}
	want := application.Sign(key, h.Get("webhook-id"), h.Get("webhook-timestamp"), body)
	for s := range strings.FieldsSeq(sigs) {
		if v, ok := strings.CutPrefix(s, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return "valid"
		}
	}
	return "INVALID (another secret, or the body was changed)"
}
