package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"time"
)

// Peer names, in table order. The floor is the bench doing the work itself.
const (
	peerProcfleet   = "procfleet"
	peerSupervisord = "supervisord"
	peerPM2         = "pm2"
	peerFloor       = "floor"
)

var tableColumns = []string{peerProcfleet, peerSupervisord, peerPM2, peerFloor}

var columnTitle = map[string]string{
	peerProcfleet:   "procfleet",
	peerSupervisord: "supervisord",
	peerPM2:         "PM2",
	peerFloor:       "floor",
}

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
	Ratios      map[string]float64   `json:"ratios,omitempty"`
	RatioBounds map[string]string    `json:"ratioBounds,omitempty"`
	Samples     map[string][]float64 `json:"samples,omitempty"`
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

// Set records peer's value for a row.
func (r *Results) Set(spec RowSpec, peer string, v float64) {
	r.Declare(spec).Values[peer] = v
}

// SetSamples keeps the raw samples behind a row (JSON only).
func (r *Results) SetSamples(spec RowSpec, peer string, samples []float64) {
	row := r.Declare(spec)
	if row.Samples == nil {
		row.Samples = map[string][]float64{}
	}
	row.Samples[peer] = samples
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
// (in the row's unit).
func (r *Results) Limit(spec RowSpec, peer string, limit float64) {
	row := r.Declare(spec)
	if row.settled(peer) {
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

// Note adds a line under the table.
func (r *Results) Note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// Finish computes ratios and verdicts and returns the rows and notes.
func (r *Results) Finish() ([]*Row, []string) {
	for _, row := range r.rows {
		judge(row)
	}
	return r.rows, r.notes
}

// ratioPeers are the columns procfleet's figure is divided by.
var ratioPeers = []string{peerFloor, peerSupervisord, peerPM2}

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
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case "ms":
		if v >= 100 {
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.1f ms", v)
	case "s":
		if v >= 100 {
			return fmt.Sprintf("%.0f s", v)
		}
		return fmt.Sprintf("%.2f s", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	case "%":
		return fmt.Sprintf("%.2f %%", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	case "ms/s":
		return fmt.Sprintf("%.2f ms/s", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// RenderTable writes rows as a markdown table, then the footnotes (errors,
// what a binary does not support) and notes.
func RenderTable(w io.Writer, rows []*Row, notes []string) error {
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range tableColumns {
		b.WriteString(" " + columnTitle[c] + " |")
	}
	b.WriteString(" target | procfleet vs target |")
	for _, c := range ratioPeers {
		b.WriteString(" procfleet/" + columnTitle[c] + " |")
	}
	b.WriteString("\n|---|")
	for range tableColumns {
		b.WriteString("---:|")
	}
	b.WriteString("---|---|")
	for range ratioPeers {
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
	limited := false
	for _, row := range rows {
		b.WriteString("| " + row.Scenario + " |")
		for _, c := range tableColumns {
			if v, ok := row.Values[c]; ok {
				b.WriteString(" " + formatValue(v, row.Unit) + " |")
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
		for _, peer := range ratioPeers {
			if r, ok := row.Ratios[peer]; ok {
				fmt.Fprintf(&b, " %s%.2fx |", row.RatioBounds[peer], r)
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
	if limited || len(notes) > 0 {
		b.WriteString("\n")
	}
	if limited {
		b.WriteString("- \"> X\": did not finish within the scenario's limit X; the figure is above it, and a ratio to it is a bound.\n")
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
