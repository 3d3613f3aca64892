package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/procfleet/procfleet/reconciler"
)

// watchStatus prints the status again every watchInterval until ctx ends.
// On a terminal it redraws the screen; otherwise it prints the table once,
// then only the rows that changed (JSON and YAML: the whole document, one
// per change).
func watchStatus(ctx context.Context, opts *globalOptions, names []string, format string, w io.Writer, terminal bool) error {
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	var last string
	var lastRows map[string]string
	for first := true; ; first = false {
		st, err := fleetStatus(ctx, opts, names)
		if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case terminal:
			var b strings.Builder
			if err := writeStatus(&b, format, st, now); err != nil {
				return err
			}
			if line := membershipLine(st.Servers); line != "" && format == outputTable {
				b.WriteString(line + "\n")
			}
			fmt.Fprintf(&b, "\nEvery %s: procfleet status (Ctrl-C ends)   %s\n", watchInterval, now.Format("15:04:05"))
			// Home, then each line over the old one (cleared to its end),
			// then clear what is left below: no flicker.
			frame := "\x1b[H" + strings.ReplaceAll(b.String(), "\n", "\x1b[K\n") + "\x1b[J"
			if first {
				frame = "\x1b[2J" + frame
			}
			if _, err := io.WriteString(w, frame); err != nil {
				return err
			}
		case format == outputTable:
			rows := changedRows(lastRows, st, now)
			if first {
				if err := writeStatus(w, format, st, now); err != nil {
					return err
				}
			} else if err := writeRowsOnly(w, rows, st, now); err != nil {
				return err
			}
			lastRows = rowKeys(st, now)
		default:
			// A change is a change of a row (AGE aside) or of the errors:
			// the document itself carries times that move on their own.
			key := fmt.Sprint(rowKeys(st, now), st.Errors)
			if key != last {
				doc, err := changeDocument(format, st)
				if err != nil {
					return err
				}
				if _, err := io.WriteString(w, doc); err != nil {
					return err
				}
				last = key
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rowKeys maps each server to its row without the AGE column (which
// changes every second and is not a change worth a line).
func rowKeys(st reconciler.Status, now time.Time) map[string]string {
	m := map[string]string{}
	for _, r := range tableRows(st, now) {
		k := append(append([]string{}, r[:6]...), r[7])
		m[r[0]] = strings.Join(k, "\t")
	}
	return m
}

// changedRows returns the names of the servers whose row differs from
// last (new ones included), in table order; removed servers come back as
// "-name".
func changedRows(last map[string]string, st reconciler.Status, now time.Time) []string {
	cur := rowKeys(st, now)
	var out []string
	for _, s := range st.Servers {
		if last[s.Name] != cur[s.Name] {
			out = append(out, s.Name)
		}
	}
	var gone []string
	for n := range last {
		if _, ok := cur[n]; !ok {
			gone = append(gone, "-"+n)
		}
	}
	sort.Strings(gone)
	return append(out, gone...)
}

// writeRowsOnly prints the rows of the named servers, columns as wide as in
// a table, with a header-less tabwriter; a removed server is one line.
func writeRowsOnly(w io.Writer, names []string, st reconciler.Status, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	rows := map[string][]string{}
	for _, r := range tableRows(st, now) {
		rows[r[0]] = r
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, n := range names {
		if strings.HasPrefix(n, "-") {
			fmt.Fprintf(tw, "%s\t(gone: no longer declared or recorded)\n", strings.TrimPrefix(n, "-"))
			continue
		}
		fmt.Fprintln(tw, strings.Join(rows[n], "\t"))
	}
	return tw.Flush()
}

// changeDocument renders st for --watch when piped: JSON on one line, YAML
// as a document with its separator.
func changeDocument(format string, st reconciler.Status) (string, error) {
	if format == outputJSON {
		b, err := json.Marshal(documented(st))
		if err != nil {
			return "", fmt.Errorf("status: %w", err)
		}
		return string(b) + "\n", nil
	}
	b, err := yaml.Marshal(documented(st))
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return "---\n" + string(b), nil
}
