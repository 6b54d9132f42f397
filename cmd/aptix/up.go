package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aptix-dev/aptix/pkg/sealbox"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/fsync"
	"github.com/aptix-dev/aptix/cmd/aptix/internal/stack"
	"github.com/aptix-dev/aptix/pkg/hostguard"
	"github.com/aptix-dev/aptix/pkg/pipeline"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/pkg/profiles"
	"github.com/aptix-dev/aptix/services/gateway/app"
	"github.com/aptix-dev/aptix/services/gateway/auth"
	"github.com/aptix-dev/aptix/services/gateway/httpapi"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	"github.com/aptix-dev/aptix/services/retriever/mcpserver"
	"github.com/aptix-dev/aptix/services/retriever/retrieval"
	"github.com/aptix-dev/aptix/services/toolrunner/mcp"
)

func init() {
	var listen string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run the whole pipeline in one process on an embedded NATS (the sandbox model when no API key is set)",
		Long: "up starts an embedded nats-server with JetStream (data under --data), listening on --listen so\n" +
			"other clients and stage binaries can connect, and runs all five stages in-process (retriever,\n" +
			"envelope, llmcaller, toolrunner, mapper), the HTTP gateway (--http) and the code index as an MCP\n" +
			"server (--mcp). It serves the sandbox model on its profile's address (the default backend when\n" +
			"there is no OPENAI_API_KEY and no profiles file saying otherwise). Clients on the same --data find\n" +
			"it without --nats. Logs (JSON, stderr) start after the banner unless --log-level is given.\n" +
			"Stop with Ctrl-C: new turns wait in the queue, turns in flight finish first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if upMemoryLimit, err = applyMemoryLimit(); err != nil {
				return usagef("%w", err)
			}
			return runUp(cmd.Context(), listen, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", defaultNATSListen, "address the embedded NATS listens on")
	cmd.Flags().StringVar(&upHTTP, "http", defaultHTTPListen, "address the OpenAI Responses API gateway listens on (empty: no gateway)")
	cmd.Flags().StringVar(&upLogLevel, "log-level", "", "debug, info, warn or error (env APTIX_LOG_LEVEL; default info, and warn until the banner is printed)")
	cmd.Flags().StringVar(&upMCP, "mcp", defaultUpMCP, "address the code index is served on as MCP server \"aptix\" for the tool loop and any MCP client (empty: not served)")
	root.AddCommand(cmd)
}

// upHTTP is the --http address of `aptix up` (a variable so tests can use a free port).
var upHTTP string

// upMCP is the --mcp address of `aptix up`.
var upMCP string

// upLogLevel is the --log-level of `aptix up`.
var upLogLevel string

// upLogOut receives the logs of `aptix up` (tests read it).
var upLogOut io.Writer = os.Stderr

