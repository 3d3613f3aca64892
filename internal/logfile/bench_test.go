package logfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// bigLog writes a log of size bytes of 50-byte lines.
func bigLog(b *testing.B, dir string, size int) string {
	b.Helper()
	path := filepath.Join(dir, "api.log")
	line := []byte("0000000000 some log text that makes the line long\n")
	data := bytes.Repeat(line, size/len(line))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkTail20MiB: the last 100 lines of a 20 MiB log.
func BenchmarkTail20MiB(b *testing.B) {
	path := bigLog(b, b.TempDir(), 20<<20)
	b.ResetTimer()
	for b.Loop() {
		if lines, err := Tail(path, 100); err != nil || len(lines) != 100 {
			b.Fatal(err, len(lines))
		}
	}
}

// BenchmarkRotate10MiB: one rotation of a 10 MiB log (copy, fsync, cut),
// with collapse where the file system has it, and with truncate.
func BenchmarkRotate10MiB(b *testing.B) {
	for _, mode := range []string{"collapse", "truncate"} {
		b.Run(mode, func(b *testing.B) {
			disableCollapse = mode == "truncate"
			defer func() { disableCollapse = false }()
			dir := b.TempDir()
			for b.Loop() {
				b.StopTimer()
				path := bigLog(b, dir, 10<<20)
				b.StartTimer()
				if err := Rotate(path, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
