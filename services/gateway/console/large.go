package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/history"
)

// maxShown bounds a document shown inline on a page. A turn's upstream
// answer may be as large as its profile's maxResponseBytes (16 MiB by
// default) and sits in several of its events: shown whole, indented and
// HTML-escaped, one turn page of a 200 MB answer took the console to
// 2.6 GB. Past maxShown a page shows the start and links to the whole
// document, which is streamed as a download.
const maxShown = 256 << 10

// shown is pretty for a page: a document past maxShown is its first
// maxShown bytes as stored (indenting a cut document is not possible),
// with clipped set so the page says so and links to the rest.
func shown(raw []byte) (text string, clipped bool) {
	if len(raw) <= maxShown {
		return pretty(raw), false
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]), true
}

// shownText is a reply's text for a page: past maxShown, its start and a
// note where the rest is.
func shownText(s string) string {
	if len(s) <= maxShown {
		return s
	}
	t, _ := shown([]byte(s))
	return t + fmt.Sprintf("\n… (%d bytes more: the whole answer is in the turn's events)", len(s)-len(t))
}

// shownValue is shown for a value, encoded as pretty encodes it.
func shownValue(v any) (string, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v), false
	}
	return shown(bytes.TrimRight(buf.Bytes(), "\n"))
}

// eventStart is an event's payload for its view: a claimed event's first
// maxShown+1 bytes only (enough for shown to clip it), read from the claim
// store without fetching the rest, and its whole size.
func (c *Console) eventStart(ctx context.Context, h nats.Header, data []byte) ([]byte, int, error) {
	key := h.Get(contracts.HeaderClaim)
	if key == "" {
		return data, len(data), nil
	}
	obs, err := c.js.ObjectStore(ctx, contracts.ClaimBucket)
	if err != nil {
		return nil, 0, fmt.Errorf("claimed event %s: %w", key, err)
	}
	o, err := obs.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("claimed event %s: %w", key, err)
	}
	defer o.Close()
	info, err := o.Info()
	if err != nil {
		return nil, 0, fmt.Errorf("claimed event %s: %w", key, err)
	}
	start, err := io.ReadAll(io.LimitReader(o, maxShown+1))
	if err != nil {
		return nil, 0, fmt.Errorf("claimed event %s: %w", key, err)
	}
	return start, int(info.Size), nil
}

// eventRaw downloads one stored event whole (GET
// /console/events/{seq}/raw): a claimed event is streamed from the claim
// store, never held in memory.
func (c *Console) eventRaw(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		c.message(w, r, http.StatusBadRequest, "Bad request", "An event is named by its stream sequence number.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	s, err := c.js.Stream(ctx, contracts.StreamName)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		c.message(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("No event #%d is stored.", seq))
		return
	}
	download(w, fmt.Sprintf("aptix-event-%d.json", seq))
	key := m.Header.Get(contracts.HeaderClaim)
	if key == "" {
		_, _ = w.Write(m.Data)
		return
	}
	obs, err := c.js.ObjectStore(ctx, contracts.ClaimBucket)
	if err == nil {
		var o jetstream.ObjectResult
		if o, err = obs.Get(ctx, key); err == nil {
			defer o.Close()
			_, err = io.Copy(w, o)
		}
	}
	if err != nil {
		c.log.Warn("console: claimed event not downloaded", "seq", seq, "claim", key, "err", err)
	}
}

// upstreamRaw downloads a turn's upstream answer whole (GET
// /console/turns/{id}/upstream?c=conv): the verbatim body of its responded
// event.
func (c *Console) upstreamRaw(w http.ResponseWriter, r *http.Request) {
	id, conv := r.PathValue("id"), r.URL.Query().Get("c")
	if !validID(id) || !validID(conv) {
		c.message(w, r, http.StatusBadRequest, "Bad request", "Turn and conversation ids are 1-128 characters of [A-Za-z0-9_-].")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	_, data, err := history.TurnEvent(ctx, c.js, contracts.StageResponded, conv, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var t struct{ LLM *contracts.LLMResult }
	if err := json.Unmarshal(data, &t); err != nil || t.LLM == nil {
		c.message(w, r, http.StatusNotFound, "Not found", "The turn's responded event holds no upstream answer.")
		return
	}
	body := t.LLM.Body
	if t.LLM.UpstreamBody != "" {
		body = t.LLM.UpstreamBody
	}
	download(w, "aptix-upstream-"+id+".json")
	_, _ = io.WriteString(w, body)
}

func download(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
}