func runUp(ctx context.Context, listen string, out io.Writer) error {
	// The data dir first: a second `aptix up` on it must fail before it
	// starts anything.
	unlock, err := lockDataDir(dataDir, "aptix up on "+listen)
	if err != nil {
		return err
	}
	defer unlock()
	ctx, stop := interruptible(ctx, os.Stderr, os.Exit)
	defer stop()
	stopProfile, err := startCPUProfile()
	if err != nil {
		return usagef("%w", err)
	}
	defer stopProfile()
	level, explicit, err := pipeline.ParseLogLevel(cmp.Or(upLogLevel, os.Getenv(pipeline.EnvLogLevel)))
	if err != nil {
		return usagef("--log-level: %w", err)
	}
	// Until the banner only warnings and errors: the start-up's info lines
	// would bury it. A level the user asked for holds from the start.
	var logLevel slog.LevelVar
	logLevel.Set(level)
	if !explicit {
		logLevel.Set(max(level, slog.LevelWarn))
	}
	log := pipeline.NewLoggerAt(upLogOut, &logLevel).With("service", "aptix-up")

	set, err := profiles.FromEnv()
	if err != nil {
		return usagef("%w", err) // APTIX_PROFILES, APTIX_BACKEND…: input
	}
	def, err := set.Get("")
	if err != nil {
		return usagef("%w", err)
	}
	// The same limits every stage binary applies (APTIX_QUEUE_MAX_BYTES,
	// APTIX_WORK_MAX_BYTES, APTIX_HISTORY_MAX_BYTES, ...).
	streams, subs, err := pipeline.LimitsFromEnv()
	if err != nil {
		return usagef("%w", err)
	}
	sync, err := fsync.FromEnv()
	if err != nil {
		return usagef("%w", err)
	}
	stopTelemetry, err := pipeline.StartTelemetry(ctx, "aptix")
	if err != nil {
		return err
	}
	defer stopTelemetry()

	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return usagef("--listen %q: %v", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return usagef("--listen %q: bad port", listen)
	}
	if ln, err := net.Listen("tcp", listen); err != nil {
		return fmt.Errorf("cannot listen on %s (is another `aptix up` running?): %w", listen, err)
	} else {
		ln.Close()
	}
	var httpLn net.Listener
	if upHTTP != "" {
		if err := auth.Precheck(upHTTP); err != nil {
			return usagef("--http %s: %w", upHTTP, err)
		}
		if httpLn, err = net.Listen("tcp", upHTTP); err != nil {
			return fmt.Errorf("cannot listen on %s for the HTTP gateway (--http \"\" disables it): %w", upHTTP, err)
		}
		defer httpLn.Close()
	}
	// Beyond loopback NATS takes only the nkey generated into the data dir,
	// and the MCP endpoint only the gateway's credentials (upsecure.go).
	var nkeyFile string
	var users []*server.NkeyUser
	if secureNATS(listen) {
		nkeyFile = upNkeyFile(dataDir)
		pub, err := ensureNkey(nkeyFile)
		if err != nil {
			return err
		}
		users = nkeyUsers(pub)
	}
	guardMCP := false
	if upMCP != "" && !auth.Loopback(upMCP) {
		if err := auth.Precheck(upMCP); err != nil {
			return usagef("--mcp %s: %w", upMCP, err)
		}
		m, _ := auth.ParseMode(os.Getenv("APTIX_AUTH"))
		if guardMCP = !m.None(); !guardMCP {
			log.Warn("APTIX_AUTH=none: the MCP endpoint beyond loopback serves the code index to anyone", "addr", upMCP)
		}
	}
	srv, err := startEmbedded(filepath.Join(dataDir, "nats"), port, host, users, sync)
	if err != nil {
		return err
	}
	defer func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	natsAddr := "nats://" + net.JoinHostPort(clientHost(host), portStr)
	// Client commands without --nats find this server on any --listen.
	forget, err := writeRunningURL(dataDir, natsAddr)
	if err != nil {
		return err
	}
	defer forget()

	profilesFile := os.Getenv("APTIX_PROFILES")
	model := modelLine(def, profilesFile)
	// Every sandbox profile on this machine is served, the default or not:
	// GET /v1/models lists it, so a request for it must be answered.
	for _, sb := range localSandboxes(set) {
		stopSandbox, err := serveSandbox(sb.BaseURL, log)
		if err != nil {
			return err
		}
		defer stopSandbox()
		if sb.Name != def.Name {
			model += fmt.Sprintf("; also the SANDBOX as backend %q (model %s)", sb.Name, sb.Model(""))
		}
	}

	natsOpts := []nats.Option{nats.Name("aptix up"), nats.MaxReconnects(-1)}
	if nkeyFile != "" {
		o, err := pipeline.AuthOptions("", nkeyFile)
		if err != nil {
			return err
		}
		natsOpts = append(natsOpts, o...)
	}
	// The gateway's listener and server outlive a NATS connection: while
	// `up` connects again (below), /healthz answers and the API 503s.
	var live *httpapi.Live
	var hs *http.Server
	if httpLn != nil {
		live = &httpapi.Live{}
		hs = httpapi.HTTPServer(live)
		if m, _ := auth.ParseMode(os.Getenv("APTIX_AUTH")); m.None() {
			// No credentials to ask for: only the names of this machine
			// reach the API and the console through loopback, so a web page
			// that rebinds its own name to 127.0.0.1 reads nothing.
			hs.Handler = hostguard.FromEnv(upHTTP, httpLn.Addr().String()).Wrap(hs.Handler)
		}
		go func() { _ = hs.Serve(httpLn) }()
		// On stop the gateway takes no new request at once, while the
		// stages drain upstream first; the requests in flight are answered
		// as their turns complete (gatewayDrain bounds the wait).
		quit, httpDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(httpDone)
			select {
			case <-ctx.Done():
			case <-quit:
			}
			shutdownHTTP(hs)
		}()
		defer func() { close(quit); <-httpDone }()
	}
	u := &upRun{set: set, log: log, out: out, live: live, hs: hs, httpLn: httpLn, natsAddr: natsAddr, listen: listen, model: model, def: def,
		profilesLine: profilesLine(set, profilesFile),
		streams:      streams, subs: subs, sync: sync, nkeyFile: nkeyFile, guardMCP: guardMCP, logLevel: &logLevel, level: level}
	// Everything on the connection (index, tools, stages, gateway) is
	// rebuilt on a new one if NATS closes it for good (pipeline.Supervise):
	// one bad protocol line must not stop the service.
	err = pipeline.Supervise(ctx, log, func(context.Context) (*nats.Conn, error) {
		nc, err := nats.Connect(natsAddr, natsOpts...)
		if err != nil {
			return nil, fmt.Errorf("connect to embedded NATS: %w", err)
		}
		if upConnected != nil {
			upConnected(nc)
		}
		return nc, nil
	}, u.run)
	fmt.Fprintln(out, "Aptix stopped.")
	return err
}

