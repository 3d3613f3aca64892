package dashboard

import (
	"bytes"
	"embed"
	"html/template"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/procfleet/procfleet/reconciler"
)

//go:embed assets
var assets embed.FS

// pages holds the page and fragment templates.
var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"dash": func(n int) string {
		if n == 0 {
			return "–"
		}
		return strconv.Itoa(n)
	},
	"rfc3339": func(t *time.Time) string { return t.UTC().Format(time.RFC3339) },
	"clock": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			return clock(t)
		case *time.Time:
			if t != nil {
				return clock(*t)
			}
		}
		return "–"
	},
	"actions":  actions,
	"title":    func(a Action) string { return strings.ToUpper(string(a[:1])) + string(a[1:]) },
	"argv":     argvText,
	"probe":    probeText,
	"envNames": envNames,
	"nodeW":    func() int { return nodeW },
	"nodeH":    func() int { return nodeH },
	"add":      func(a, b int) int { return a + b },
	"revEvents": func(evs []reconciler.Event) []reconciler.Event {
		out := make([]reconciler.Event, len(evs))
		for i, e := range evs {
			out[len(evs)-1-i] = e
		}
		return out
	},
}).ParseFS(assets, "assets/templates.html"))

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// fragment renders the named template of pages to a string.
func fragment(name string, data any) string {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	defer bufPool.Put(b)
	if err := pages.ExecuteTemplate(b, name, data); err != nil {
		// The templates are fixed and their data typed: an error here is a
		// bug, shown in the page rather than hidden.
		return "<p class=\"warn\">render " + template.HTMLEscapeString(name) + ": " + template.HTMLEscapeString(err.Error()) + "</p>"
	}
	return b.String()
}

// page renders a whole page.
func page(w io.Writer, name string, data any) error {
	return pages.ExecuteTemplate(w, name, data)
}

// frames is one state of a page as fragments: Parts are the inner HTML of
// elements by id; Rows are the rows of the fleet table, in order, by server
// name.
type frames struct {
	Parts map[string]string
	Rows  []row
}

type row struct {
	Name, HTML string
}

// fleetFrames renders the fleet page's fragments.
func fleetFrames(v fleetView) frames {
	f := frames{Parts: map[string]string{
		"f-banner":  fragment("banner", v),
		"f-summary": fragment("summary", v.Counts),
		"f-graph":   fragment("graph", v.Graph),
	}}
	f.Rows = make([]row, len(v.Rows))
	for i, st := range v.Rows {
		f.Rows[i] = row{Name: st.Name, HTML: fragment("row", st)}
	}
	return f
}

// serverFrames renders a server page's fragments.
func serverFrames(v serverView) frames {
	return frames{Parts: map[string]string{
		"s-head":    fragment("s-head", v),
		"s-status":  fragment("s-status", v),
		"s-exit":    fragment("s-exit", v),
		"s-owner":   fragment("s-owner", v),
		"s-spec":    fragment("s-spec", v),
		"s-events":  fragment("s-events", v),
		"s-logpath": template.HTMLEscapeString(v.Detail.LogPath),
	}}
}

// patch is one update sent to a page: only what changed since the last.
type patch struct {
	// Parts replaces the inner HTML of elements by id.
	Parts map[string]string `json:"parts,omitempty"`
	// Rows replaces or adds table rows by server name (outer HTML).
	Rows map[string]string `json:"rows,omitempty"`
	// Order is the table's rows, when the set or the order changed (null
	// when not, [] for none).
	Order []string `json:"order"`
}

func (p patch) empty() bool { return len(p.Parts) == 0 && len(p.Rows) == 0 && p.Order == nil }

// differ remembers what one page was sent, to send only what changed.
type differ struct {
	parts map[string]string
	rows  map[string]string
	order []string
}

// next returns the patch from what was sent to f, and remembers f.
func (d *differ) next(f frames) patch {
	var p patch
	if d.parts == nil {
		d.parts, d.rows = map[string]string{}, map[string]string{}
	}
	for id, html := range f.Parts {
		if old, ok := d.parts[id]; !ok || old != html {
			if p.Parts == nil {
				p.Parts = map[string]string{}
			}
			p.Parts[id] = html
			d.parts[id] = html
		}
	}
	if f.Rows == nil {
		return p
	}
	order := make([]string, len(f.Rows))
	seen := make(map[string]bool, len(f.Rows))
	for i, r := range f.Rows {
		order[i] = r.Name
		seen[r.Name] = true
		if old, ok := d.rows[r.Name]; !ok || old != r.HTML {
			if p.Rows == nil {
				p.Rows = map[string]string{}
			}
			p.Rows[r.Name] = r.HTML
			d.rows[r.Name] = r.HTML
		}
	}
	for n := range d.rows {
		if !seen[n] {
			delete(d.rows, n)
		}
	}
	if !equalStrings(order, d.order) {
		p.Order = order
		d.order = order
	}
	return p
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
