package actuate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/procfleet/procfleet/internal/safefile"
	"github.com/procfleet/procfleet/observe"
)

// UntrustedQuarantine is an UntrustedRecord quarantine kept on disk (rule
// 7): the newest record of a server that was moved aside as untrusted
// (<name>.json.corrupt-<time>), with no later one resolved. While it
// stands, the server is reported Quarantined / UntrustedRecord and no
// second instance is started; nothing is ever signalled on its word.
type UntrustedQuarantine struct {
	Name string
	// Path is the moved-aside file.
	Path string
	// MovedAt is when it was moved aside (from its name).
	MovedAt time.Time
	// PID, StartTime and Instance are what its bytes tell, whatever else is
	// broken in them (zero when not found). They serve only to decide that
	// nothing of the server is left, never to signal.
	PID       int
	StartTime uint64
	Instance  string
}

// UntrustedQuarantines lists the UntrustedRecord quarantines of the state
// folder, sorted by name: for each server, the newest record moved aside
// as untrusted, unless a resolved one (<name>.json.resolved-<time>) is
// newer. Every reader of the folder (with or without its lock) sees the
// same list; it changes nothing.
func (d *StateDir) UntrustedQuarantines() ([]UntrustedQuarantine, error) {
	dir := filepath.Join(d.Path, serversDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list untrusted records: %w", err)
	}
	type newest struct {
		at       string
		file     string
		resolved bool
	}
	byName := map[string]newest{}
	for _, e := range entries {
		name, at, resolved, ok := parseMovedAside(e.Name())
		if !ok {
			continue
		}
		if n, seen := byName[name]; !seen || at > n.at {
			byName[name] = newest{at: at, file: e.Name(), resolved: resolved}
		}
	}
	var out []UntrustedQuarantine
	for name, n := range byName {
		if n.resolved {
			continue
		}
		q := UntrustedQuarantine{Name: name, Path: filepath.Join(dir, n.file)}
		q.MovedAt, _ = time.Parse(corruptLayout, n.at)
		if b, err := safefile.ReadFile(q.Path, maxRecordSize); err == nil {
			q.PID, q.StartTime, q.Instance = salvage(b)
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// parseMovedAside reads "<name>.json.corrupt-<time>" and
// "<name>.json.resolved-<time>".
func parseMovedAside(file string) (name, at string, resolved, ok bool) {
	for _, infix := range []string{corruptInfix, resolvedInfix} {
		head, t, found := strings.Cut(file, recordExt+infix)
		if !found || checkName(head) != nil {
			continue
		}
		if _, err := time.Parse(corruptLayout, t); err != nil {
			continue
		}
		return head, t, infix == resolvedInfix, true
	}
	return "", "", false, false
}

var (
	salvagePID      = regexp.MustCompile(`"pid"\s*:\s*([0-9]+)`)
	salvageStart    = regexp.MustCompile(`"startTime"\s*:\s*([0-9]+)`)
	salvageInstance = regexp.MustCompile(`"instance"\s*:\s*"([0-9a-f]{32})"`)
)

// salvage picks the pid, start time and instance token out of an
// untrusted record's bytes, whatever else is broken in them.
func salvage(b []byte) (pid int, start uint64, instance string) {
	if m := salvagePID.FindSubmatch(b); m != nil {
		if n, err := strconv.Atoi(string(m[1])); err == nil && n > 0 {
			pid = n
		}
	}
	if m := salvageStart.FindSubmatch(b); m != nil {
		start, _ = strconv.ParseUint(string(m[1]), 10, 64)
	}
	if m := salvageInstance.FindSubmatch(b); m != nil {
		instance = string(m[1])
	}
	return pid, start, instance
}

// NamedProcess is what became of the process an untrusted record named.
type NamedProcess int

// What became of it.
const (
	// NamedNone: the record's bytes name no pid.
	NamedNone NamedProcess = iota
	// NamedGone: no such process, or a zombie.
	NamedGone
	// NamedOther: its pid holds another process now (another start time,
	// or another instance's token).
	NamedOther
	// NamedAlive: its pid holds a process that may be it.
	NamedAlive
	// NamedUnknown: it could not be examined.
	NamedUnknown
)

// LiftFacts is what the kernel says about an UntrustedRecord quarantine's
// server now: DecideLift's input.
type LiftFacts struct {
	Named NamedProcess
	// Holder holds the declared port (nil: free, or no port declared).
	Holder *observe.PortHolder
	// Scanned is false when the process table could not be read; Runners
	// (live processes running the declared command line) and Carriers
	// (carrying the record's instance token), both of a uid procfleet may
	// signal, are then unknown.
	Scanned           bool
	Runners, Carriers []int
}

// DecideLift says whether an UntrustedRecord quarantine can be lifted
// (rule 7): the pid its record named is gone or is another process, the
// port is free, and no live process of procfleet's runs the declared
// command line or carries the record's token. It says why, either way. A
// pure function of its arguments.
func DecideLift(q UntrustedQuarantine, port int, f LiftFacts) (why string, lift bool) {
	var named string
	switch f.Named {
	case NamedGone:
		named = fmt.Sprintf("pid %d it named is gone", q.PID)
	case NamedOther:
		named = fmt.Sprintf("pid %d it named is now another process", q.PID)
	case NamedAlive:
		return fmt.Sprintf("pid %d it named may still run", q.PID), false
	case NamedUnknown:
		return fmt.Sprintf("pid %d it named cannot be examined", q.PID), false
	default:
		named = "the moved-aside record names no process"
	}
	switch {
	case f.Holder != nil:
		return fmt.Sprintf("port %d is held by %s", port, f.Holder), false
	case !f.Scanned:
		return "the processes cannot be listed, so nothing proves its process gone", false
	case len(f.Runners) > 0:
		return fmt.Sprintf("pid %d runs its command line", f.Runners[0]), false
	case len(f.Carriers) > 0:
		return fmt.Sprintf("pid %d carries its instance token", f.Carriers[0]), false
	}
	if port > 0 {
		named += fmt.Sprintf(", port %d is free", port)
	}
	return named + ", and no live process of procfleet's runs its command line or carries its instance token", true
}

// CheckUntrusted gathers the facts DecideLift needs for quarantine q of a
// server declared with argv (command and args) and port, and decides. It
// only reads the kernel's state (one process-table scan reading command
// lines): it never signals anything.
func (a *Actuator) CheckUntrusted(ctx context.Context, q UntrustedQuarantine, argv []string, port int) (why string, lift bool) {
	var f LiftFacts
	f.Named = namedProcess(q)
	if port > 0 {
		f.Holder = observe.HolderOf(ctx, port)
	}
	table, err := observe.ScanProcesses(observe.ScanOptions{EnvKey: InstanceEnv, Details: true})
	if err == nil {
		f.Scanned = true
		self := os.Getpid()
		for _, e := range table {
			if e.PID == self || e.PID <= 1 || !mayKill(e.UID) {
				continue
			}
			if len(argv) > 0 && sameCommand(e.Cmdline, argv) {
				f.Runners = append(f.Runners, e.PID)
			}
			if q.Instance != "" && e.EnvFound && e.Env == q.Instance {
				f.Carriers = append(f.Carriers, e.PID)
			}
		}
	} else {
		a.Log.Error(err, "Cannot list processes for an untrusted record", "server", q.Name)
	}
	return DecideLift(q, port, f)
}

// namedProcess examines the process an untrusted record named, through a
// pin.
func namedProcess(q UntrustedQuarantine) NamedProcess {
	if q.PID <= 0 {
		return NamedNone
	}
	h, err := observe.Pin(q.PID)
	if errors.Is(err, observe.ErrGone) {
		return NamedGone
	}
	if err != nil {
		return NamedUnknown
	}
	defer h.Close()
	id, err := h.Identity()
	switch {
	case errors.Is(err, observe.ErrGone) || errors.Is(err, observe.ErrUntrusted) || (err == nil && id.State.Exited()):
		return NamedGone
	case err != nil:
		return NamedUnknown
	case q.StartTime != 0 && id.StartTime != q.StartTime:
		return NamedOther
	case q.Instance != "" && tokenOf(h, q.Instance) == TokenOther:
		return NamedOther
	}
	return NamedAlive
}

// sameCommand says whether a process's argv is the declared command line:
// the same arguments, and the same program (path, or base name when one of
// the two was resolved through PATH or given relative).
func sameCommand(argv, declared []string) bool {
	if len(argv) == 0 || len(argv) != len(declared) || !slices.Equal(argv[1:], declared[1:]) {
		return false
	}
	return argv[0] == declared[0] || filepath.Base(argv[0]) == filepath.Base(declared[0])
}

// ResolveUntrusted lifts quarantine q: the moved-aside record is renamed
// <name>.json.resolved-<time> (kept, never deleted) and a QuarantineLifted
// event names why. For the holder of the state folder's lock, after
// CheckUntrusted said it may be lifted.
func (a *Actuator) ResolveUntrusted(q UntrustedQuarantine, why string) error {
	to := filepath.Join(filepath.Dir(q.Path), q.Name+recordExt+resolvedInfix+time.Now().UTC().Format(corruptLayout))
	if err := os.Rename(q.Path, to); err != nil {
		return fmt.Errorf("resolve the untrusted record of server %s: %w", q.Name, err)
	}
	asideChanges.Add(1)
	_ = syncDir(filepath.Dir(q.Path))
	a.event(q.Name, EventQuarantineLifted, fmt.Sprintf("UntrustedRecord quarantine lifted: %s; the moved-aside record is kept as %s", why, to))
	return nil
}
