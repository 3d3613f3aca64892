package logfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotateShiftsAndKeeps(t *testing.T) {
	path := writeFile(t, "")
	opts := Options{Keep: 3}
	for i := 1; i <= 5; i++ {
		if err := os.WriteFile(path, []byte(fmt.Sprintf("run %d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Rotate(path, opts); err != nil {
			t.Fatalf("rotation %d: %v", i, err)
		}
	}
	for n, want := range map[int]string{1: "run 5\n", 2: "run 4\n", 3: "run 3\n"} {
		if got := readString(t, RotatedPath(path, n)); got != want {
			t.Errorf("%s holds %q, want %q", RotatedPath(path, n), got, want)
		}
	}
	if _, err := os.Lstat(RotatedPath(path, 4)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a fourth copy exists with Keep 3: %v", err)
	}
	if got := readString(t, path); got != "" {
		t.Errorf("live log holds %q after rotation, want it empty", got)
	}
	fi, _ := os.Stat(RotatedPath(path, 1))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("rotated copy mode %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 4 {
		t.Errorf("folder holds %v, want the log and three copies", entries)
	}
}

func TestRotateIfLarger(t *testing.T) {
	path := writeFile(t, strings.Repeat("x", 99)+"\n")
	for _, tt := range []struct {
		max  int64
		want bool
	}{{101, false}, {100, true}, {1, false /* now empty */}} {
		got, err := RotateIfLarger(path, Options{MaxBytes: tt.max})
		if err != nil || got != tt.want {
			t.Errorf("RotateIfLarger(max %d) = %v, %v; want %v", tt.max, got, err, tt.want)
		}
	}
	if got, err := RotateIfLarger(filepath.Join(t.TempDir(), "none.log"), Options{}); got || err != nil {
		t.Errorf("RotateIfLarger of a missing log = %v, %v; want false, nil", got, err)
	}
	rotated, err := RotateDir(filepath.Dir(path), Options{MaxBytes: 1})
	if err != nil || len(rotated) != 0 {
		t.Errorf("RotateDir over an empty log = %v, %v", rotated, err)
	}
}

// TestRotateRecoversShiftedCopy: a crash after the shift (.1 already
// moved to .2) and before the rename leaves the copy in .1.tmp: it goes to
// .1 without a second shift, which would drop one more old copy.
func TestRotateRecoversShiftedCopy(t *testing.T) {
	path := writeFile(t, "new\n")
	writeTo(t, RotatedPath(path, 2), "older\n")
	writeTo(t, RotatedPath(path, 3), "oldest\n")
	writeTo(t, RotatedPath(path, 1)+tmpSuffix, "interrupted\n")
	if err := Rotate(path, Options{Keep: 4}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for n := 1; n <= 4; n++ {
		got = append(got, readString(t, RotatedPath(path, n)))
	}
	if diff := cmp.Diff([]string{"new\n", "interrupted\n", "older\n", "oldest\n"}, got); diff != "" {
		t.Errorf("copies .1 to .4 (-want +got):\n%s", diff)
	}
}

func TestRotateRecoversInterruptedCopy(t *testing.T) {
	path := writeFile(t, "new\n")
	if err := os.WriteFile(RotatedPath(path, 1), []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A crash between truncate and rename left the copy under its temp name.
	if err := os.WriteFile(RotatedPath(path, 1)+tmpSuffix, []byte("interrupted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Rotate(path, Options{Keep: 5}); err != nil {
		t.Fatal(err)
	}
	got := []string{readString(t, RotatedPath(path, 1)), readString(t, RotatedPath(path, 2)), readString(t, RotatedPath(path, 3))}
	if diff := cmp.Diff([]string{"new\n", "interrupted\n", "old\n"}, got); diff != "" {
		t.Errorf("copies .1 .2 .3 (-want +got):\n%s", diff)
	}
}

// writerProc is a writer process started by startWriter.
type writerProc struct {
	stdin  *os.File      // with batches: a byte here writes a batch
	ack    *os.File      // with acks: a byte here once a batch is written
	exited chan struct{} // closed once the process has exited
	err    error         // its exit, once exited is closed
}

// startWriter starts the writer process with its stdout on the log at path,
// opened O_APPEND as actuate opens a server's log. With batch > 0 it writes
// batch lines per byte sent to stdin; with ack, it says on ack when each
// batch is written. It is killed and reaped when the test ends.
func startWriter(t *testing.T, path string, lines, batch int, ack bool) *writerProc {
	t.Helper()
	logf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), writerEnv+"="+strconv.Itoa(lines), "PROCFLEET_LOGFILE_TEST_BATCH="+strconv.Itoa(batch))
	cmd.Stdout = logf
	cmd.Stderr = os.Stderr
	w := &writerProc{exited: make(chan struct{})}
	if batch > 0 {
		r, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = r
		w.stdin = pw
		t.Cleanup(func() { pw.Close() })
		defer r.Close()
	}
	if ack {
		r, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{pw}
		cmd.Env = append(cmd.Env, "PROCFLEET_LOGFILE_TEST_ACK=1")
		w.ack = r
		t.Cleanup(func() { r.Close() })
		defer pw.Close()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-w.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("writer pid %d not reaped 30 s after SIGKILL", cmd.Process.Pid)
		}
	})
	return w
}

// parseLines checks that every line of content is a whole writer line and
// returns their numbers. With tornLast, the last line may be the beginning
// of one (a write in progress when the copy was cut); it is not counted.
func parseLines(t *testing.T, name, content string, tornLast bool) []int {
	t.Helper()
	var nums []int
	lines := strings.SplitAfter(content, "\n")
	for i, line := range lines {
		if line == "" {
			continue
		}
		whole := strings.TrimSuffix(line, "\n")
		num, rest, _ := strings.Cut(whole, " ")
		n, err := strconv.Atoi(num)
		if err != nil || len(num) != 8 || rest != "the quick brown fox jumps" || !strings.HasSuffix(line, "\n") {
			if tornLast && i == len(lines)-1 && isLinePrefix(whole) {
				continue
			}
			t.Fatalf("%s: torn or foreign line %q at line %d of %d", name, line, i+1, len(lines))
		}
		nums = append(nums, n)
	}
	return nums
}

// isLinePrefix reports whether s is the beginning of a writer line.
func isLinePrefix(s string) bool {
	const body = " the quick brown fox jumps"
	digits := min(len(s), 8)
	for _, c := range s[:digits] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return strings.HasPrefix(body, s[digits:])
}

// collapseWorks reports whether collapsePrefix works in dir.
func collapseWorks(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	n, err := collapsePrefix(f, 1<<20)
	return err == nil && n > 0
}

// inEachRotationMode runs test as subtests "collapse" (skipped where
// fallocate COLLAPSE_RANGE does not work in the temporary folder) and
// "truncate" (the copy-then-truncate path forced), each in a fresh folder;
// collapse says which.
func inEachRotationMode(t *testing.T, test func(t *testing.T, dir string, collapse bool)) {
	for _, mode := range []string{"collapse", "truncate"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			if mode == "collapse" && !collapseWorks(t, dir) {
				t.Skipf("fallocate COLLAPSE_RANGE is not supported in %s", dir)
			}
			if mode == "truncate" {
				disableCollapse = true
				t.Cleanup(func() { disableCollapse = false })
			}
			test(t, dir, mode == "collapse")
		})
	}
}

