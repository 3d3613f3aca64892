//go:build integration && linux

package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// proc is one process as /proc shows it now.
type proc struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64 // field 22 of /proc/PID/stat
	ruid, euid           int
	exe, cwd             string
	cmdline              []string // NUL-separated as the kernel shows it, trailing empties kept
	environ              []byte   // raw; nil when unreadable
	listens              []int    // the scan's ports this process holds a listener on
	why                  []string // the rules that made the scan count it
}

func (p proc) zombie() bool { return p.state == 'Z' || p.state == 'X' }

// title is the command line for a log line: arguments joined by spaces,
// the trailing empty ones that retitling leaves counted instead of shown.
func (p proc) title() string {
	args := p.cmdline
	pad := 0
	for len(args) > 0 && args[len(args)-1] == "" {
		args = args[:len(args)-1]
		pad++
	}
	s := strings.Join(args, " ")
	if len(args) > 1 {
		s = fmt.Sprintf("%q", args)
	}
	if pad > 0 {
		s += fmt.Sprintf(" (+%d empty)", pad)
	}
	return s
}

// carries reports whether the process's environment holds the entry
// name=value exactly.
func (p proc) carries(name, value string) bool {
	want := []byte(name + "=" + value)
	for e := range bytes.SplitSeq(p.environ, []byte{0}) {
		if bytes.Equal(e, want) {
			return true
		}
	}
	return false
}

// readProc reads what the scan needs of one process. ok is false when the
// process is gone or its stat cannot be parsed.
func readProc(pid int) (p proc, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return proc{}, false
	}
	p, ok = parseStat(b)
	if !ok {
		return proc{}, false
	}
	p.pid = pid
	if st, err := os.ReadFile(dir + "/status"); err == nil {
		p.ruid, p.euid = parseUids(st)
	}
	p.exe, _ = os.Readlink(dir + "/exe")
	p.cwd, _ = os.Readlink(dir + "/cwd")
	if c, err := os.ReadFile(dir + "/cmdline"); err == nil && len(c) > 0 {
		p.cmdline = strings.Split(string(bytes.TrimSuffix(c, []byte{0})), "\x00")
	}
	p.environ, _ = os.ReadFile(dir + "/environ")
	return p, true
}

// parseStat reads state, ppid, pgrp, session and starttime from
// /proc/PID/stat, splitting after the last ')' (the command name may hold
// spaces and parentheses).
func parseStat(b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return proc{}, false
	}
	var p proc
	p.state = f[0][0]
	var err [4]error
	p.ppid, err[0] = strconv.Atoi(f[1])
	p.pgid, err[1] = strconv.Atoi(f[2])
	p.sid, err[2] = strconv.Atoi(f[3])
	p.start, err[3] = strconv.ParseUint(f[19], 10, 64)
	return p, errors.Join(err[:]...) == nil
}

// parseUids returns the real and effective uid of /proc/PID/status.
func parseUids(b []byte) (ruid, euid int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				ruid, _ = strconv.Atoi(f[0])
				euid, _ = strconv.Atoi(f[1])
			}
		}
	}
	return ruid, euid
}

// allPids lists the numeric entries of /proc.
func allPids() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// listeners returns the socket inodes listening on TCP (any address,
// IPv4 and IPv6) on one of ports, with their port.
func listeners(ports map[int]bool) map[uint64]int {
	out := map[uint64]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if i == 0 || len(fs) < 10 || fs[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if !ok {
				continue
			}
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil || !ports[int(port)] {
				continue
			}
			if ino, err := strconv.ParseUint(fs[9], 10, 64); err == nil {
				out[ino] = int(port)
			}
		}
	}
	return out
}

