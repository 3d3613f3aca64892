package logfile

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAppendLines(t *testing.T) {
	long := strings.Repeat("x", maxLine)
	tests := []struct {
		name     string
		prefix   string
		chunks   []string
		want     string // after all chunks
		wantHeld string
	}{
		{"whole lines", "", []string{"a\nb\n"}, "a\nb\n", ""},
		{"partial held", "", []string{"a\nb"}, "a\n", "b"},
		{"partial completed", "", []string{"a\nb", "c\nd"}, "a\nbc\n", "d"},
		{"partial across three chunks", "", []string{"ab", "cd", "ef\n"}, "abcdef\n", ""},
		{"prefix on every line", "api | ", []string{"a\nb\n"}, "api | a\napi | b\n", ""},
		{"prefix once for a joined line", "api | ", []string{"a", "b\nc\n"}, "api | ab\napi | c\n", ""},
		{"empty lines kept", "p ", []string{"\n\na\n"}, "p \np \np a\n", ""},
		{"no line feed at all", "p ", []string{"abc"}, "", "abc"},
		{"long line let out in pieces", "", []string{long + "tail"}, long + "\n", "tail"},
		{"long held part let out", "", []string{long[:10], long[10:], "z\n"}, long + "\nz\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b lineBuf
			var out []byte
			for _, c := range tt.chunks {
				out = b.appendLines(out, []byte(tt.prefix), []byte(c))
			}
			if got := string(out); got != tt.want {
				t.Errorf("output %q, want %q", abbrev(got), abbrev(tt.want))
			}
			if got := string(b.partial); got != tt.wantHeld {
				t.Errorf("held %q, want %q", abbrev(got), abbrev(tt.wantHeld))
			}
		})
	}
}

func abbrev(s string) string {
	if len(s) > 40 {
		return s[:20] + "..." + s[len(s)-20:]
	}
	return s
}

func TestLineBufFlushAndDrop(t *testing.T) {
	var b lineBuf
	b.appendLines(nil, nil, []byte("half"))
	if got := string(b.flush(nil, []byte("p | "), true)); got != "p | half\n" {
		t.Errorf("flush with a line feed = %q", got)
	}
	if got := b.flush(nil, []byte("p | "), true); len(got) != 0 {
		t.Errorf("second flush = %q, want nothing", got)
	}
	b.appendLines(nil, nil, []byte("half"))
	if got := string(b.flush(nil, nil, false)); got != "half" {
		t.Errorf("flush as it is = %q", got)
	}
	b.appendLines(nil, nil, []byte("12345"))
	if n := b.drop(); n != 5 || len(b.partial) != 0 {
		t.Errorf("drop = %d, held %q; want 5 and nothing", n, b.partial)
	}
}

func TestLinePrefix(t *testing.T) {
	tests := []struct {
		name          string
		width         int
		prefix, color bool
		want          string
	}{
		{"api", 7, false, false, ""},
		{"api", 7, false, true, ""},
		{"api", 7, true, false, "api     | "},
		{"backend", 7, true, false, "backend | "},
		{"toolongname", 3, true, false, "toolongname | "},
		{"api", 3, true, true, "\x1b[" + colorOf("api") + "mapi | \x1b[0m"},
	}
	for _, tt := range tests {
		if got := string(linePrefix(tt.name, tt.width, tt.prefix, tt.color)); got != tt.want {
			t.Errorf("linePrefix(%q, %d, %v, %v) = %q, want %q", tt.name, tt.width, tt.prefix, tt.color, got, tt.want)
		}
	}
}

// TestColorOf: a server's color depends on its name only, comes from the
// palette, and several names get several colors.
func TestColorOf(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []string{"api", "web", "db", "backend", "worker", "cache", "queue", "auth"} {
		c := colorOf(n)
		if c != colorOf(n) {
			t.Errorf("colorOf(%q) changed between calls", n)
		}
		if !strings.Contains(strings.Join(palette, ","), c) {
			t.Errorf("colorOf(%q) = %q, not in the palette", n, c)
		}
		seen[c] = true
	}
	if len(seen) < 4 {
		t.Errorf("8 names got only %d colors", len(seen))
	}
}

