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
	Key      string               `json:"key"`
	Scenario string               `json:"scenario"`
	Unit     string               `json:"unit"`
	Values   map[string]float64   `json:"values"`
	Errors   map[string]string    `json:"errors,omitempty"`
	Target   *Target              `json:"target,omitempty"`
	Verdict  string               `json:"verdict,omitempty"`
	Ratios   map[string]float64   `json:"ratios,omitempty"`
	Samples  map[string][]float64 `json:"samples,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	NProc    int    `json:"nproc"`
	MemTotal string `json:"memTotal"`
	Kernel   string `json:"kernel"`
	CPU      string `json:"cpu"`
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
	N         int      `json:"n"`
	Kills     int      `json:"kills"`
	CrashSame bool     `json:"crashSame"`
	Idle      string   `json:"idle"`
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
	if _, ok := row.Values[peer]; ok {
		return // measured before the failure
	}
	if row.Errors == nil {
		row.Errors = map[string]string{}
	}
	if row.Errors[peer] == "" {
		row.Errors[peer] = err.Error()
	}
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

// judge fills a row's procfleet/peer ratios and its verdict against target.
func judge(row *Row) {
	pf, ok := row.Values[peerProcfleet]
	if !ok {
		return
	}
	row.Ratios = map[string]float64{}
	for _, peer := range []string{peerSupervisord, peerPM2, peerFloor} {
		if v, ok := row.Values[peer]; ok && v > 0 && row.Unit != "count" {
			row.Ratios[peer] = pf / v
		}
	}
	if row.Target == nil {
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
		if row.Target.Kind == TargetFloorFactor {
			row.Verdict = fmt.Sprintf("met (%.2fx floor)", pf/floor)
		}
		return
	}
	over := pf - limit
	if row.Unit == "count" {
		row.Verdict = fmt.Sprintf("missed by %s", formatValue(over, row.Unit))
		return
	}
	row.Verdict = fmt.Sprintf("missed by %s (+%.0f%%)", formatValue(over, row.Unit), over/limit*100)
	if row.Target.Kind == TargetFloorFactor {
		row.Verdict += fmt.Sprintf(", %.2fx floor", pf/floor)
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
		return fmt.Sprintf("%.2f s", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// RenderTable writes rows as a markdown table, then the errors and notes.
func RenderTable(w io.Writer, rows []*Row, notes []string) error {
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range tableColumns {
		b.WriteString(" " + columnTitle[c] + " |")
	}
	b.WriteString(" target | procfleet vs target | procfleet/supervisord | procfleet/PM2 |\n")
	b.WriteString("|---|")
	for range tableColumns {
		b.WriteString("---:|")
	}
	b.WriteString("---|---|---:|---:|\n")

	var errs []string
	errIndex := map[string]int{}
	for _, row := range rows {
		b.WriteString("| " + row.Scenario + " |")
		for _, c := range tableColumns {
			switch v, ok := row.Values[c]; {
			case ok:
				b.WriteString(" " + formatValue(v, row.Unit) + " |")
			case row.Errors[c] != "":
				msg := columnTitle[c] + ": " + clip(oneLine(row.Errors[c]))
				i, ok := errIndex[msg]
				if !ok {
					errs = append(errs, msg)
					i = len(errs)
					errIndex[msg] = i
				}
				fmt.Fprintf(&b, " failed [%d] |", i)
			default:
				b.WriteString(" — |")
			}
		}
		target := ""
		if row.Target != nil {
			target = row.Target.Text
		}
		b.WriteString(" " + target + " | " + row.Verdict + " |")
		for _, peer := range []string{peerSupervisord, peerPM2} {
			if r, ok := row.Ratios[peer]; ok {
				fmt.Fprintf(&b, " %.2fx |", r)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	if len(errs) > 0 {
		b.WriteString("\n")
		for i, e := range errs {
			fmt.Fprintf(&b, "[%d] %s\n", i+1, e)
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("- " + clip(n) + "\n")
		}
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
