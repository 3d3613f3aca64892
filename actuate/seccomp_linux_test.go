package actuate

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
)

// denyClone3 installs, on every thread of this process, a seccomp filter
// that makes clone3 fail with ENOSYS, as container profiles do (Go's
// runtime makes its threads with clone, which stays allowed). ENOSYS, not
// EPERM: the filter is inherited by the server, and glibc's pthread_create
// (a -race or cgo binary) falls back to clone only on ENOSYS (moby#42680;
// with EPERM the server died at its first thread). It is for a spawner
// subprocess only: the filter cannot be removed.
func denyClone3() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_CLONE3},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// Where clone3 is refused (a seccomp filter, made for real in a spawner
// subprocess), a start that would use a cgroup falls back to the session
// mode instead of failing: the server runs, its record names no cgroup,
// and it is stopped.
func TestSpawnFallsBackWhenClone3Refused(t *testing.T) {
	a, _ := newActuator(t)
	if m := a.Dir.Membership(); m.Mode != MembershipCgroup {
		t.Skipf("cgroups not available here: %s", m.Why)
	}
	ctx := testCtx(t)
	pid := spawnElsewhere(t, spawnerRequest{Dir: a.Dir.Path, Name: "api", DenyClone3: true,
		Argv: testserver.Command("-exit-after", "1h"), Env: []string{testserver.Env()}})
	h, err := observe.Pin(pid)
	if err != nil {
		b, _ := os.ReadFile(a.Dir.LogPath("api"))
		t.Fatalf("pin the server %d: %v; its log:\n%s", pid, err, b)
	}
	_ = h.Close()
	h = killPinned(t, pid)
	rec, err := a.Dir.ReadRecord("api")
	if err != nil {
		t.Fatal(err)
	}
	// Without the filter this spawn would have a cgroup (Membership says
	// so above).
	if rec.PID != pid || rec.Cgroup != "" {
		t.Errorf("record %+v, want pid %d and no cgroup (session mode)", rec, pid)
	}
	if err := a.Stop(ctx, rec, StopOptions{}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, h)
	assertNothingLeft(t, rec)
}
