package dashboard

import (
	"html"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/procfleet/procfleet/reconciler"
)

// The fleet page's rows and graph are written here rather than by
// html/template: an update of a page at 100 servers renders them all, and
// the template engine (reflection on every field) took 7 ms for that,
// against about 0.3 ms here (BenchmarkFleetUpdate). Every value is escaped
// with html.EscapeString, and every attribute is double-quoted. The
// templates include these same functions, so the page and its updates
// cannot differ.

// writer builds a fragment.
type writer struct{ strings.Builder }

// raw writes markup.
func (w *writer) raw(s string) { w.WriteString(s) }

// text writes s escaped, for text and double-quoted attribute values.
func (w *writer) text(s string) { w.WriteString(html.EscapeString(s)) }

func (w *writer) int(n int) { w.WriteString(strconv.Itoa(n)) }

// attr writes ` name="value"`, the value escaped.
func (w *writer) attr(name, value string) {
	w.raw(" " + name + `="`)
	w.text(value)
	w.raw(`"`)
}

// attrInt writes ` name="n"`.
func (w *writer) attrInt(name string, n int) {
	w.raw(" " + name + `="`)
	w.int(n)
	w.raw(`"`)
}

// element writes <tag attrs>text</tag>, the text escaped.
func (w *writer) element(tag, attrs, text string) {
	w.raw("<" + tag + attrs + ">")
	w.text(text)
	w.raw("</" + tag + ">")
}

// dashInt writes n, or an en dash for 0 (no pid, no port).
func (w *writer) dashInt(n int) {
	if n == 0 {
		w.raw("–")
		return
	}
	w.int(n)
}

// serverHref is the path of a server's page.
func serverHref(name string) string { return "/servers/" + url.PathEscape(name) }

// rowHTML is a server's row in the fleet table.
func rowHTML(st reconciler.ServerStatus) string {
	var w writer
	w.Grow(1400)
	phase := st.Phase.String()
	w.raw("<tr")
	w.attr("id", "row-"+st.Name)
	w.attr("data-name", st.Name)
	w.attr("data-phase", phase)
	w.attr("data-ready", strconv.FormatBool(st.Ready))
	w.attrInt("data-pid", st.PID)
	w.attrInt("data-restarts", st.Restarts)
	w.raw(`><td data-label="Name" class="name"><a`)
	w.attr("href", serverHref(st.Name))
	w.raw(">")
	w.text(st.Name)
	w.raw(`</a></td><td data-label="Phase"><span class="phase"`)
	w.attr("data-phase", phase)
	w.raw(">")
	w.text(phase)
	w.raw(`</span></td><td data-label="Ready">`)
	if st.Ready {
		w.raw(`<span class="yes">yes</span>`)
	} else {
		w.raw(`<span class="no">no</span>`)
	}
	w.raw(`</td><td data-label="PID" class="num pid">`)
	w.dashInt(st.PID)
	w.raw(`</td><td data-label="Port" class="num">`)
	w.dashInt(st.Port)
	w.raw(`</td><td data-label="Restarts" class="num restarts">`)
	w.int(st.Restarts)
	w.raw(`</td><td data-label="Age">`)
	w.age(st.StartedAt)
	w.raw(`</td><td data-label="Reason" class="reason">`)
	if st.Reason != "" {
		w.raw("<span")
		w.attr("title", st.Message)
		w.raw(">")
		w.text(st.Reason)
		w.raw("</span>")
	} else {
		w.raw(`<span class="muted">–</span>`)
	}
	if st.LastExit != nil && !st.Ready {
		w.element("div", ` class="sub"`, st.LastExit.Reason)
	}
	w.raw(`</td><td class="acts">`)
	w.actions(st)
	w.raw("</td></tr>")
	return w.String()
}

