package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Peer names, in table order. The floor is the bench doing the work itself;
// the baseline is another procfleet binary (-baseline), for an A/B.
const (
	peerProcfleet   = "procfleet"
	peerBaseline    = "baseline"
	peerSupervisord = "supervisord"
	peerPM2         = "pm2"
	peerFloor       = "floor"
)

var tableColumns = []string{peerProcfleet, peerBaseline, peerSupervisord, peerPM2, peerFloor}

var columnTitle = map[string]string{
	peerProcfleet:   "procfleet",
	peerBaseline:    "baseline",
	peerSupervisord: "supervisord",
	peerPM2:         "PM2",
	peerFloor:       "floor",
}

// isProcfleet reports whether peer is a procfleet binary (the one measured,
// or the baseline).
func isProcfleet(peer string) bool { return peer == peerProcfleet || peer == peerBaseline }

// TargetKind says how a row's target is judged.
type TargetKind string

const (
	// TargetMax: the value must not exceed Value.
	TargetMax TargetKind = "max"
	// TargetFloorFactor: the value must not exceed Value times the floor.
	TargetFloorFactor TargetKind = "floorFactor"
	// TargetFloorPlus: the value must not exceed the floor plus Value.
	TargetFloorPlus TargetKind = "floorPlus"
)

// Target is a DESIGN.md target for one row (lower is better for every row).
type Target struct {
	Kind  TargetKind `json:"kind"`
	Value float64    `json:"value"`
	Text  string     `json:"text"`
}

// Row is one line of the table: one measured figure for every peer.
type Row struct {
	Key      string             `json:"key"`
	Scenario string             `json:"scenario"`
	Unit     string             `json:"unit"`
	Values   map[string]float64 `json:"values"`
	// Limits holds, for a peer that did not finish within the scenario's
	// limit, that limit (in Unit): its figure is above it.
	Limits map[string]float64 `json:"limits,omitempty"`
	// Unsupported holds, for a peer whose binary lacks what the scenario
	// drives, what it lacks.
	Unsupported map[string]string `json:"unsupported,omitempty"`
	Errors      map[string]string `json:"errors,omitempty"`
	Target      *Target           `json:"target,omitempty"`
	Verdict     string            `json:"verdict,omitempty"`
	// Ratios is procfleet's figure over each other column's; RatioBounds
	// marks with "<" or ">" a ratio that a limit makes a bound.
	Ratios      map[string]float64 `json:"ratios,omitempty"`
	RatioBounds map[string]string  `json:"ratioBounds,omitempty"`
	// Rounds holds each round's figure (-rounds); Values is their median,
	// Spread their least and greatest when there was more than one.
	Rounds  map[string][]float64  `json:"rounds,omitempty"`
	Spread  map[string][2]float64 `json:"spread,omitempty"`
	Samples map[string][]float64  `json:"samples,omitempty"`
	// Apart marks a peer whose spread and procfleet's do not overlap: the
	// difference is beyond the run-to-run spread.
	Apart map[string]bool `json:"apart,omitempty"`
}

// Machine describes where the run happened. Load is /proc/loadavg's three
// averages when the run started and when it ended: a busy machine's
// figures are not comparable with a quiet one's.
type Machine struct {
	NProc     int    `json:"nproc"`
	MemTotal  string `json:"memTotal"`
	Kernel    string `json:"kernel"`
	CPU       string `json:"cpu"`
	LoadStart string `json:"loadStart"`
	LoadEnd   string `json:"loadEnd"`
}

// Versions of everything measured.
type Versions struct {
	Go          string `json:"go"`
	Procfleet   string `json:"procfleet"`
	Baseline    string `json:"baseline,omitempty"`
	Supervisord string `json:"supervisord"`
	PM2         string `json:"pm2"`
	Node        string `json:"node"`
}

// Report is the whole run, as written to -json.
type Report struct {
	Date     time.Time `json:"date"`
	Command  string    `json:"command"`
	Duration string    `json:"duration"`
	Machine  Machine   `json:"machine"`
	Versions Versions  `json:"versions"`
	Config   Config    `json:"config"`
	Rows     []*Row    `json:"rows"`
	Notes    []string  `json:"notes,omitempty"`
}

