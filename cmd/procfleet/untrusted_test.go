package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/reconciler"
)

// stateSnapshot describes every entry under the state folder as Lstat and
// the bytes (or link target) show it: path, type and mode, owner, content.
func stateSnapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		uid := -1
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid = int(st.Uid)
		}
		var content string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			content = "-> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			content = string(b)
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, fmt.Sprintf("%s %v uid=%d %q", rel, fi.Mode(), uid, content))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// fleetWithRecord makes a fleet file declaring server api and a state
// folder whose record for api holds data (mode 0600).
func fleetWithRecord(t *testing.T, data string) (fleet, state, record string) {
	t.Helper()
	dir := t.TempDir()
	fleet = filepath.Join(dir, "procfleet.yaml")
	yaml := "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: api}\nspec: {command: [/bin/sleep, \"1000\"]}\n"
	if err := os.WriteFile(fleet, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(dir, "state")
	sd, err := actuate.OpenStateDir(state)
	if err != nil {
		t.Fatal(err)
	}
	record = sd.RecordPath("api")
	if err := os.WriteFile(record, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return fleet, state, record
}

// apiStatus runs `procfleet status -o json` with args, which must exit 0
// with a status, and returns server api's part of it.
func apiStatus(t *testing.T, args []string) (reconciler.ServerStatus, bool) {
	t.Helper()
	r := procfleet(t, append([]string{"status", "-o", "json"}, args...)...)
	var st reconciler.Status
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("status -o json: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return st.Get("api")
}

// TestReadOnlyCommandsLeaveUntrustedRecord: status, describe and diff,
// without a running up, report an untrusted record (rule 7) as
// Quarantined / UntrustedRecord with its reason and exit as DESIGN.md says
// (status and describe 0, diff 2: a quarantine is a pending change), and
// leave the state folder exactly as it was: the record at its path with the
// same bytes, mode and owner, and no .corrupt- file. They do not hold the
// state folder's lock, so only up, apply and down may move it aside.
func TestReadOnlyCommandsLeaveUntrustedRecord(t *testing.T) {
	valid := `{"version":1,"name":"api","pid":10,"pgid":10,"startTime":5,"bootId":"b","cmdline":["/bin/sleep","1000"]}`
	tests := []struct {
		name    string
		data    string
		prepare func(t *testing.T, path string)
		reason  string
	}{
		{name: "bad json", data: `{"version": 1, "name": "api", "pid": `, reason: "parse"},
		{name: "mode 0666", data: valid, prepare: func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
		}, reason: "mode 0666 lets group or others write it"},
		{name: "symlink", prepare: func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			if err := os.WriteFile(target, []byte(valid), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, reason: "a symbolic link"},
		{name: "owned by uid 65534", data: valid, prepare: func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the record to another user")
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, reason: "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fleet, state, path := fleetWithRecord(t, tt.data)
			if tt.prepare != nil {
				tt.prepare(t, path)
			}
			before := stateSnapshot(t, state)
			unchanged := func(after string) {
				t.Helper()
				if got := stateSnapshot(t, state); !cmp.Equal(before, got) {
					t.Errorf("%s changed the state folder (-before +after):\n%s", after, cmp.Diff(before, got))
				}
				entries, err := os.ReadDir(filepath.Dir(path))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if strings.Contains(e.Name(), ".corrupt-") {
						t.Errorf("%s moved the record aside: servers/%s", after, e.Name())
					}
				}
			}
			// What every command must say: the record, why, and that it
			// was left where it is.
			explains := func(what, out string) {
				t.Helper()
				for _, want := range []string{path, tt.reason, "procfleet never reads it", "move it away"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s: no %q in:\n%s", what, want, out)
					}
				}
				if strings.Contains(out, "was moved aside") {
					t.Errorf("%s claims the record was moved aside:\n%s", what, out)
				}
			}
			common := []string{"-f", fleet, "--state-dir", state}

			s, ok := apiStatus(t, common)
			if !ok || s.Phase != reconciler.PhaseQuarantined || s.Reason != string(actuate.UntrustedRecord) || s.Ready {
				t.Errorf("status of api: %+v; want Quarantined / UntrustedRecord, not ready", s)
			}
			explains("status -o json message", s.Message)
			unchanged("status -o json")

			r := procfleet(t, append([]string{"status"}, common...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "Quarantined") || !strings.Contains(r.stdout, "UntrustedRecord") {
				t.Errorf("status: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			unchanged("status")

			r = procfleet(t, append([]string{"describe", "api"}, common...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "Quarantined (UntrustedRecord)") || !strings.Contains(r.stdout, "untrusted: record of server api not trusted") {
				t.Errorf("describe api: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			explains("describe api", r.stdout)
			unchanged("describe")

			r = procfleet(t, append([]string{"diff"}, common...)...)
			if r.code != exitPending || !strings.Contains(r.stdout, "! api: quarantined: UntrustedRecord") {
				t.Errorf("diff: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitPending, r.stdout, r.stderr)
			}
			explains("diff", r.stdout)
			unchanged("diff")
		})
	}
}

// TestUntrustedAdvice: the advice tells the truth about where the file is:
// left in place by a reader without the lock, or moved aside by its holder.
func TestUntrustedAdvice(t *testing.T) {
	for _, tt := range []struct {
		ue       actuate.UntrustedRecordError
		want     []string
		wantNone string
	}{
		{actuate.UntrustedRecordError{Name: "api", Path: "/s/servers/api.json", Reason: "mode 0666 lets group or others write it (want 0600)"},
			[]string{"/s/servers/api.json cannot be trusted (mode 0666", "procfleet never reads it", "delete it or move it away", "moves it aside to api.json.corrupt-<time>"},
			"was moved aside"},
		{actuate.UntrustedRecordError{Name: "api", Path: "/s/servers/api.json", Reason: "parse: unexpected EOF", MovedTo: "/s/servers/api.json.corrupt-1"},
			[]string{"/s/servers/api.json cannot be trusted (parse: unexpected EOF)", "was moved aside to /s/servers/api.json.corrupt-1", "delete it"},
			"never reads it"},
	} {
		got := reconciler.UntrustedAdvice(&tt.ue)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("untrustedAdvice(%+v) = %q, want %q in it", tt.ue, got, w)
			}
		}
		if strings.Contains(got, tt.wantNone) {
			t.Errorf("untrustedAdvice(%+v) = %q, must not say %q", tt.ue, got, tt.wantNone)
		}
	}
}

// TestReadOnlyCommandsReportNewerRecord: a record written by a newer
// procfleet is not a reason to fail the whole status (it used to end with
// "check the folder's owner and mode", which was not the problem): the
// server is reported Quarantined / UnverifiedOwner (rule 6: its owner
// cannot be checked) with what to do, and the record is left as it is.
func TestReadOnlyCommandsReportNewerRecord(t *testing.T) {
	fleet, state, _ := fleetWithRecord(t, `{"version":9,"name":"api","pid":10,"somethingNew":true}`)
	before := stateSnapshot(t, state)
	common := []string{"-f", fleet, "--state-dir", state}

	s, ok := apiStatus(t, common)
	if !ok || s.Phase != reconciler.PhaseQuarantined || s.Reason != string(actuate.UnverifiedOwner) || s.Ready ||
		!strings.Contains(s.Message, "written by a newer procfleet (record version 9") {
		t.Errorf("status of api: %+v; want Quarantined / UnverifiedOwner naming the newer record", s)
	}

	r := procfleet(t, append([]string{"describe", "api"}, common...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "Quarantined (UnverifiedOwner)") || !strings.Contains(r.stdout, "unreadable: record of server api") {
		t.Errorf("describe api: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = procfleet(t, append([]string{"diff"}, common...)...)
	if r.code != exitPending || !strings.Contains(r.stdout, "! api: quarantined: UnverifiedOwner") || !strings.Contains(r.stdout, "newer procfleet") {
		t.Errorf("diff: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitPending, r.stdout, r.stderr)
	}
	if got := stateSnapshot(t, state); !cmp.Equal(before, got) {
		t.Errorf("the commands changed the state folder (-before +after):\n%s", cmp.Diff(before, got))
	}
}
