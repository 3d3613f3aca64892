package observe

import (
	"errors"
	"net/netip"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrGone means there is no such process, or it has exited.
	ErrGone = errors.New("process gone")
	// ErrUntrusted means an identity was read after the pinned process had
	// exited: the pid may already belong to another process. The pinned
	// process has exited when this is returned.
	ErrUntrusted = errors.New("identity read after the pinned process exited")
	// ErrNotSupported means the operation has no implementation on this
	// operating system.
	ErrNotSupported = errors.New("not supported on this operating system")
)

// State is the scheduling state of a process.
type State uint8

// Process states. On Linux they map the letters of /proc/PID/stat; on macOS
// the p_stat of kinfo_proc (SIDL and SRUN map to running, SSLEEP to sleeping,
// SSTOP to stopped, SZOMB to zombie).
const (
	StateUnknown     State = iota
	StateRunning           // R
	StateSleeping          // S
	StateDiskSleep         // D: uninterruptible; signals stay pending
	StateStopped           // T
	StateTracingStop       // t
	StateZombie            // Z: exited, not yet reaped
	StateDead              // X
	StateIdle              // I: idle kernel thread
)

var stateNames = [...]string{
	StateUnknown:     "unknown",
	StateRunning:     "running",
	StateSleeping:    "sleeping",
	StateDiskSleep:   "disk-sleep",
	StateStopped:     "stopped",
	StateTracingStop: "tracing-stop",
	StateZombie:      "zombie",
	StateDead:        "dead",
	StateIdle:        "idle",
}

// String returns a lower-case name such as "sleeping" or "zombie".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Exited reports whether the state is one of a process that has exited
// (zombie or dead).
func (s State) Exited() bool { return s == StateZombie || s == StateDead }

// Identity is what tells one process from another that later gets the same
// pid: (BootID, PID, StartTime), plus what a human needs to recognise it.
type Identity struct {
	PID, PPID, PGID, SID, UID int
	State                     State
	// StartTime is, on Linux, field 22 of /proc/PID/stat (clock ticks since
	// boot); on macOS, kinfo_proc p_starttime in microseconds since the epoch.
	StartTime uint64
	// BootID changes on every boot; a stored identity from another boot is
	// stale.
	BootID string
	// Cmdline is the argv the process shows (it may rewrite it); empty for
	// zombies and kernel threads.
	Cmdline []string
	// Comm is the short command name (15 bytes at most on Linux).
	Comm string
}

// Liveness is the answer of CheckLiveness.
type Liveness int

// Liveness values.
const (
	// LivenessGone: no such process, or it is a zombie or dead.
	LivenessGone Liveness = iota
	// LivenessAlive: the process exists and is not a zombie.
	LivenessAlive
	// LivenessUnknown: the process exists (or may) but its state cannot be
	// read; never to be taken as gone.
	LivenessUnknown
)

// String returns "gone", "alive" or "unknown".
func (l Liveness) String() string {
	switch l {
	case LivenessGone:
		return "gone"
	case LivenessAlive:
		return "alive"
	}
	return "unknown"
}

// PinMode says how a Handle holds on to its process.
type PinMode int

// Pin modes.
const (
	// PinPidfd: a Linux pidfd; signals and waits cannot reach a reused pid.
	PinPidfd PinMode = iota
	// PinKqueue: a macOS kqueue EVFILT_PROC/NOTE_EXIT registration; exits
	// are seen exactly, signals go through kill(2) right after a check.
	PinKqueue
	// PinNone: nothing pins the process; exit is found by polling with
	// backoff and a start-time comparison. Callers should log this mode.
	PinNone
)

// String returns "pidfd", "kqueue" or "none".
func (m PinMode) String() string {
	switch m {
	case PinPidfd:
		return "pidfd"
	case PinKqueue:
		return "kqueue"
	case PinNone:
		return "none"
	}
	return "unknown"
}

// Listener is one TCP socket in LISTEN state.
type Listener struct {
	// Addr is the local address; [::]:P for a dual-stack listener.
	Addr netip.AddrPort
	// UID is the effective uid of the socket's creator (-1 when unknown).
	UID int
	// Inode is the socket inode (0 when the OS does not say).
	Inode uint64
	// PIDs hold the socket open (several when it was inherited or dup'ed).
	PIDs []int
	// Cmdline is the command line of the first pid in PIDs.
	Cmdline []string
	// OwnerVisible is false when the holder could not be seen (another
	// user's process and no privilege); PIDs is then empty or partial and
	// must not be taken as "nobody".
	OwnerVisible bool
}

// ProbeResult is the outcome of one probe.
type ProbeResult struct {
	OK bool
	// Message is short and human: "GET /health: 503",
	// "connect: connection refused", "exit code 3: <first output line>".
	Message string
	// Duration is how long the probe took.
	Duration time.Duration
}

// ProcEntry is one process of a ScanProcesses listing.
type ProcEntry struct {
	PID, PPID, PGID, SID int
	State                State
	// StartTime is as in Identity.
	StartTime uint64
	// Env is the value of the scan's EnvKey in the process's environment,
	// when EnvFound. EnvFound is false when the variable is absent, when the
	// environment could not be read (another user's or a non-dumpable
	// process, a kernel thread), and when the process started before the
	// scan's EnvSince.
	Env      string
	EnvFound bool
	// Cmdline and UID (the real uid) are read with ScanOptions.Details;
	// UID is -1 otherwise or when it could not be read.
	Cmdline []string
	UID     int
}

// ScanOptions say what ScanProcesses reads beyond each process's stat.
type ScanOptions struct {
	// EnvKey, when set, is looked up in the environment of every process
	// that started at or after EnvSince (a start time as in Identity): a
	// caller looking for the descendants of a process never needs those
	// of older ones, and skipping them saves one read each.
	EnvKey   string
	EnvSince uint64
	// Details reads every process's command line and uid too (two more
	// reads each): for a rare, thorough look, not for stops.
	Details bool
}