// Config is the run's settings.
type Config struct {
	Peers     []string `json:"peers"`
	Scenarios []string `json:"scenarios"`
	Sizes     []int    `json:"sizes"`
	Kills     int      `json:"kills"`
	Idle      string   `json:"idle"`
	Window    string   `json:"window"`
	Scale     [2]int   `json:"scale"`
	LogsRate  int      `json:"logsRate"`
	PortBase  int      `json:"portBase"`
	Baseline  string   `json:"baseline,omitempty"`
	Rounds    int      `json:"rounds"`
}

// Results collects rows in a fixed order as scenarios report figures.
type Results struct {
	rows  []*Row
	byKey map[string]*Row
	notes []string
}

// NewResults returns an empty result set.
func NewResults() *Results { return &Results{byKey: map[string]*Row{}} }

// RowSpec names a row: its key, title, unit and target.
type RowSpec struct {
	Key    string
	Title  string
	Unit   string
	Target *Target
}

// Declare adds a row (empty until set), fixing the table's order.
func (r *Results) Declare(spec RowSpec) *Row {
	if row, ok := r.byKey[spec.Key]; ok {
		return row
	}
	row := &Row{Key: spec.Key, Scenario: spec.Title, Unit: spec.Unit, Values: map[string]float64{}, Target: spec.Target}
	r.rows = append(r.rows, row)
	r.byKey[spec.Key] = row
	return row
}

// Set records peer's value for a row, one round's: the row shows the
// median of the rounds.
func (r *Results) Set(spec RowSpec, peer string, v float64) {
	row := r.Declare(spec)
	if row.Rounds == nil {
		row.Rounds = map[string][]float64{}
	}
	row.Rounds[peer] = append(row.Rounds[peer], v)
	row.Values[peer] = Percentile(row.Rounds[peer], 50)
}

// SetSamples keeps the raw samples behind a row (JSON only), every
// round's.
func (r *Results) SetSamples(spec RowSpec, peer string, samples []float64) {
	row := r.Declare(spec)
	if row.Samples == nil {
		row.Samples = map[string][]float64{}
	}
	row.Samples[peer] = append(row.Samples[peer], samples...)
}

// Fail records that peer could not produce a row's figure, and why.
func (r *Results) Fail(spec RowSpec, peer string, err error) {
	row := r.Declare(spec)
	if row.settled(peer) {
		return // measured (or judged) before the failure
	}
	if row.Errors == nil {
		row.Errors = map[string]string{}
	}
	if row.Errors[peer] == "" {
		row.Errors[peer] = err.Error()
	}
}

// Limit records that peer did not finish a row's scenario within limit
// (in the row's unit). In any round, it outweighs the figures of the
// others: the row then shows the limit.
func (r *Results) Limit(spec RowSpec, peer string, limit float64) {
	row := r.Declare(spec)
	if _, ok := row.Unsupported[peer]; ok {
		return
	}
	if row.Limits == nil {
		row.Limits = map[string]float64{}
	}
	row.Limits[peer] = limit
}

// Unsupported records that peer's binary lacks what a row's scenario
// drives: what is missing, not a failure.
func (r *Results) Unsupported(spec RowSpec, peer, what string) {
	row := r.Declare(spec)
	if row.settled(peer) {
		return
	}
	if row.Unsupported == nil {
		row.Unsupported = map[string]string{}
	}
	row.Unsupported[peer] = what
}

// settled reports whether peer already has a figure, a limit or an
// unsupported mark in the row: the first outcome recorded stands.
func (row *Row) settled(peer string) bool {
	_, v := row.Values[peer]
	_, l := row.Limits[peer]
	_, u := row.Unsupported[peer]
	return v || l || u
}

// Note adds a line under the table, once however often it is said (a
// note of every round).
func (r *Results) Note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(r.notes, n) {
		r.notes = append(r.notes, n)
	}
}

