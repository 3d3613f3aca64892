package observe

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnvironValue(t *testing.T) {
	env := []byte("PATH=/bin\x00PROCFLEET_INSTANCE=abc\x00PROCFLEET_INSTANCE_X=no\x00EMPTY=\x00PROCFLEET_INSTANCE=second\x00")
	tests := []struct {
		key   string
		want  string
		found bool
	}{
		{"PROCFLEET_INSTANCE", "abc", true}, // the first wins, as getenv's does
		{"PROCFLEET_INSTANCE_X", "no", true},
		{"EMPTY", "", true},
		{"PROCFLEET", "", false}, // a prefix is not a name
		{"MISSING", "", false},
	}
	for _, tt := range tests {
		got, found := environValue(env, tt.key)
		if got != tt.want || found != tt.found {
			t.Errorf("environValue(%s) = %q, %v; want %q, %v", tt.key, got, found, tt.want, tt.found)
		}
	}
	// A wiped environment (a retitled nginx or redis) is all NULs.
	if _, found := environValue(make([]byte, 64), "PROCFLEET_INSTANCE"); found {
		t.Error("found a variable in a zeroed environment")
	}
	if _, found := environValue(nil, "X"); found {
		t.Error("found a variable in an empty environment")
	}
}

func TestParseProcArgs2Env(t *testing.T) {
	b := binary.NativeEndian.AppendUint32(nil, 2)
	b = append(b, "/bin/sleep\x00\x00\x00sleep\x00100\x00\x00\x00PROCFLEET_INSTANCE=t1\x00HOME=/h\x00"...)
	env, err := parseProcArgs2Env(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := environValue(env, "PROCFLEET_INSTANCE"); !ok || v != "t1" {
		t.Errorf("token from procargs2 = %q, %v (env %q)", v, ok, env)
	}
	if v, ok := environValue(env, "HOME"); !ok || v != "/h" {
		t.Errorf("HOME from procargs2 = %q, %v", v, ok)
	}
}

func TestParseMountinfoCgroup2(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		mount, root string
		ok          bool
	}{
		{"hybrid", "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
			"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
			"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", "/", true},
		{"unified with optional fields", "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", "/", true},
		{"container bind mount of a subtree", "700 690 0:30 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup rw\n", "/sys/fs/cgroup", "/docker/abc", true},
		{"escaped space", `41 30 0:37 / /mnt/cg\040two rw - cgroup2 none rw` + "\n", "/mnt/cg two", "/", true},
		{"v1 only", "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n", "", "", false},
		{"a cgroup2 path on another fs type", "50 1 8:1 / /cgroup2 rw - ext4 /dev/sda1 rw\n", "", "", false},
		{"empty", "", "", "", false},
	}
	for _, tt := range tests {
		mount, root, ok := parseMountinfoCgroup2([]byte(tt.in))
		if mount != tt.mount || root != tt.root || ok != tt.ok {
			t.Errorf("%s: parseMountinfoCgroup2 = %q, %q, %v; want %q, %q, %v", tt.name, mount, root, ok, tt.mount, tt.root, tt.ok)
		}
	}
}

