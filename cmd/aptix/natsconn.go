package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/aptix-dev/aptix/cmd/aptix/internal/fsync"
	"github.com/aptix-dev/aptix/pkg/pipeline"
)

// Connection flags shared by every subcommand that talks to NATS.
var (
	natsURL   = envOr("APTIX_NATS_URL", "")
	natsCreds = envOr("APTIX_NATS_CREDS", "")
	natsNkey  = envOr("APTIX_NATS_NKEY", "")
	dataDir   = envOr("APTIX_DATA", defaultDataDir())
)

// DefaultNATSURL is where `aptix up` listens unless told otherwise.
const DefaultNATSURL = "nats://127.0.0.1:4222"

func init() {
	f := root.PersistentFlags()
	f.StringVar(&natsURL, "nats", natsURL, "NATS `URL` (env APTIX_NATS_URL); default: a running aptix up at "+DefaultNATSURL+", else an embedded server")
	f.StringVar(&natsCreds, "creds", natsCreds, "NATS credentials file (env APTIX_NATS_CREDS)")
	f.StringVar(&natsNkey, "nkey", natsNkey, "NATS nkey seed file, e.g. deploy/nats/nkeys/client.nk (env APTIX_NATS_NKEY)")
	f.StringVar(&dataDir, "data", dataDir, "data directory for embedded NATS and local indexes (env APTIX_DATA)")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "aptix")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "aptix")
	}
	return ".aptix"
}

// runningFile is the file in the --data dir where `aptix up` writes the
// URL clients reach it at while it runs: a client command without --nats
// finds it there whatever --listen it was given.
const runningFile = "nats.url"

// writeRunningURL records url as the running `aptix up`'s in dir; the
// returned func removes it.
func writeRunningURL(dir, url string) (func(), error) {
	path := filepath.Join(dir, runningFile)
	if err := os.WriteFile(path, []byte(url+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("record the NATS URL in %s: %w", path, err)
	}
	return func() { _ = os.Remove(path) }, nil
}

// runningUpURL is the URL an `aptix up` running on dir recorded, or "" when
// none runs there (no file, or one left by an `aptix up` that was killed:
// the dir's lock is free then).
func runningUpURL(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, runningFile))
	if err != nil || !dataDirHeld(dir) {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// serverURL is the NATS a client command talks to: --nats, else the
// `aptix up` running on --data, else DefaultNATSURL.
func serverURL() string {
	if natsURL != "" {
		return natsURL
	}
	if u := runningUpURL(dataDir); u != "" {
		return u
	}
	return DefaultNATSURL
}

// connectNATS connects to --nats when given. Without it, it connects to the
// `aptix up` running on --data (whatever its --listen), else tries one on
// the default URL, and failing that starts an in-process nats-server with
// JetStream persisted under --data, so one-shot commands such as
// `aptix index` work with nothing running. close releases both.
func connectNATS(name string) (nc *nats.Conn, closeFn func(), err error) {
	opts := []nats.Option{nats.Name("aptix " + name)}
	auth, err := cliAuthOptions()
	if err != nil {
		return nil, nil, usagef("%w", err)
	}
	opts = append(opts, auth...)
	if u := serverURL(); natsURL != "" || u != DefaultNATSURL {
		nc, err = nats.Connect(u, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to NATS at %s%s: %w", u, runningFrom(u), err)
		}
		return nc, func() { drainAndWait(nc) }, nil
	}
	if nc, err = nats.Connect(DefaultNATSURL, append(opts, nats.Timeout(500*time.Millisecond))...); err == nil {
		return nc, func() { drainAndWait(nc) }, nil
	}
	unlock, err := lockDataDir(dataDir, "aptix "+name+" (embedded NATS)")
	if err != nil {
		return nil, nil, fmt.Errorf("no NATS at %s, and no embedded one possible: %w (to use that one, pass its URL with --nats)", DefaultNATSURL, err)
	}
	sync, err := fsync.FromEnv()
	if err != nil {
		unlock()
		return nil, nil, err
	}
	srv, err := startEmbedded(filepath.Join(dataDir, "nats"), -1, "", nil, sync)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	fmt.Fprintf(os.Stderr, "aptix: no NATS at %s; using an embedded server with data in %s\n", DefaultNATSURL, dataDir)
	nc, err = nats.Connect("", append(opts, nats.InProcessServer(srv))...)
	if err != nil {
		srv.Shutdown()
		unlock()
		return nil, nil, fmt.Errorf("connect to embedded NATS: %w", err)
	}
	return nc, func() {
		drainAndWait(nc)
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock()
	}, nil
}

// drainAndWait drains nc and waits (up to 10s) until it is closed: Drain
// returns at once, and a process that exits or an embedded server that shuts
// down right after it would cut off what was still being flushed.
func drainAndWait(nc *nats.Conn) {
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !nc.IsClosed() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// connectRunning connects to --nats, or to a running `aptix up` on the
// default URL. Unlike connectNATS it never starts an embedded server: a turn
// sent to a server with no stages would wait forever, so it fails fast instead.
func connectRunning(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("aptix " + name), nats.Timeout(2 * time.Second)}
	auth, err := cliAuthOptions()
	if err != nil {
		return nil, usagef("%w", err)
	}
	opts = append(opts, auth...)
	u := serverURL()
	nc, err := nats.Connect(u, opts...)
	if err != nil {
		return nil, fmt.Errorf("no Aptix at %s%s (%w): start it with `make run` or `%s` in another terminal, or pass --nats URL", u, runningFrom(u), err, hint("", "up"))
	}
	return nc, nil
}

// runningFrom says, for an error, that u came from the running `aptix up`'s
// record in --data rather than from --nats.
func runningFrom(u string) string {
	if natsURL == "" && u != DefaultNATSURL {
		return fmt.Sprintf(" (where the aptix up on %s said it listens)", dataDir)
	}
	return ""
}

// cliAuthOptions are the CLI's NATS credentials: --creds and --nkey, or
// else the nkey a secured `aptix up` generated in --data.
func cliAuthOptions() ([]nats.Option, error) {
	nkey := natsNkey
	if nkey == "" && natsCreds == "" {
		nkey = defaultNkey(dataDir)
	}
	return pipeline.AuthOptions(natsCreds, nkey)
}

// embeddedReadyWait bounds the embedded server's start. JetStream's start
// fsyncs its store, which a disk busy flushing other writes can hold up for
// seconds (a `make run` once missed the earlier 10 s bound right after a
// benchmark had written hundreds of megabytes); a server that cannot start
// at all still fails, only later.
const embeddedReadyWait = 60 * time.Second

// startEmbedded runs a JetStream-enabled nats-server storing under storeDir;
// with users, only their nkeys may connect; sync is its fsync policy.
// port -1 means no TCP listener (in-process clients only).
func startEmbedded(storeDir string, port int, host string, users []*server.NkeyUser, sync fsync.Policy) (*server.Server, error) {
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return nil, fmt.Errorf("create NATS store dir: %w", err)
	}
	opts := &server.Options{
		ServerName: "aptix", JetStream: true, StoreDir: storeDir,
		Host: host, Port: port, NoSigs: true, Nkeys: users,
	}
	sync.Apply(opts)
	if host == "" {
		opts.Host = "127.0.0.1"
	}
	if port < 0 {
		opts.DontListen = true
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(embeddedReadyWait) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not become ready within %s", embeddedReadyWait)
	}
	return srv, nil
}
