package observe

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		file    string
		want    procStat
		wantErr string
	}{
		{file: "plain.txt", want: procStat{PID: 4242, PPID: 4241, PGID: 4242, SID: 4242, State: StateSleeping, StartTime: 56762, Comm: "sleep"}},
		// comm "x) R 1 (y z": a naive split sees state R, ppid 1.
		{file: "paren_space.txt", want: procStat{PID: 22230, PPID: 22229, PGID: 22230, SID: 22229, State: StateSleeping, StartTime: 87516, Comm: "x) R 1 (y z"}},
		// comm "a\nb) Z 1" with a real newline: line-based parsing breaks.
		{file: "newline.txt", want: procStat{PID: 31000, PPID: 30999, PGID: 31000, SID: 30999, State: StateSleeping, StartTime: 99001, Comm: "a\nb) Z 1"}},
		{file: "close_paren.txt", want: procStat{PID: 77, PPID: 12, PGID: 77, SID: 77, State: StateZombie, StartTime: 5, Comm: ")"}},
		{file: "spaces_maxstart.txt", want: procStat{PID: 9, PPID: 1, PGID: 9, SID: 9, State: StateZombie, StartTime: 18446744073709551615, Comm: "  "}},
		{file: "kthread.txt", want: procStat{PID: 2, State: StateSleeping, StartTime: 3, Comm: "kthreadd"}},
		{file: "idle.txt", want: procStat{PID: 12, PPID: 2, State: StateIdle, StartTime: 40, Comm: "worker"}},
		{file: "truncated.txt", wantErr: "fields after comm"},
		{file: "no_parens.txt", wantErr: "no (comm)"},
		{file: "bad_pid.txt", wantErr: "bad pid"},
		{file: "negative_start.txt", wantErr: "starttime"},
		{file: "bad_state.txt", wantErr: "bad state"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := parseStat(readFixture(t, filepath.Join("stat", tt.file)))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseStat() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStat() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseStat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStateLetters(t *testing.T) {
	want := map[byte]State{
		'R': StateRunning, 'S': StateSleeping, 'D': StateDiskSleep, 'T': StateStopped,
		't': StateTracingStop, 'Z': StateZombie, 'X': StateDead, 'x': StateDead,
		'I': StateIdle, 'W': StateUnknown, 'K': StateUnknown, '?': StateUnknown,
	}
	for c, w := range want {
		if got := stateFromLetter(c); got != w {
			t.Errorf("stateFromLetter(%q) = %v, want %v", c, got, w)
		}
	}
	if s := StateZombie.String(); s != "zombie" {
		t.Errorf("StateZombie.String() = %q", s)
	}
	if s := State(200).String(); s != "unknown" {
		t.Errorf("State(200).String() = %q", s)
	}
	if !StateZombie.Exited() || !StateDead.Exited() || StateStopped.Exited() {
		t.Error("State.Exited: want only zombie and dead")
	}
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"sleep\x00100\x00", []string{"sleep", "100"}},
		{"my-worker --role=primary\x00", []string{"my-worker --role=primary"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"no-trailing-nul", []string{"no-trailing-nul"}},
		{"\x00", []string{""}},
	}
	for _, tt := range tests {
		if got := parseCmdline([]byte(tt.in)); !cmp.Equal(got, tt.want) {
			t.Errorf("parseCmdline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseStatusUID(t *testing.T) {
	status := "Name:\ta\\nb) Z 1\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
	uid, err := parseStatusUID([]byte(status))
	if err != nil || uid != 1000 {
		t.Errorf("parseStatusUID() = %d, %v; want 1000 (the real uid)", uid, err)
	}
	for _, bad := range []string{"", "Name:\tx\n", "Uid:\n", "Uid:\tabc\t0\n"} {
		if _, err := parseStatusUID([]byte(bad)); err == nil {
			t.Errorf("parseStatusUID(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseProcNetTCP(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		file    string
		v6      bool
		want    []netEntry
		wantErr string
	}{
		{file: "tcp.txt", want: []netEntry{
			{Local: ap("127.0.0.1:18080"), State: tcpListenState, UID: 1000, Inode: 31001},
			{Local: ap("0.0.0.0:8080"), State: tcpListenState, UID: 0, Inode: 31002},
			{Local: ap("127.0.0.1:46505"), State: 1, UID: 1000, Inode: 31003},
			{Local: ap("15.2.0.10:22"), State: 6, UID: 0, Inode: 0},
		}},
		{file: "tcp6.txt", v6: true, want: []netEntry{
			{Local: ap("[::1]:18082"), State: tcpListenState, UID: 1000, Inode: 41001},
			{Local: ap("[::]:18081"), State: tcpListenState, UID: 0, Inode: 41002},
			{Local: ap("[::ffff:127.0.0.1]:8081"), State: tcpListenState, UID: 65534, Inode: 41003},
			{Local: ap("[2001:db8::1]:80"), State: tcpListenState, UID: 0, Inode: 41004},
		}},
		{file: "header_only.txt"},
		{file: "short_row.txt", wantErr: "fields"},
		{file: "bad_addr.txt", wantErr: "bad address"},
		{file: "tcp6.txt", v6: false, wantErr: "bad address"},
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("fixtures were printed by a little-endian kernel")
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := parseProcNetTCP(readFixture(t, filepath.Join("net", tt.file)), tt.v6)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProcArgs2(t *testing.T) {
	buf := func(argc int32, rest string) []byte {
		b := binary.NativeEndian.AppendUint32(nil, uint32(argc))
		return append(b, rest...)
	}
	tests := []struct {
		name    string
		in      []byte
		want    []string
		wantErr bool
	}{
		{"argv and env", buf(3, "/bin/sleep\x00\x00\x00\x00sleep\x00100\x00--x y\x00PATH=/bin\x00"), []string{"sleep", "100", "--x y"}, false},
		{"no env", buf(1, "/a\x00a"), []string{"a"}, false},
		{"zero args", buf(0, "/a\x00"), []string{}, false},
		{"short", []byte{1, 0}, nil, true},
		{"missing args", buf(4, "/a\x00\x00a\x00b\x00"), nil, true},
		{"negative argc", buf(-1, "/a\x00"), nil, true},
		{"no path end", buf(1, "/a"), nil, true},
	}
	for _, tt := range tests {
		got, err := parseProcArgs2(tt.in)
		if (err != nil) != tt.wantErr || !cmp.Equal(got, tt.want) {
			t.Errorf("%s: parseProcArgs2() = %q, %v; want %q, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseLsof(t *testing.T) {
	out := "p23148\nccpython3\nu501\nf5\nn127.0.0.1:18092\nf6\nn[::1]:18092\np99\ncnode\nu0\nf20\nn*:18092\n"
	got, err := parseLsof([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort
	want := []lsofListener{
		{PID: 23148, UID: 501, Comm: "cpython3", Addr: ap("127.0.0.1:18092")},
		{PID: 23148, UID: 501, Comm: "cpython3", Addr: ap("[::1]:18092")},
		{PID: 99, UID: 0, Comm: "node", Addr: ap("[::]:18092"), Wildcard: true},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("parseLsof() mismatch (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"n127.0.0.1:80\n", "px\n", "p1\nnnoport\n", "p1\nnhost:99999\n", "p1\nnbad-host:80\n"} {
		if _, err := parseLsof([]byte(bad)); err == nil {
			t.Errorf("parseLsof(%q) succeeded, want an error", bad)
		}
	}
	if got, err := parseLsof(nil); err != nil || len(got) != 0 {
		t.Errorf("parseLsof(nil) = %v, %v", got, err)
	}
}

func TestDescendantsOf(t *testing.T) {
	procs := []procStat{
		{PID: 1, PPID: 0},
		{PID: 10, PPID: 1},
		{PID: 11, PPID: 10},                    // child
		{PID: 12, PPID: 11, SID: 12, PGID: 12}, // grandchild that called setsid
		{PID: 13, PPID: 11, State: StateZombie},
		{PID: 14, PPID: 13}, // below a zombie (in practice reparented)
		{PID: 20, PPID: 1},  // unrelated
	}
	got := descendantsOf(10, procs)
	want := []int{11, 12, 14}
	if !cmp.Equal(got, want) {
		t.Errorf("descendantsOf(10) = %v, want %v", got, want)
	}
	if got := descendantsOf(20, procs); len(got) != 0 {
		t.Errorf("descendantsOf(20) = %v, want none", got)
	}
}

func FuzzParseStat(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stat", "*.txt"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err != nil {
			return
		}
		if st.PID <= 0 {
			t.Errorf("parsed a non-positive pid %d", st.PID)
		}
		// comm is exactly what lies between the first '(' and the last ')'.
		open := strings.IndexByte(string(b), '(')
		closing := strings.LastIndexByte(string(b), ')')
		if st.Comm != string(b[open+1:closing]) {
			t.Errorf("comm %q is not the text between the first '(' and the last ')'", st.Comm)
		}
	})
}

func FuzzParseProcNetTCP(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "net", "*.txt"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, strings.Contains(name, "tcp6"))
	}
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		entries, err := parseProcNetTCP(b, v6)
		if err != nil {
			return
		}
		for _, e := range entries {
			if !e.Local.IsValid() {
				t.Errorf("invalid address in %+v", e)
			}
			if e.Local.Addr().Is6() != v6 {
				t.Errorf("address family of %v, want v6=%v", e.Local, v6)
			}
		}
	})
}