// socketPorts returns the ports of socks that pid holds an fd on.
func socketPorts(pid int, socks map[uint64]int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		s, ok := strings.CutPrefix(l, "socket:[")
		if !ok {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
		if err != nil {
			continue
		}
		if port, ok := socks[ino]; ok && !containsInt(out, port) {
			out = append(out, port)
		}
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// scanSpec says which processes belong to one test.
type scanSpec struct {
	root    string            // the test's folder
	ports   map[int]bool      // the test's ports
	env     map[string]string // entries name -> value any of which marks a process (the marker)
	tokens  map[string]bool   // PROCFLEET_INSTANCE values seen in the fleet's records
	exes    map[string]bool   // the packages' server executables
	ignore  string            // procfleet's binary: its processes are the tool, not the fleet
	actors  map[int]bool      // pids of the ups the test started: their sessions hold only exec probes
	selfPID int
}

// scan returns every process that belongs to the test, by the rules of the
// package doc, sorted by pid. Zombies are included (callers that count
// leftovers drop them: a zombie holds nothing and is reaped by its parent).
func scan(s scanSpec) []proc {
	socks := listeners(s.ports)
	all := map[int]proc{}
	for _, pid := range allPids() {
		if pid == s.selfPID {
			continue
		}
		p, ok := readProc(pid)
		if !ok || p.exe == s.ignore && s.ignore != "" || s.actors[p.sid] {
			continue
		}
		if len(socks) > 0 {
			p.listens = socketPorts(pid, socks)
		}
		all[pid] = p
	}
	under := func(path string) bool {
		return path == s.root || strings.HasPrefix(path, s.root+"/")
	}
	matched := map[int]bool{}
	for pid, p := range all {
		for name, value := range s.env {
			if p.carries(name, value) {
				p.why = append(p.why, "marker")
			}
		}
		for tok := range s.tokens {
			if p.carries("PROCFLEET_INSTANCE", tok) {
				p.why = append(p.why, "token")
			}
		}
		if under(p.cwd) {
			p.why = append(p.why, "cwd")
		}
		if s.exes[p.exe] && strings.Contains(strings.Join(p.cmdline, " "), s.root) {
			p.why = append(p.why, "exe+cmdline")
		}
		if len(p.listens) > 0 {
			p.why = append(p.why, "port")
		}
		if len(p.why) > 0 {
			matched[pid] = true
			all[pid] = p
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, p := range all {
			if !matched[pid] && matched[p.ppid] {
				p.why = append(p.why, "child of "+strconv.Itoa(p.ppid))
				all[pid] = p
				matched[pid] = true
				grew = true
			}
		}
	}
	out := make([]proc, 0, len(matched))
	for pid := range matched {
		out = append(out, all[pid])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// descendants returns the pids of leader and of every process below it in
// procs (by ppid).
func descendants(procs []proc, leader int) map[int]bool {
	in := map[int]bool{leader: true}
	for grew := true; grew; {
		grew = false
		for _, p := range procs {
			if !in[p.pid] && in[p.ppid] {
				in[p.pid] = true
				grew = true
			}
		}
	}
	return in
}

// table formats procs for a log, one line each, with what the ownership
// engineer needs: the tree, the uids, the title, whether the marker and a
// token survive in the environment, the ports held, and why it counted.
func table(procs []proc, s scanSpec) string {
	if len(procs) == 0 {
		return "  (none)\n"
	}
	var b strings.Builder
	for _, p := range procs {
		marker := "gone"
		for name, value := range s.env {
			if p.carries(name, value) {
				marker = "kept"
			}
		}
		if p.environ == nil {
			marker = "unreadable"
		}
		token := "-"
		for tok := range s.tokens {
			if p.carries("PROCFLEET_INSTANCE", tok) {
				token = "kept"
			}
		}
		fmt.Fprintf(&b, "  pid %d ppid %d pgid %d sid %d uid %d/%d state %c exe %s cwd %s env-marker %s token %s listens %v [%s]\n    cmdline %s\n",
			p.pid, p.ppid, p.pgid, p.sid, p.ruid, p.euid, p.state, p.exe, relTo(p.cwd, s.root), marker, token, p.listens, strings.Join(p.why, ","), p.title())
	}
	return b.String()
}

// relTo shows path relative to root when it is under it.
func relTo(path, root string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return "<test>/" + r
	}
	return path
}

// pinned is a process held by a pidfd: signals through it reach that
// process or nothing.
type pinned struct {
	fd  int
	pid int
}

// pin opens a pidfd on p.pid and checks that the process it holds has the
// start time p was read with. ok is false when the process is gone or the
// pid now names another process.
func pin(p proc) (pinned, bool) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return pinned{}, false
	}
	now, ok := readProc(p.pid)
	if !ok || now.start != p.start {
		unix.Close(fd)
		return pinned{}, false
	}
	return pinned{fd: fd, pid: p.pid}, true
}

func (pp pinned) close() { unix.Close(pp.fd) }

func (pp pinned) signal(sig unix.Signal) error {
	return unix.PidfdSendSignal(pp.fd, sig, nil, 0)
}

// wait waits up to d for the pinned process to exit (its pidfd becomes
// readable), and reports whether it did.
func (pp pinned) wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(pp.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds()))
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) || time.Now().After(deadline) {
			return false
		}
	}
}

// killPinned SIGKILLs p if it is still the process that was read, and
// waits up to d for it to exit. It reports whether p is gone.
func killPinned(p proc, d time.Duration) bool {
	pp, ok := pin(p)
	if !ok {
		return true
	}
	defer pp.close()
	if err := pp.signal(unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return false
	}
	return pp.wait(d)
}