func TestParseStart(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	tests := []struct {
		name    string
		line    string
		wantOK  bool
		wantPID int
	}{
		{"start", `{"time":"2026-12-01T10:00:05Z","server":"api","type":"Normal","reason":"Started","message":"started pid 4321 (\"./api\"), start time 99"}`, true, 4321},
		{"start without a pid", `{"time":"2026-12-01T10:00:05Z","reason":"Started","message":"started"}`, true, 0},
		{"another event", `{"time":"2026-12-01T10:00:05Z","reason":"Exited","message":"exited with code 1"}`, false, 0},
		{"not JSON", `started pid 12`, false, 0},
		{"empty", ``, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotAt, pid, ok := parseStart([]byte(tt.line))
			if ok != tt.wantOK || pid != tt.wantPID || (ok && !gotAt.Equal(at)) {
				t.Errorf("parseStart = %v, %d, %v; want %v, %d, %v", gotAt, pid, ok, at, tt.wantPID, tt.wantOK)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.Local)
	if got, want := startMarker(at, 4321), "--- procfleet: started pid 4321 at 2026-12-01 10:00:05 ---"; got != want {
		t.Errorf("startMarker = %q, want %q", got, want)
	}
	if got, want := startMarker(at, 0), "--- procfleet: started at 2026-12-01 10:00:05 ---"; got != want {
		t.Errorf("startMarker without pid = %q, want %q", got, want)
	}
	if got := skipMarker(1234); !skipMarkerRE.MatchString(got) || !strings.Contains(got, " 1234 bytes") {
		t.Errorf("skipMarker = %q", got)
	}
}

func TestJoined(t *testing.T) {
	j := joined{
		{r: strings.NewReader("ab"), size: 2},
		{r: strings.NewReader("cde"), size: 3},
		{r: strings.NewReader("fXXX"), size: 1}, // a part beyond its size is not read
	}
	if j.size() != 6 {
		t.Fatalf("size %d, want 6", j.size())
	}
	for _, tt := range []struct {
		off  int64
		n    int
		want string
		eof  bool
	}{
		{0, 6, "abcdef", false},
		{1, 3, "bcd", false},
		{4, 5, "ef", true},
		{6, 1, "", true},
	} {
		b := make([]byte, tt.n)
		n, err := j.ReadAt(b, tt.off)
		if string(b[:n]) != tt.want || (err == io.EOF) != tt.eof {
			t.Errorf("ReadAt(%d, %d) = %q, %v; want %q, eof %v", tt.off, tt.n, b[:n], err, tt.want, tt.eof)
		}
	}
	for _, tt := range []struct {
		off     int64
		idx     int
		partOff int64
	}{{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {4, 1, 2}, {5, 2, 0}, {6, 2, 1}} {
		if idx, off := j.locate(tt.off); idx != tt.idx || off != tt.partOff {
			t.Errorf("locate(%d) = %d, %d; want %d, %d", tt.off, idx, off, tt.idx, tt.partOff)
		}
	}
	if got, _ := lastBytes(j, 5, 4); !bytes.Equal(got, []byte("bcde")) {
		t.Errorf("lastBytes across parts = %q", got)
	}
}

// TestTailFilesJoinsSplitLines: a line that a rotation cut in the middle
// (the copy ends without its line feed) is one line, not two.
func TestTailFilesJoinsSplitLines(t *testing.T) {
	dir := t.TempDir()
	live := dir + "/api.log"
	writeTo(t, RotatedPath(live, 1), "one\ntwo\nthr")
	writeTo(t, live, "ee\nfour\n")
	got, err := TailFiles(Files(live, Options{}), 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"two", "three", "four"}, got); diff != "" {
		t.Errorf("TailFiles across a split line (-want +got):\n%s", diff)
	}
}
