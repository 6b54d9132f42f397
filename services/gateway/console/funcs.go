package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"time"

	"github.com/aptix-dev/aptix/pkg/pipeline/history"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// funcs format values for the templates. None returns template.HTML: what
// they produce is text, escaped by html/template where it is used.
var funcs = template.FuncMap{
	"ms": func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) },
	"dur": func(d time.Duration) string {
		if d >= time.Minute {
			return d.Round(time.Second).String()
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	},
	"msf": func(v float64) string {
		return fmt.Sprintf("%.1f ms", v)
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("15:04:05.000")
	},
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"age": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := now.Sub(t)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds ago", int(d.Seconds()))
		case d < time.Hour:
			return fmt.Sprintf("%dm ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh ago", int(d.Hours()))
		}
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	},
	"bytes": func(n any) string {
		switch v := n.(type) {
		case int:
			return layout.FormatBytes(int64(v))
		case int64:
			return layout.FormatBytes(v)
		case uint64:
			return layout.FormatBytes(int64(v))
		}
		return fmt.Sprint(n)
	},
	"pct":    func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
	"pretty": pretty,
	"short": func(s string, n int) string {
		if r := []rune(s); len(r) > n {
			return string(r[:n-1]) + "…"
		}
		return s
	},
	"pc": func(v float64) string { return fmt.Sprintf("%.2f", v*100) },
}

// pretty indents a JSON document (a []byte, json.RawMessage or string); what
// is not JSON is returned as it is.
func pretty(v any) string {
	var raw []byte
	switch t := v.(type) {
	case []byte:
		raw = t
	case json.RawMessage:
		raw = t
	case string:
		raw = []byte(t)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // the template escapes; \u003c would only hide what was sent
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Sprint(v)
		}
		return buf.String()
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

func isNotStored(err error) bool { return errors.Is(err, history.ErrNotStored) }