// TestRotateUnderWriter rotates a log again and again while a separate
// process writes numbered lines through its O_APPEND descriptor, moving each
// copy aside, then checks what was kept.
//   - collapse (Linux, ext4/xfs): nothing lost; the copies and the live log
//     put together are exactly what was written, in order.
//   - truncate (elsewhere): every line whole but possibly the last of a copy
//     (a write cut by the truncate), in order, none twice, and lines missing
//     only where a copy ends (the truncate window).
func TestRotateUnderWriter(t *testing.T) {
	inEachRotationMode(t, rotateUnderWriter)
}

func rotateUnderWriter(t *testing.T, dir string, lossless bool) {
	path := filepath.Join(dir, "api.log")
	const total = 60_000
	w := startWriter(t, path, total, 0, false)

	var copies []string
	rotate := func() {
		ok, err := RotateIfLarger(path, Options{MaxBytes: 32 << 10, Keep: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			aside := filepath.Join(dir, fmt.Sprintf("copy-%04d", len(copies)))
			if err := os.Rename(RotatedPath(path, 1), aside); err != nil {
				t.Fatal(err)
			}
			copies = append(copies, aside)
		}
	}
	ticker := time.NewTicker(time.Millisecond) // paces the rotations; waits for nothing
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-w.exited:
			if w.err != nil {
				t.Fatalf("writer: %v", w.err)
			}
			running = false
		case <-ticker.C:
			rotate()
		}
	}
	if len(copies) < 3 {
		t.Errorf("only %d rotations happened under the writer; the test proves little", len(copies))
	}
	copies = append(copies, path) // the live rest

	if lossless {
		var all strings.Builder
		for _, c := range copies {
			all.WriteString(readString(t, c))
		}
		nums := parseLines(t, "copies and live log together", all.String(), false)
		for i, n := range nums {
			if n != i {
				t.Fatalf("line %d where line %d was written: lost, repeated or out of order", n, i)
			}
		}
		if len(nums) != total {
			t.Errorf("%d lines kept, want %d", len(nums), total)
		}
		t.Logf("%d rotations under a writer of %d lines: none lost", len(copies)-1, total)
		return
	}

	var all []int
	boundaries := map[int]bool{} // indexes in all where a new file starts
	for i, c := range copies {
		boundaries[len(all)] = true
		all = append(all, parseLines(t, filepath.Base(c), readString(t, c), i < len(copies)-1)...)
	}
	lost, maxGap := 0, 0
	for i := 1; i < len(all); i++ {
		switch {
		case all[i] <= all[i-1]:
			t.Fatalf("line %d follows line %d: out of order or repeated", all[i], all[i-1])
		case all[i] != all[i-1]+1:
			if !boundaries[i] {
				t.Errorf("lines %d..%d missing inside a file, not at a rotation", all[i-1]+1, all[i]-1)
			}
			lost += all[i] - all[i-1] - 1
			maxGap = max(maxGap, all[i]-all[i-1]-1)
		}
	}
	if len(all) == 0 || all[0] != 0 {
		t.Fatalf("kept lines do not start at line 0")
	}
	if last := all[len(all)-1]; last != total-1 {
		// The last lines may only have been lost in a final rotation's
		// window, which leaves the live log empty.
		if readString(t, path) != "" {
			t.Errorf("kept lines end at %d, want %d", last, total-1)
		}
		lost += total - 1 - last
	}
	t.Logf("%d rotations under a writer of %d lines: %d lines lost in truncate windows (at most %d at one rotation)", len(copies)-1, total, lost, maxGap)
}

