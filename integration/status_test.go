//go:build integration && linux

package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// serverStatus is one server of `status -o json`, the fields of
// DESIGN.md's contract that the suite reads.
type serverStatus struct {
	Name     string `json:"name"`
	Phase    string `json:"phase"`
	Ready    bool   `json:"ready"`
	PID      int    `json:"pid"`
	Port     int    `json:"port"`
	Restarts int    `json:"restarts"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

func (s serverStatus) String() string {
	ready := "not ready"
	if s.Ready {
		ready = "ready"
	}
	out := fmt.Sprintf("%s, %s, pid %d, restarts %d", s.Phase, ready, s.PID, s.Restarts)
	if s.Reason != "" {
		out += ", reason " + s.Reason
	}
	if s.Message != "" {
		out += ": " + s.Message
	}
	return out
}

// status returns the server's entry of `status -o json`.
func (f *fleet) status(name string) serverStatus {
	f.t.Helper()
	r := f.cli("status", name, "-f", ".", "-o", "json")
	var doc struct {
		Servers []serverStatus `json:"servers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		f.t.Fatalf("status -o json does not parse (%v):\n%s", err, r)
	}
	for _, s := range doc.Servers {
		if s.Name == name {
			return s
		}
	}
	f.t.Fatalf("status -o json has no server %q:\n%s", name, r)
	return serverStatus{}
}

// waitReady waits until the server is Running and ready with a pid other
// than notPID (0: any), and returns its status. It fails at readyBound, or
// sooner when the server stays Quarantined or Failed for stuckBound.
func (f *fleet) waitReady(name string, notPID int) serverStatus {
	f.t.Helper()
	var last serverStatus
	var stuck streak
	msg, ok := f.poll(readyBound, func() (bool, string) {
		last = f.status(name)
		if last.Phase == "Running" && last.Ready && last.PID > 0 && last.PID != notPID {
			return true, ""
		}
		if stuck.held(last.Phase == "Quarantined" || last.Phase == "Failed", stuckBound) {
			return true, "stuck"
		}
		return false, last.String()
	})
	if !ok || msg == "stuck" {
		why := fmt.Sprintf("not within %s", readyBound)
		if msg == "stuck" {
			why = fmt.Sprintf("%s for %s on end", last.Phase, stuckBound)
		}
		f.snapshot("when " + name + " did not become Ready")
		f.logs(name)
		want := "Running and ready"
		if notPID > 0 {
			want += fmt.Sprintf(" with a new process (not pid %d)", notPID)
		}
		f.t.Fatalf("%s: not %s (%s); status: %s", name, want, why, last)
	}
	return last
}

// streak tracks how long a condition has held without a break.
type streak struct{ since time.Time }

// held records whether the condition holds now and reports whether it has
// held for at least d without a break.
func (s *streak) held(now bool, d time.Duration) bool {
	if !now {
		s.since = time.Time{}
		return false
	}
	if s.since.IsZero() {
		s.since = time.Now()
	}
	return time.Since(s.since) >= d
}

// describeView is what the suite reads of `describe NAME`: the lines
// "Phase:", "PID:" and the observed process's "Verdict:".
type describeView struct {
	phase   string
	ready   bool
	pid     int
	verdict string
	raw     string
}

// parseDescribe reads a describe text; an error says which line is missing.
func parseDescribe(text string) (describeView, error) {
	d := describeView{raw: text}
	var havePhase, havePID bool
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Phase":
			if havePhase {
				continue
			}
			havePhase = true
			phase, rest, _ := strings.Cut(value, " ")
			d.phase = phase
			d.ready = rest == "(Ready)"
		case "PID":
			if havePID {
				continue // the record's PID line comes later
			}
			havePID = true
			if value != "-" {
				n, err := strconv.Atoi(strings.Fields(value)[0])
				if err != nil {
					return d, fmt.Errorf("describe's PID line %q", line)
				}
				d.pid = n
			}
		case "Verdict":
			d.verdict = value
		}
	}
	if !havePhase || !havePID {
		return d, fmt.Errorf("describe has no Phase: or PID: line")
	}
	return d, nil
}

// excerpt returns describe's lines that agree compares, and the reasons
// beside them, each cut to 300 bytes.
func (d describeView) excerpt() string {
	var out []string
	for _, line := range strings.Split(d.raw, "\n") {
		key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch key {
		case "Phase", "Reason", "PID", "Verdict", "Why":
			if len(line) > 300 {
				line = line[:300] + "..."
			}
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// refusesToSignal reports whether describe's verdict says procfleet will
// not signal the process.
func (d describeView) refusesToSignal() bool {
	return strings.HasPrefix(d.verdict, "Quarantine") || strings.Contains(d.verdict, "will not signal")
}

// agree checks that status -o json and describe say the same of the server
// and returns what they disagree on (empty when they agree). alive are
// processes of the server procfleet has a record of: while one of them
// still runs, status must not show pid 0 for the server. It retries until
// status is the same before and after describe.
func (f *fleet) agree(name string, alive ...proc) []string {
	f.t.Helper()
	for range 5 {
		before := f.status(name)
		r := f.cli("describe", name, "-f", ".")
		after := f.status(name)
		if before != after {
			continue
		}
		d, err := parseDescribe(r.stdout)
		if err != nil {
			return []string{fmt.Sprintf("%v:\n%s", err, r)}
		}
		var bad []string
		if d.phase != after.Phase || d.ready != after.Ready {
			bad = append(bad, fmt.Sprintf("describe says phase %s (ready %v), status says %s (ready %v)", d.phase, d.ready, after.Phase, after.Ready))
		}
		if d.pid != after.PID {
			bad = append(bad, fmt.Sprintf("describe says pid %d, status says pid %d", d.pid, after.PID))
		}
		if d.refusesToSignal() && after.Phase != "Quarantined" {
			bad = append(bad, fmt.Sprintf("describe's verdict is %q, status says %s (ready %v)", d.verdict, after.Phase, after.Ready))
		}
		for _, p := range alive {
			if after.PID == 0 && stillRunning(p) {
				bad = append(bad, fmt.Sprintf("status says pid 0 (phase %s, reason %s) while pid %d of the server is alive", after.Phase, after.Reason, p.pid))
			}
		}
		if len(bad) > 0 {
			bad = append(bad, "describe (excerpt):\n"+indent(d.excerpt()))
		}
		return bad
	}
	return []string{"status changed during every one of 5 describe calls"}
}

// stillRunning reports whether p is alive and still the process it was
// (same start time), not a zombie.
func stillRunning(p proc) bool {
	now, ok := readProc(p.pid)
	return ok && now.start == p.start && !now.zombie()
}
