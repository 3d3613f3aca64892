package observe

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkKernelOOMKill is one look after an exit, with the log read once
// before (as every look but the first of a process is): the cost on the
// way from a SIGKILLed server's exit to its restart.
func BenchmarkKernelOOMKill(b *testing.B) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		b.Skipf("no /dev/kmsg: %v", err)
	}
	KernelOOMKill(os.Getpid(), 0)
	for b.Loop() {
		KernelOOMKill(os.Getpid(), 0)
	}
}

// BenchmarkKernelOOMKillWhole reads the whole log for every look, as the
// first look of a process does.
func BenchmarkKernelOOMKillWhole(b *testing.B) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		b.Skipf("no /dev/kmsg: %v", err)
	}
	for b.Loop() {
		var k kernelLog
		k.oomKill(os.Getpid(), 0)
		k.close()
	}
}

// close closes the descriptor (tests).
func (k *kernelLog) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open {
		_ = unix.Close(k.fd)
		k.open = false
	}
}