func TestParseProcCgroupV2(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"9:name=systemd:/\n4:memory:/process_api/33f0\n0::/\n", "/", true},
		{"0::/procfleet-803-12/api\n", "/procfleet-803-12/api", true},
		{"0::/a:b/c\n", "/a:b/c", true},
		{"4:memory:/x\n", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := parseProcCgroupV2([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseProcCgroupV2(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseKeyedCounter(t *testing.T) {
	events := "populated 1\nfrozen 0\n"
	if n, ok := parseKeyedCounter([]byte(events), "populated"); !ok || n != 1 {
		t.Errorf("populated = %d, %v", n, ok)
	}
	mem := "low 0\nhigh 0\nmax 3\noom 2\noom_kill 1\noom_group_kill 0\n"
	if n, ok := parseKeyedCounter([]byte(mem), "oom_kill"); !ok || n != 1 {
		t.Errorf("oom_kill = %d, %v", n, ok)
	}
	if _, ok := parseKeyedCounter([]byte(mem), "oom_kil"); ok {
		t.Error("a prefix of a key matched")
	}
	if _, ok := parseKeyedCounter([]byte("populated x\n"), "populated"); ok {
		t.Error("a bad value parsed")
	}
}

func TestParsePIDList(t *testing.T) {
	got, err := parsePIDList([]byte("12\n345\n"))
	if err != nil || !cmp.Equal(got, []int{12, 345}) {
		t.Errorf("parsePIDList = %v, %v", got, err)
	}
	if got, err := parsePIDList(nil); err != nil || len(got) != 0 {
		t.Errorf("parsePIDList(empty) = %v, %v", got, err)
	}
	for _, bad := range []string{"x\n", "0\n", "-3\n"} {
		if _, err := parsePIDList([]byte(bad)); err == nil {
			t.Errorf("parsePIDList(%q) succeeded", bad)
		}
	}
}

func TestParseKmsg(t *testing.T) {
	rec, err := parseKmsg([]byte("3,1234,5140900,-;Out of memory: Killed process 4242 (stress) total-vm:1024kB, anon-rss:900kB\n SUBSYSTEM=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Usec != 5140900 || rec.Msg != "Out of memory: Killed process 4242 (stress) total-vm:1024kB, anon-rss:900kB" {
		t.Errorf("parseKmsg = %+v", rec)
	}
	for _, bad := range []string{"no header", "3,1;x", "3,1,notanumber,-;x"} {
		if _, err := parseKmsg([]byte(bad)); err == nil {
			t.Errorf("parseKmsg(%q) succeeded", bad)
		}
	}
}

func TestOOMKilledPID(t *testing.T) {
	tests := []struct {
		msg string
		pid int
		ok  bool
	}{
		{"Out of memory: Killed process 4242 (stress) total-vm:1024kB", 4242, true},
		{"Memory cgroup out of memory: Killed process 77 (node) total-vm:1kB", 77, true},
		{"Killed process 4242 (x)", 0, false}, // not the OOM killer's line
		{"oom_reaper: reaped process 4242 (stress), now anon-rss:0kB", 0, false},
		{"Out of memory: Killed process x (y)", 0, false},
		{"Out of memory: Killed process 12", 0, false},
	}
	for _, tt := range tests {
		pid, ok := oomKilledPID(tt.msg)
		if pid != tt.pid || ok != tt.ok {
			t.Errorf("oomKilledPID(%q) = %d, %v; want %d, %v", tt.msg, pid, ok, tt.pid, tt.ok)
		}
	}
}

func TestCgroup2Dir(t *testing.T) {
	c := Cgroup2{Mount: "/sys/fs/cgroup/unified", Root: "/"}
	if got, err := c.Dir("/procfleet-1-2/api"); err != nil || got != "/sys/fs/cgroup/unified/procfleet-1-2/api" {
		t.Errorf("Dir = %q, %v", got, err)
	}
	if got, err := c.Dir("/"); err != nil || got != "/sys/fs/cgroup/unified" {
		t.Errorf("Dir(/) = %q, %v", got, err)
	}
	for _, bad := range []string{"", "rel/path", "/a/../b", "/a/", "/a//b"} {
		if _, err := c.Dir(bad); err == nil {
			t.Errorf("Dir(%q) succeeded", bad)
		}
	}
	sub := Cgroup2{Mount: "/sys/fs/cgroup", Root: "/docker/abc"}
	if got, err := sub.Dir("/docker/abc/procfleet-1-2/api"); err != nil || got != "/sys/fs/cgroup/procfleet-1-2/api" {
		t.Errorf("Dir under a bind-mounted root = %q, %v", got, err)
	}
	for _, out := range []string{"/docker/abcd/x", "/other"} {
		if _, err := sub.Dir(out); err == nil {
			t.Errorf("Dir(%q) outside the mounted root succeeded", out)
		}
	}
}
