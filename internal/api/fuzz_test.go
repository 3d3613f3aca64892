package api

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"
)

// FuzzDecodeRequest feeds outside bytes to every request decoder: the
// reload, down and verb (stop, start, restart) bodies and the status
// query. None may panic; whatever
// they accept must satisfy the checks the Backend relies on, and every
// refusal must be ErrInvalid (a 400, never a 500).
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"wait":true,"timeout":"90s"}`,
		`{"wait":false}`,
		`{"names":["api","db"]}`,
		`{"all":true}`,
		`{"names":["../x"]}`,
		`{"names":["api"],"command":["sh"]}`,
		`{"names":["api"],"wait":true,"timeout":"1m"}`,
		`{"names":[],"wait":true}`,
		`{"wait":true,"timeout":"-1ns"}`,
		`{"Names":["API"]}`,
		`{"names":["a"]}{}`,
		`null`,
		"name=api&name=db",
		"name=%2e%2e%2fx&exec=id",
		`{"names":["` + "\u212a" + `"]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		wait, timeout, err := decodeReload(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("decodeReload error %v is not ErrInvalid", err)
			}
		} else if timeout < 0 || timeout > MaxReloadTimeout || (!wait && timeout != 0) {
			t.Errorf("decodeReload accepted wait=%v timeout=%v", wait, timeout)
		}

		names, err := decodeDown(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("decodeDown error %v is not ErrInvalid", err)
			}
		} else {
			checkAccepted(t, names)
			// What was accepted survives a round trip through the client's
			// encoding unchanged.
			req := DownRequest{Names: names, All: len(names) == 0}
			again, _ := json.Marshal(req)
			names2, err := decodeDown(again)
			if err != nil || len(names2) != len(names) {
				t.Errorf("round trip of %q: %v, %q", again, err, names2)
			}
		}

		names, wait, timeout, err = decodeVerb(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("decodeVerb error %v is not ErrInvalid", err)
			}
		} else {
			checkAccepted(t, names)
			if len(names) == 0 || timeout < 0 || timeout > MaxReloadTimeout {
				t.Errorf("decodeVerb accepted names %q, wait=%v timeout=%v", names, wait, timeout)
			}
		}

		if q, err := url.ParseQuery(string(data)); err == nil {
			names, err := decodeStatusQuery(q)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("decodeStatusQuery error %v is not ErrInvalid", err)
				}
			} else {
				checkAccepted(t, names)
			}
		}
	})
}

// checkAccepted asserts what the Backend may assume about names.
func checkAccepted(t *testing.T, names []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || len(n) > 63 || seen[n] {
			t.Errorf("accepted name %q (empty, long or duplicate)", n)
		}
		seen[n] = true
		for _, r := range n {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				t.Errorf("accepted name %q with %q", n, r)
			}
		}
		if n[0] == '-' || n[len(n)-1] == '-' {
			t.Errorf("accepted name %q starting or ending with '-'", n)
		}
	}
}