// Finish computes spreads, ratios and verdicts and returns the rows and
// notes.
func (r *Results) Finish() ([]*Row, []string) {
	for _, row := range r.rows {
		for peer := range row.Limits {
			delete(row.Values, peer)
		}
		for peer, vs := range row.Rounds {
			if _, ok := row.Values[peer]; ok && len(vs) > 1 {
				if row.Spread == nil {
					row.Spread = map[string][2]float64{}
				}
				row.Spread[peer] = [2]float64{slices.Min(vs), slices.Max(vs)}
			}
		}
		judge(row)
	}
	return r.rows, r.notes
}

// ratioPeers are the columns procfleet's figure is divided by.
var ratioPeers = []string{peerFloor, peerBaseline, peerSupervisord, peerPM2}

// judge fills a row's procfleet/peer ratios and its verdict against target.
// A figure that hit its limit makes the ratio a bound.
func judge(row *Row) {
	pf, pfOK := row.Values[peerProcfleet]
	pfLimit, pfLimited := row.Limits[peerProcfleet]
	if _, ok := row.Unsupported[peerProcfleet]; ok {
		row.Verdict = "not supported by this binary"
		return
	}
	if !pfOK && !pfLimited {
		return
	}
	if row.Unit != "count" {
		for _, peer := range ratioPeers {
			v, vOK := row.Values[peer]
			lim, limited := row.Limits[peer]
			switch {
			case pfOK && vOK && v > 0:
				row.setRatio(peer, pf/v, "")
				a, okA := row.Spread[peerProcfleet]
				b, okB := row.Spread[peer]
				if okA && okB && (a[1] < b[0] || b[1] < a[0]) {
					if row.Apart == nil {
						row.Apart = map[string]bool{}
					}
					row.Apart[peer] = true
				}
			case pfOK && limited && lim > 0:
				row.setRatio(peer, pf/lim, "<")
			case pfLimited && vOK && v > 0:
				row.setRatio(peer, pfLimit/v, ">")
			}
		}
	}
	if row.Target == nil {
		return
	}
	if pfLimited {
		row.Verdict = fmt.Sprintf("missed: did not finish within %s", formatValue(pfLimit, row.Unit))
		return
	}
	limit := row.Target.Value
	floor, haveFloor := row.Values[peerFloor]
	switch row.Target.Kind {
	case TargetFloorFactor, TargetFloorPlus:
		if !haveFloor || floor <= 0 {
			row.Verdict = "no floor measured"
			return
		}
		if row.Target.Kind == TargetFloorFactor {
			limit = row.Target.Value * floor
		} else {
			limit = floor + row.Target.Value
		}
	}
	if pf <= limit {
		row.Verdict = "met"
		return
	}
	over := pf - limit
	if row.Unit == "count" || limit <= 0 {
		row.Verdict = fmt.Sprintf("missed by %s", formatValue(over, row.Unit))
		return
	}
	row.Verdict = fmt.Sprintf("missed by %s (+%.0f%%)", formatValue(over, row.Unit), over/limit*100)
}

func (row *Row) setRatio(peer string, v float64, bound string) {
	if row.Ratios == nil {
		row.Ratios = map[string]float64{}
	}
	row.Ratios[peer] = v
	if bound != "" {
		if row.RatioBounds == nil {
			row.RatioBounds = map[string]string{}
		}
		row.RatioBounds[peer] = bound
	}
}

func formatValue(v float64, unit string) string {
	return formatNumber(v, unit) + unitSuffix(unit)
}

