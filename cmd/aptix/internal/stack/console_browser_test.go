//go:build console

package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/client"
	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
	retrieverstage "github.com/aptix-dev/aptix/services/retriever/stage"
)

// The web console in a real browser (make test-console): Debian's chromium,
// headless, driven by chromedp against the whole pipeline and the gateway in
// this process. Under CI=true a missing chromium fails the suite.

const hostilePrompt = `Hostile <script>alert(1)</script>"><img src=x onerror=alert(1)> prompt`

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (make test-console installs it with apt-get)")
	}
	t.Skip("chromium is not installed: run make test-console")
	return ""
}

// browser is one headless Chromium tab with a count of the JavaScript
// dialogs it was asked to open (an executed alert(1) would be one).
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	shots   string
	dialogs atomic.Int32
}

func newBrowser(t *testing.T, base string) *browser {
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx, base: base, shots: os.Getenv("APTIX_CONSOLE_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = "console-screenshots"
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b
}

// do runs steps with a timeout.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// open loads a console page and waits for its heading.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return run(b, "text of "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	return run(b, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
}

// shot saves the page as a PNG.
func (b *browser) shot(name string) {
	b.t.Helper()
	png := run(b, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// view saves what fits the window (1400×1000) as a PNG: the docs' pictures.
func (b *browser) view(name string) {
	b.t.Helper()
	png := run(b, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// safe checks that nothing a turn carried ran or became markup: no dialog
// was opened, the only script is the console's own, no image was injected.
func (b *browser) safe(where string) {
	b.t.Helper()
	scripts, imgs := b.count("script"), b.count("img")
	if n := b.dialogs.Load(); n != 0 || scripts != 1 || imgs != 0 {
		b.t.Fatalf("%s: %d dialog(s), %d script element(s), %d img element(s): hostile text was rendered as markup", where, n, scripts, imgs)
	}
}

// waitText polls until the element's text contains want.
func (b *browser) waitText(sel, want string) string {
	b.t.Helper()
	var s string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
		v, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			s = v
			if strings.Contains(s, want) {
				return s
			}
		}
	}
	b.t.Fatalf("%s never showed %q (last: %q)", sel, want, s)
	return s
}

// TestConsoleBrowser follows turns through every page of the console.
func TestConsoleBrowser(t *testing.T) {
	var indexDown atomic.Bool
	e := newEnv(t, sandbox.Options{Latency: 300 * time.Millisecond}, func(c *Config) {
		c.Searcher = retrieverstage.SearchFunc(func(_ context.Context, req contracts.AgentExecuteRequest) (contracts.Retrieval, error) {
			if indexDown.Load() {
				return contracts.Retrieval{}, errors.New("index unavailable")
			}
			return contracts.Retrieval{Index: "demo", Chunks: []contracts.RagChunk{
				{Id: "ck_retry", Path: "internal/retry/policy.go", StartLine: 12, EndLine: 30, Language: "go", Content: "func Backoff(n int) time.Duration {\n\treturn time.Second << n\n}"},
				{Id: "ck_hostile", Path: "docs/<img src=x onerror=alert(1)>.md", StartLine: 1, EndLine: 3, Language: "markdown", Content: "</pre><script>alert(1)</script>"},
			}}, nil
		})
	})
	base, _ := e.gateway()
	e.turn(contracts.AgentExecuteRequest{ConversationId: "c-browser", TurnId: "t-1", Mode: "ANALYZE", Instruction: "Explain the retry policy"})
	e.turn(contracts.AgentExecuteRequest{ConversationId: "c-browser", TurnId: "t-2", Instruction: hostilePrompt})
	indexDown.Store(true)
	if d := e.turn(contracts.AgentExecuteRequest{ConversationId: "c-dead", TurnId: "t-dead", Instruction: "Where are retries scheduled?"}); d.Response.Kind != contracts.KindError {
		t.Fatalf("with the index down: %+v", d.Response)
	}
	indexDown.Store(false)

	b := newBrowser(t, base)

	// Overview: the stages, the newest conversations.
	b.open("/console/")
	if s := b.text("#stages"); !strings.Contains(s, "retriever") || !strings.Contains(s, "llmcaller") || !strings.Contains(s, "mapper") {
		t.Fatalf("stages table: %q", s)
	}
	if s := b.text("#conversations"); !strings.Contains(s, "c-browser") || !strings.Contains(s, "c-dead") {
		t.Fatalf("newest conversations: %q", s)
	}
	b.safe("overview")
	b.shot("overview")

	// A conversation: its two turns, each with the four stages.
	b.open("/console/conversations/c-browser")
	turns, stages := b.count("li.turn"), b.count("li.turn table.waterfall tr.present")
	if turns != 2 || stages != 8 {
		t.Fatalf("conversation: %d turns, %d stored stages (want 2 and 8)", turns, stages)
	}
	for _, st := range []string{"retrieved", "enveloped", "responded", "completed"} {
		if n := b.count(`li.turn tr.present[data-stage="` + st + `"]`); n != 2 {
			t.Fatalf("waterfall stage %s on %d turns", st, n)
		}
	}
	if s := b.text("ol.turns"); !strings.Contains(s, "Explain the retry policy") || !strings.Contains(s, hostilePrompt) {
		t.Fatalf("turn texts (the hostile prompt must show as text): %q", s)
	}
	b.safe("conversation")
	b.shot("conversation")

	// A turn: the context block set apart, each chunk linked to its file and lines.
	b.open("/console/turns/t-1?c=c-browser")
	ctxText := b.text("#context-block")
	if !strings.Contains(ctxText, "=== CHUNK 1 ===") || !strings.Contains(ctxText, "internal/retry/policy.go:12-30") || !strings.Contains(ctxText, "</pre><script>alert(1)</script>") {
		t.Fatalf("context block: %q", ctxText)
	}
	if s := b.text("#upstream-request"); !strings.Contains(s, "the [CONTEXT] block: 2 chunk(s)") {
		t.Fatalf("request body without the block set apart: %q", s)
	}
	b.safe("turn")
	b.shot("turn")
	b.do("scroll to the context block", chromedp.ScrollIntoView(chromedp.CSS("#upstream-request")))
	b.view("turn-context")
	b.open("/console/turns/t-2?c=c-browser")
	if s := b.text("#instruction"); s != hostilePrompt {
		t.Fatalf("hostile prompt shown as %q", s)
	}
	b.safe("hostile turn")
	b.shot("turn-hostile")

	// Replay t-1 from the llmcaller with another model: a new turn, then the diff.
	b.open("/console/turns/t-1?c=c-browser")
	b.do("replay form", chromedp.SetValue(chromedp.CSS(`form.replay select[name=from]`), "llmcaller"),
		chromedp.SetValue(chromedp.CSS(`form.replay input[name=model]`), "sandbox-other"),
		chromedp.Click(chromedp.CSS(`form.replay button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	b.shot("replay-confirm")
	b.do("confirm replay", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
	loc := run(b, "replay location", chromedp.Location())
	if !strings.Contains(loc, "/console/turns/") || strings.Contains(loc, "/console/turns/t-1") {
		t.Fatalf("after the replay: %s", loc)
	}
	facts := b.waitText("dl.facts", "ok / stop") // the page reloads itself until the turn completes
	if !strings.Contains(facts, "sandbox-other") || !strings.Contains(facts, "t-1") {
		t.Fatalf("replayed turn: %q", facts)
	}
	b.safe("replayed turn")
	b.shot("turn-replayed")
	b.do("diff link", chromedp.Click(chromedp.CSS(`dl.facts a[href^="/console/diff"]`)), chromedp.WaitVisible(chromedp.CSS("#diff")))
	if s := b.text("#diff"); !strings.Contains(s, "sandbox-1") || !strings.Contains(s, "sandbox-other") {
		t.Fatalf("diff: %q", s)
	}
	if b.count("#diff tr.differs") == 0 {
		t.Fatal("the diff marks no difference between the models")
	}
	b.safe("diff")
	b.shot("diff")

	// Dead letters: the retriever's, retried (confirmed) and gone; the turn completes.
	b.open("/console/dead")
	if s := b.text("#dead-letters"); !strings.Contains(s, "t-dead") || !strings.Contains(s, "index unavailable") {
		t.Fatalf("dead letters: %q", s)
	}
	b.safe("dead letters")
	b.shot("dead")
	b.do("retry", chromedp.Click(chromedp.CSS(`#dead-letters form button`)), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	b.shot("dead-confirm")
	b.do("confirm retry", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#no-dead")))
	if s := b.text("p.notice"); !strings.Contains(s, "retried") {
		t.Fatalf("retry notice: %q", s)
	}
	b.shot("dead-retried")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		done, err := client.Await(ctx, e.js, "c-dead", "t-dead")
		if err != nil {
			t.Fatal(err)
		}
		if done.Response.Kind == contracts.KindOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Live: a streamed turn moves through the stages and its text arrives.
	b.open("/console/live")
	b.waitText("#live-status", "following")
	go func() {
		_ = client.Submit(context.Background(), e.js, contracts.AgentExecuteRequest{ConversationId: "c-live", TurnId: "t-live", Instruction: "Stream me " + hostilePrompt, Stream: true})
	}()
	b.do("live row", chromedp.WaitVisible(chromedp.CSS(`tr[data-turn="t-live"] button.watch`)),
		chromedp.Click(chromedp.CSS(`tr[data-turn="t-live"] button.watch`)))
	b.waitText("#stream-status", "completed")
	if s := b.text("#stream-text"); !strings.Contains(s, "Stream me") {
		t.Fatalf("streamed text: %q", s)
	}
	cls := run(b, "live row class", chromedp.Evaluate[string](`document.querySelector('tr[data-turn="t-live"]').className`))
	if !strings.Contains(cls, "done") {
		t.Fatalf("live row not completed: %q", cls)
	}
	b.safe("live")
	b.shot("live")
}