// TestRotateDirChoosesLogs: RotateDir rotates the regular *.log files that
// reached the limit, in name order, and nothing else: not a smaller log, a
// rotated copy, another file, a symlink or a folder named *.log (the target
// of the symlink is left whole). A missing folder is no error.
func TestRotateDirChoosesLogs(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", 99) + "\n"
	files := map[string]string{"b.log": big, "a.log": big, "small.log": "x\n", "a.log.1": big, "notes.txt": big}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	rotated, err := RotateDir(dir, Options{MaxBytes: 100, Keep: 1})
	if err != nil {
		t.Fatalf("RotateDir: %v", err)
	}
	want := []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")}
	if diff := cmp.Diff(want, rotated); diff != "" {
		t.Errorf("RotateDir rotated (-want +got):\n%s", diff)
	}
	for name, content := range map[string]string{"a.log": "", "a.log.1": big, "b.log": "", "b.log.1": big, "small.log": "x\n", "notes.txt": big} {
		if got := readString(t, filepath.Join(dir, name)); got != content {
			t.Errorf("%s holds %q, want %q", name, got, content)
		}
	}
	if got := readString(t, target); got != big {
		t.Errorf("the symlink's target holds %q, want it whole", got)
	}
	if rotated, err := RotateDir(filepath.Join(dir, "none"), Options{}); rotated != nil || err != nil {
		t.Errorf("RotateDir of a missing folder = %v, %v; want nil, nil", rotated, err)
	}
}
