package observe

import (
	"net"
	"os/exec"
	"testing"
)

// startSleeps starts n `sleep` processes for a benchmark; all are killed and
// reaped in Cleanup.
func startSleeps(b *testing.B, n int) []int {
	b.Helper()
	pids := make([]int, 0, n)
	for range n {
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		pids = append(pids, cmd.Process.Pid)
	}
	return pids
}

func BenchmarkReadIdentity(b *testing.B) {
	pid := startSleeps(b, 1)[0]
	for b.Loop() {
		if _, err := ReadIdentity(pid); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPinAndIdentity(b *testing.B) {
	pid := startSleeps(b, 1)[0]
	for b.Loop() {
		h, err := Pin(pid)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Identity(); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

func BenchmarkCheckLiveness(b *testing.B) {
	pid := startSleeps(b, 1)[0]
	for b.Loop() {
		if CheckLiveness(pid) != LivenessAlive {
			b.Fatal("not alive")
		}
	}
}

// One op = a full pass over 1,000 pids.
func BenchmarkReadIdentityPass1000(b *testing.B) {
	pids := startSleeps(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		for _, pid := range pids {
			if _, err := ReadIdentity(pid); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// One op = pin, verify and close each of 1,000 pids.
func BenchmarkPinAndIdentityPass1000(b *testing.B) {
	pids := startSleeps(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		for _, pid := range pids {
			h, err := Pin(pid)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Identity(); err != nil {
				b.Fatal(err)
			}
			h.Close()
		}
	}
}

func benchListeners(b *testing.B, procs int) {
	startSleeps(b, procs)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	b.ResetTimer()
	for b.Loop() {
		ls, err := Listeners(port)
		if err != nil || len(ls) != 1 || len(ls[0].PIDs) != 1 {
			b.Fatalf("Listeners = %+v, %v", ls, err)
		}
	}
}

// Port-owner lookup with the machine's own processes.
func BenchmarkListeners(b *testing.B) { benchListeners(b, 0) }

// Port-owner lookup with 1,000 more processes running.
func BenchmarkListeners1000Procs(b *testing.B) { benchListeners(b, 1000) }

func BenchmarkGroupMembers1000Procs(b *testing.B) {
	pids := startSleeps(b, 1000)
	id, err := ReadIdentity(pids[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := GroupMembers(id.PGID); err != nil {
			b.Fatal(err)
		}
	}
}

// Every group's members from one scan, with 1,000 more processes running:
// what stopping many servers at once shares.
func BenchmarkProcessGroups1000Procs(b *testing.B) {
	startSleeps(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := ProcessGroups(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseStat(b *testing.B) {
	data := []byte("22230 (x) R 1 (y z) S 22229 22230 22229 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 87516 2273280 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	for b.Loop() {
		if _, err := parseStat(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The per-pass liveness check of a pinned process: one poll(2).
func BenchmarkHandleExited(b *testing.B) {
	pid := startSleeps(b, 1)[0]
	h, err := Pin(pid)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	for b.Loop() {
		if h.Exited() {
			b.Fatal("exited")
		}
	}
}