// upConnected, when set (tests), sees every connection `up` makes.
var upConnected func(*nats.Conn)

// shutdownHTTP stops hs: it closes the listener at once and lets the
// requests in flight finish for up to gatewayDrain.
func shutdownHTTP(hs *http.Server) {
	c, cancel := context.WithTimeout(context.Background(), gatewayDrain)
	defer cancel()
	_ = hs.Shutdown(c)
}

// upRun is what `aptix up` runs on one NATS connection.
type upRun struct {
	set      *profiles.Set
	def      profiles.Profile
	log      *slog.Logger
	out      io.Writer
	live     *httpapi.Live
	hs       *http.Server
	httpLn   net.Listener
	natsAddr string
	listen   string
	model    string
	// profilesLine lists the profiles a profiles file loaded ("" without one).
	profilesLine string
	streams      layout.StreamConfig
	subs         pipeline.SubscriberConfig
	nkeyFile     string // the nkey NATS requires beyond loopback, or ""
	guardMCP     bool   // the MCP endpoint requires the gateway's credentials
	sync         fsync.Policy
	// logLevel is the logger's level: warn until the banner is printed,
	// then level (--log-level).
	logLevel *slog.LevelVar
	level    slog.Level
	runs     int
	up       bool // the banner was printed
}

// run serves on nc until ctx ends (stop, or nc closed under it). The banner
// is printed once, when a run is first ready.
func (u *upRun) run(ctx context.Context, nc *nats.Conn) error {
	u.runs++
	log := u.log
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	idx, err := retrieval.Open(ctx, js, retrieval.Options{DataDir: filepath.Join(dataDir, "index"), Logger: log})
	if err != nil {
		return err
	}
	defer idx.Close()

	tools, mcpLine, stopTools, err := upTools(ctx, js, idx, u.guardMCP, log)
	if err != nil {
		return err
	}
	defer stopTools()

	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- stack.Run(ctx, nc, stack.Config{Profiles: u.set, Searcher: idx, Logger: log, Tools: tools, Stream: u.streams, Subscriber: u.subs}, ready)
	}()
	select {
	case <-ready:
	case err := <-errc:
		return err
	}
	httpLine, curlLine := "", ""
	if u.live != nil {
		gw, err := newGateway(ctx, u.httpLn.Addr().String(), nc, u.set, log)
		if err != nil {
			return err
		}
		authLine := gw.Auth
		u.live.Set(gw.Server)
		defer func() {
			u.live.Set(nil)
			gw.Close()
		}()
		base := "http://" + u.httpLn.Addr().String()
		httpLine = fmt.Sprintf("  HTTP:   %s (OpenAI Responses and Chat Completions: POST /v1/responses, POST /v1/chat/completions, GET /v1/models)\n  Console: %s/console/\n  Auth:   %s\n", base, base, authLine)
		hdr := ""
		switch {
		case strings.HasPrefix(authLine, "keys"):
			hdr = " -H \"Authorization: Bearer $APTIX_API_KEY\"" // aptix keys create --name NAME
		case strings.HasPrefix(authLine, "jwt"):
			hdr = " -H \"Authorization: Bearer $TOKEN\""
		}
		curlLine = fmt.Sprintf("Or over HTTP, with any OpenAI SDK or curl:\n  curl -s %s/v1/responses%s -H 'Content-Type: application/json' -d '{\"model\":\"%s\",\"input\":\"Explain what this service does\"}'\n", base, hdr, u.def.Model(""))
	}
	if !u.up {
		u.up = true
		natsAddr := u.natsAddr
		lim := u.streams.Limits()
		limitsLine := fmt.Sprintf("  Limits: queue %s, work %s, history %s / %s (APTIX_QUEUE_MAX_BYTES, APTIX_WORK_MAX_BYTES, APTIX_HISTORY_MAX_BYTES, APTIX_HISTORY_MAX_AGE)\n  Disk:   %s (APTIX_SYNC=always for an fsync on every write)\n  Memory: %s\n",
			layout.FormatBytes(lim.QueueMaxBytes), layout.FormatBytes(lim.WorkMaxBytes), layout.FormatBytes(lim.HistoryMaxBytes), lim.HistoryMaxAge, u.sync.Describe(), describeMemoryLimit(upMemoryLimit))
		natsAccess := ""
		if u.nkeyFile != "" {
			natsAccess = "credentials required: the nkey " + u.nkeyFile + ", which the CLI on this data dir uses by itself (elsewhere --nkey FILE); "
		}
		fmt.Fprintf(u.out, "Aptix is up.\n  NATS:   %s (%s%sJetStream data in %s)\n  Model:  %s\n%s%s%s%s  Stages: %s (nats micro ls)\n\n"+
			"Send a first turn from another terminal:\n  %s\n%s"+
			"Give it your code to retrieve from:\n  %s && %s\n\nCtrl-C stops it; in-flight turns finish first.\n",
			natsAddr, listening(natsAddr, u.listen), natsAccess, dataDir, u.model, u.profilesLine, httpLine, mcpLine, limitsLine, stageNames(), hint(natsAddr, "exec", `"Explain what this service does"`), curlLine,
			hint(natsAddr, "index", "."), hint(natsAddr, "exec", `"Where are retries scheduled?"`))
	} else {
		log.Info("Aptix is up again on a new NATS connection", "restarts", u.runs-1)
	}
	u.logLevel.Set(u.level)
	err = <-errc
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if u.hs != nil && !nc.IsClosed() {
		// Stopping (not a lost connection): requests in flight finish on
		// this gateway before it closes.
		shutdownHTTP(u.hs)
	}
	return err
}