// formatNumber is formatValue without the unit.
func formatNumber(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case "ms":
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.1f", v)
	case "s":
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	case "MiB":
		return fmt.Sprintf("%.1f", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	case "%", "x", "ms/s":
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%g", v)
}

func unitSuffix(unit string) string {
	switch unit {
	case "count", "n/a":
		return ""
	case "x":
		return "x"
	}
	return " " + unit
}

// formatCell is a figure with, over several rounds, their range.
func formatCell(v float64, spread [2]float64, haveSpread bool, unit string) string {
	if !haveSpread {
		return formatValue(v, unit)
	}
	return fmt.Sprintf("%s (%s–%s)", formatValue(v, unit), formatNumber(spread[0], unit), formatNumber(spread[1], unit))
}

// columns returns the table's columns: the baseline only when some row has
// something of it.
func columns(rows []*Row) []string {
	var out []string
	for _, c := range tableColumns {
		if c == peerBaseline && !slices.ContainsFunc(rows, func(r *Row) bool { return r.has(c) }) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// has reports whether the row holds any outcome of peer.
func (row *Row) has(peer string) bool {
	_, e := row.Errors[peer]
	return row.settled(peer) || e
}

// RenderTable writes rows as a markdown table, then the footnotes (errors,
// what a binary does not support) and notes.
func RenderTable(w io.Writer, rows []*Row, notes []string) error {
	cols := columns(rows)
	var ratioCols []string
	for _, c := range ratioPeers {
		if slices.Contains(cols, c) {
			ratioCols = append(ratioCols, c)
		}
	}
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range cols {
		b.WriteString(" " + columnTitle[c] + " |")
	}
	b.WriteString(" target | procfleet vs target |")
	for _, c := range ratioCols {
		b.WriteString(" procfleet/" + columnTitle[c] + " |")
	}
	b.WriteString("\n|---|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---|---|")
	for range ratioCols {
		b.WriteString("---:|")
	}
	b.WriteString("\n")

	var foot []string
	footIndex := map[string]int{}
	footnote := func(msg string) int {
		i, ok := footIndex[msg]
		if !ok {
			foot = append(foot, msg)
			i = len(foot)
			footIndex[msg] = i
		}
		return i
	}
	limited, apart := false, false
	for _, row := range rows {
		b.WriteString("| " + row.Scenario + " |")
		for _, c := range cols {
			if v, ok := row.Values[c]; ok {
				sp, many := row.Spread[c]
				b.WriteString(" " + formatCell(v, sp, many && sp[0] != sp[1], row.Unit) + " |")
			} else if lim, ok := row.Limits[c]; ok {
				limited = true
				b.WriteString(" > " + formatValue(lim, row.Unit) + " |")
			} else if what, ok := row.Unsupported[c]; ok {
				fmt.Fprintf(&b, " not supported [%d] |", footnote(columnTitle[c]+": not supported by this binary: "+clip(oneLine(what))))
			} else if msg, ok := row.Errors[c]; ok {
				fmt.Fprintf(&b, " failed [%d] |", footnote(columnTitle[c]+": "+clip(oneLine(msg))))
			} else {
				b.WriteString(" — |")
			}
		}
		target := ""
		if row.Target != nil {
			target = row.Target.Text
		}
		b.WriteString(" " + target + " | " + row.Verdict + " |")
		for _, peer := range ratioCols {
			if r, ok := row.Ratios[peer]; ok {
				mark := ""
				if row.Apart[peer] {
					mark, apart = " †", true
				}
				fmt.Fprintf(&b, " %s%.2fx%s |", row.RatioBounds[peer], r, mark)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	if len(foot) > 0 {
		b.WriteString("\n")
		for i, e := range foot {
			fmt.Fprintf(&b, "[%d] %s\n", i+1, e)
		}
	}
	if limited || apart || len(notes) > 0 {
		b.WriteString("\n")
	}
	if limited {
		b.WriteString("- \"> X\": did not finish within the scenario's limit X (in at least one round); the figure is above it, and a ratio to it is a bound.\n")
	}
	if apart {
		b.WriteString("- \"(a–b)\": the least and greatest figure over the rounds, the cell's figure their median; \"†\": procfleet's range and that column's do not overlap, a difference beyond the run-to-run spread.\n")
	}
	for _, n := range notes {
		b.WriteString("- " + clip(n) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[a-zA-Z]`)

// oneLine makes an error fit a table note: no terminal colours, no line
// breaks.
func oneLine(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	return strings.Join(strings.Fields(s), " ")
}

// clip bounds a note's length in the table (the JSON keeps it whole).
func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// Value returns peer's figure in a row, if it has one.
func (r *Results) Value(spec RowSpec, peer string) (float64, bool) {
	row, ok := r.byKey[spec.Key]
	if !ok {
		return 0, false
	}
	v, ok := row.Values[peer]
	return v, ok
}
