package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

type deadData struct {
	Stage  string
	Stages []struct {
		Name  string
		Count uint64
	}
	Total   uint64
	Letters []history.DeadLetter
	Now     time.Time
	Notice  string
}

// deadList lists the dead letters, of one stage with ?stage=.
func (c *Console) deadList(w http.ResponseWriter, r *http.Request) {
	stage := r.URL.Query().Get("stage")
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	letters, err := history.DeadLetters(ctx, c.js, stage)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	counts, err := history.DeadCounts(ctx, c.js)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := deadData{Stage: stage, Letters: letters, Now: c.cfg.Now(), Notice: r.URL.Query().Get("notice")}
	// The stages, then the gateway's webhooks: every source a dead letter
	// is filed under has its tab and its share of the total.
	names := make([]string, 0, len(layout.Stages)+1)
	for _, st := range layout.Stages {
		names = append(names, st.Name)
	}
	for _, name := range append(names, history.DeadWebhook) {
		d.Stages = append(d.Stages, struct {
			Name  string
			Count uint64
		}{name, counts[name]})
		d.Total += counts[name]
	}
	c.render(w, r, "dead", "Dead letters", d)
}

func (c *Console) deadSeq(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		c.message(w, r, http.StatusBadRequest, "Bad request", "A dead letter is numbered by its stream sequence, a positive number.")
		return 0, false
	}
	return seq, true
}

// deadShow prints one dead letter in full.
func (c *Console) deadShow(w http.ResponseWriter, r *http.Request) {
	seq, ok := c.deadSeq(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	d, err := history.GetDeadLetter(ctx, c.js, seq)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	js, clipped := shown(d.Data)
	c.render(w, r, "deadletter", fmt.Sprintf("Dead letter %d", seq), map[string]any{
		"D": d, "Headers": headerLines(d.Header), "JSON": js, "Clipped": clipped, "Full": len(d.Data), "Seq": seq,
		"Now": c.cfg.Now(), "Conversation": d.Conversation()})
}

// deadRetry re-drives one dead letter (what `aptix dead retry N` does),
// after a confirmation step.
func (c *Console) deadRetry(w http.ResponseWriter, r *http.Request) {
	seq, ok := c.deadSeq(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	d, err := history.GetDeadLetter(ctx, c.js, seq)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, fmt.Sprintf("Retry dead letter %d (%s, from the %s)? Its original event is published again and the dead letter deleted.", seq, d.Original, d.FromStage),
			"Retry", r.URL.Path, "/console/dead", nil)
		return
	}
	retried, err := history.Retry(ctx, c.js, d)
	if !retried {
		c.fail(w, r, err)
		return
	}
	note := fmt.Sprintf("Dead letter %d retried: turn %s runs again from the %s.", seq, d.Turn, d.FromStage)
	if err != nil {
		note += " " + err.Error()
	}
	c.log.Info("console: dead letter retried", "principal", from(r).principal.ID, "seq", seq, "subject", d.Original)
	http.Redirect(w, r, "/console/dead?notice="+url.QueryEscape(note), http.StatusSeeOther)
}

// deadRetryAll re-drives every dead letter (of ?stage=), after confirmation.
func (c *Console) deadRetryAll(w http.ResponseWriter, r *http.Request) {
	stage := r.PostFormValue("stage")
	ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
	defer cancel()
	letters, err := history.DeadLetters(ctx, c.js, stage)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, fmt.Sprintf("Retry all %d dead letter(s)%s?", len(letters), ofStage(stage)), "Retry all", r.URL.Path, "/console/dead", map[string]string{"stage": stage})
		return
	}
	var done, failed int
	for _, d := range letters {
		if ok, _ := history.Retry(ctx, c.js, d); ok {
			done++
		} else {
			failed++
		}
	}
	c.log.Info("console: dead letters retried", "principal", from(r).principal.ID, "stage", stage, "retried", done, "failed", failed)
	note := fmt.Sprintf("%d dead letter(s) retried", done)
	if failed > 0 {
		note += fmt.Sprintf(", %d NOT retried (still listed)", failed)
	}
	http.Redirect(w, r, "/console/dead?notice="+url.QueryEscape(note+"."), http.StatusSeeOther)
}

// deadPurge deletes the dead letters (of ?stage=), after confirmation.
func (c *Console) deadPurge(w http.ResponseWriter, r *http.Request) {
	stage := r.PostFormValue("stage")
	if _, err := history.DeadFilter(stage); err != nil {
		c.fail(w, r, err)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.confirm(w, r, fmt.Sprintf("Delete every dead letter%s? They cannot be retried afterwards.", ofStage(stage)), "Purge", r.URL.Path, "/console/dead", map[string]string{"stage": stage})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	n, err := history.PurgeDead(ctx, c.js, stage)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.log.Info("console: dead letters purged", "principal", from(r).principal.ID, "stage", stage, "purged", n)
	http.Redirect(w, r, "/console/dead?notice="+url.QueryEscape(fmt.Sprintf("Purged %d dead letter(s).", n)), http.StatusSeeOther)
}

func ofStage(stage string) string {
	if stage == "" {
		return ""
	}
	return " of the " + stage
}