// upTools serves the code index as MCP server "aptix" (--mcp) and returns
// the toolrunner's MCP servers: APTIX_MCP_CONFIG's, plus "aptix" unless the
// file names its own.
//
// With guard, the endpoint answers only callers with a credential the
// gateway accepts (APTIX_AUTH), and the in-process tool loop with a token
// of its own.
func upTools(ctx context.Context, js jetstream.JetStream, idx *retrieval.Index, guard bool, log *slog.Logger) (*mcp.Registry, string, func(), error) {
	cfg, err := mcp.ConfigFromEnv()
	if err != nil {
		return nil, "", nil, usagef("%w", err)
	}
	stop, line := func() {}, ""
	if upMCP != "" {
		src, err := mcpserver.NewSource(ctx, js, idx)
		if err != nil {
			return nil, "", nil, err
		}
		var wrap func(http.Handler) http.Handler
		var headers map[string]string
		access := ""
		if guard {
			setup, err := auth.FromEnv(ctx, upMCP, js, 1, log.With("component", "mcp"))
			if err != nil {
				return nil, "", nil, usagef("--mcp %s: %w", upMCP, err)
			}
			token, err := internalToken()
			if err != nil {
				return nil, "", nil, err
			}
			wrap = func(h http.Handler) http.Handler { return requireCredential(h, setup.Auth, token) }
			headers = map[string]string{"Authorization": "Bearer " + token}
			access = "; " + setup.Auth.Mode() + " required, as for the gateway"
		}
		url, stopMCP, err := serveMCPWith(ctx, src, mcpserver.Options{Logger: log.With("component", "mcp")}, upMCP, wrap)
		if err != nil {
			return nil, "", nil, fmt.Errorf("serve the index over MCP on %s (--mcp \"\" turns it off): %w", upMCP, err)
		}
		stop = stopMCP
		line = fmt.Sprintf("  MCP:    %s (the code index as MCP server \"aptix\": search_code, read_file_lines, list_repos%s)\n", url, access)
		if cfg.Servers == nil {
			cfg.Servers = map[string]mcp.ServerConfig{}
		}
		if _, ok := cfg.Servers["aptix"]; !ok {
			cfg.Servers["aptix"] = mcp.ServerConfig{Type: mcp.TypeHTTP, URL: url, Headers: headers}
		}
	}
	reg := mcp.NewRegistry(cfg, mcp.Options{Logger: log.With("component", "toolrunner")})
	return reg, line, func() { _ = reg.Close(); stop() }, nil
}