// age writes a time the page's script shows as an age ("3m"), which it
// keeps current without asking the server: the fragment stays the same
// while the time passes.
func (w *writer) age(t *time.Time) {
	if t == nil {
		w.raw(`<span class="muted">–</span>`)
		return
	}
	at := t.UTC().Format(time.RFC3339)
	w.raw("<time")
	w.attr("data-since", at)
	w.attr("title", at)
	w.raw("></time>")
}

// actions writes a server's buttons: each a form that posts to
// /servers/NAME/ACTION (the script sends it with fetch; without the script
// it still works). Stop asks first.
func (w *writer) actions(st reconciler.ServerStatus) {
	for _, a := range actions(st) {
		title := strings.ToUpper(string(a[:1])) + string(a[1:])
		w.raw(`<form method="post"`)
		w.attr("action", serverHref(st.Name)+"/"+string(a))
		w.raw(` class="act"`)
		if a == ActionStop {
			w.attr("data-confirm", "Stop "+st.Name+"? It stays stopped until you start it.")
		}
		w.raw(`><button type="submit"`)
		w.attr("data-action", string(a))
		w.attr("title", title+" "+st.Name)
		w.raw(">")
		w.text(title)
		w.raw("</button></form>")
	}
}

// actionsHTML is actions for the templates.
func actionsHTML(st reconciler.ServerStatus) template.HTML {
	var w writer
	w.actions(st)
	return template.HTML(w.String()) // every value in it is escaped by w.attr and w.text
}

// graphSVG draws a laid-out dependency graph: a box per server, filled
// and outlined by its phase (style.css, by data-phase), linking to its
// page; an arrow per dependsOn. The boxes are nodeSVG's, which an update
// replaces one by one.
func graphSVG(g graph) string {
	if len(g.Nodes) == 0 {
		return `<p class="empty">No servers.</p>`
	}
	var w writer
	w.Grow(600 + 700*len(g.Nodes) + 200*len(g.Edges))
	w.raw(`<svg class="deps"`)
	w.attr("viewBox", "0 0 "+itoa(g.Width)+" "+itoa(g.Height))
	w.attrInt("width", g.Width)
	w.attrInt("height", g.Height)
	w.raw(` role="img" aria-label="Dependency graph">`)
	w.raw(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" class="arrowhead"/></marker></defs>`)
	for _, e := range g.Edges {
		w.raw(`<path class="edge"`)
		w.attr("data-from", e.From)
		w.attr("data-to", e.To)
		w.attr("d", e.Path)
		w.raw(` marker-end="url(#arrow)"/>`)
	}
	for _, n := range g.Nodes {
		w.raw(nodeSVG(n))
	}
	w.raw("</svg>")
	return w.String()
}

// nodeSVG is a server's box in the graph (id node-NAME).
func nodeSVG(n graphNode) string {
	var w writer
	w.Grow(700)
	w.raw("<a")
	w.attr("href", serverHref(n.Name))
	w.raw(` class="node"`)
	w.attr("id", "node-"+n.Name)
	w.attr("data-name", n.Name)
	w.attr("data-phase", n.Phase)
	w.attr("data-ready", strconv.FormatBool(n.Ready))
	title := n.Name + ": " + n.Phase
	if n.Ready {
		title += ", ready"
	}
	w.raw(">")
	w.element("title", "", title)
	w.raw("<rect")
	w.attrInt("x", n.X)
	w.attrInt("y", n.Y)
	w.attrInt("width", nodeW)
	w.attrInt("height", nodeH)
	w.raw(` rx="10"/><circle`)
	w.attrInt("cx", n.X+16)
	w.attrInt("cy", n.Y+nodeH/2)
	w.raw(` r="5" class="dot"/>`)
	w.element("text", ` x="`+itoa(n.X+30)+`" y="`+itoa(n.Y+20)+`" class="label"`, n.Label)
	w.element("text", ` x="`+itoa(n.X+30)+`" y="`+itoa(n.Y+36)+`" class="phase-label"`, n.Phase)
	w.raw("</a>")
	return w.String()
}