// newGateway builds the HTTP gateway (services/gateway/app) over the
// in-process pipeline on nc, for the listener at addr; `up` serves it
// through an httpapi.Live. Authentication follows APTIX_AUTH: none by
// default on loopback, required beyond it; Gateway.Auth describes it.
func newGateway(ctx context.Context, addr string, nc *nats.Conn, set *profiles.Set, log *slog.Logger) (*app.Gateway, error) {
	gw, err := app.FromEnv(ctx, app.Options{NC: nc, Profiles: set, Addr: addr, Logger: log.With("component", "gateway"),
		DataDir: dataDir, LocalStack: true})
	var ce *app.ConfigError
	if errors.As(err, &ce) {
		return nil, usagef("gateway: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return gw, nil
}

// gatewayDrain bounds how long a stopping gateway waits for the requests in
// flight: the stages' drain (30 s) and a little more.
const gatewayDrain = 40 * time.Second

// modelLine is the banner's Model line for the default profile def. The
// hint to set OPENAI_API_KEY or APTIX_PROFILES is for a user who has set
// neither: with a profiles file loaded (profilesFile) the sandbox is the
// default by choice, and the hint would say the file was not read.
func modelLine(def profiles.Profile, profilesFile string) string {
	if !def.Sandbox {
		return fmt.Sprintf("%s (%s, model %s)", def.Name, def.BaseURL, def.Model(""))
	}
	line := "SANDBOX at " + def.BaseURL + ": a deterministic stand-in, NOT a model"
	if profilesFile == "" {
		line += " (set OPENAI_API_KEY or APTIX_PROFILES to use one)"
	}
	return line
}

// profilesLine is the banner's Profiles line: with a profiles file, every
// profile it makes available (the built-ins included, as a request's model
// can name any), the default marked, so a user sees the file was read and
// what it defines.
func profilesLine(set *profiles.Set, profilesFile string) string {
	if profilesFile == "" {
		return ""
	}
	names := set.Names()
	for i, n := range names {
		if n == set.Default {
			names[i] += " (default)"
		}
	}
	return fmt.Sprintf("  Profiles: %s (from %s)\n", strings.Join(names, ", "), profilesFile)
}

// localSandboxes are the set's sandbox profiles on a loopback address (and
// the default one, wherever), one per address: those `aptix up` serves
// itself. Another sandbox elsewhere is someone else's to run.
func localSandboxes(set *profiles.Set) []profiles.Profile {
	var out []profiles.Profile
	seen := map[string]bool{}
	for _, name := range set.Names() {
		p, err := set.Get(name)
		if err != nil || !p.Sandbox {
			continue
		}
		u, err := url.Parse(p.BaseURL)
		if err != nil || seen[u.Host] {
			continue
		}
		ip := net.ParseIP(u.Hostname())
		local := u.Hostname() == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
		if !local && name != set.Default {
			continue
		}
		seen[u.Host] = true
		out = append(out, p)
	}
	return out
}

// serveSandbox serves the sandbox model on baseURL's host:port. When that
// address is already taken by an Aptix sandbox (say, `aptix sandbox` with a
// script), it uses that one and says so; taken by anything else, it fails:
// every prompt of every turn would go to a process nobody chose.
func serveSandbox(baseURL string, log *slog.Logger) (func(), error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("sandbox profile base URL %q is not a URL", baseURL)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		if err := probeSandbox(baseURL); err != nil {
			return nil, fmt.Errorf("the sandbox address %s is taken by something that is not an Aptix sandbox (stop it, or set APTIX_SANDBOX_URL to a free address): %w", u.Host, err)
		}
		log.Warn("sandbox address in use by an Aptix sandbox; using it", "addr", u.Host)
		return func() {}, nil
	}
	// Its responses live in the data dir, so a conversation continued after
	// a restart still finds its previous_response_id.
	// Its compaction items are sealed with a key of its own, kept beside
	// its responses so they open after a restart.
	keys, err := keyFile(filepath.Join(dataDir, "sandbox", "compaction.keys"))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	sb := sandbox.New(sandbox.Options{Logger: log.With("component", "sandbox"), StateFile: filepath.Join(dataDir, "sandbox", "responses.jsonl"),
		CompactionKeys: keys})
	hs := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	log.Warn("serving the SANDBOX model (deterministic stand-in, not a model)", "url", baseURL)
	return func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(c)
		_ = sb.Close()
	}, nil
}

// probeSandbox checks that what answers at baseURL is an Aptix sandbox:
// every answer of one carries sandbox.HeaderSandbox.
func probeSandbox(baseURL string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(strings.TrimRight(baseURL, "/") + "/_sandbox/stats")
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	_ = resp.Body.Close()
	if resp.Header.Get(sandbox.HeaderSandbox) != "1" {
		return fmt.Errorf("its answer (HTTP %d) has no %s header", resp.StatusCode, sandbox.HeaderSandbox)
	}
	return nil
}

// keyFile is the compaction keyring kept in file (mode 0600), made with one
// new key the first time, so the items a stack seals open after a restart.
func keyFile(file string) (*sealbox.Keyring, error) {
	list, err := sealbox.LoadOrCreate(file)
	if err != nil {
		return nil, err
	}
	return sealbox.Parse(list)
}

// stageNames lists the declared stages, all of which `up` runs.
func stageNames() string {
	var names []string
	for _, st := range layout.Stages {
		names = append(names, st.Name)
	}
	return strings.Join(names, ", ")
}
