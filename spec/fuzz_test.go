package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzLoadBytes feeds arbitrary bytes to the loader. It must never panic;
// it gives either servers or an ErrorList whose every entry has a message;
// and whatever it accepts and Validate passes must survive a round trip
// through JSON (the file's other syntax) to the same servers and hashes.
// The seed corpus is in testdata/fuzz/FuzzLoadBytes.
func FuzzLoadBytes(f *testing.F) {
	f.Add([]byte(server("api", "  port: 8080\n  readinessProbe:\n    httpGet: {path: /health}\n")))
	f.Add([]byte(server("a", "  dependsOn: [b]\n") + "---\n" + server("b", "  env: [{name: X, value: y}]\n")))
	f.Add([]byte("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: &m {name: a}\nspec: {<<: {command: [x]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a bug too: turn it into a crash that names the input
		// (the fuzzer has no per-input timeout). The bound is generous so
		// that a loaded machine never trips it.
		watchdog := time.AfterFunc(30*time.Second, func() { panic(fmt.Sprintf("slow input %q", data)) })
		defer watchdog.Stop()
		servers, err := LoadBytes("fuzz.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Message == "" {
					t.Fatalf("error without a message: %+v", e)
				}
			}
			if servers != nil {
				t.Fatal("servers returned along with an error")
			}
			return
		}
		if len(Validate(servers)) > 0 {
			return
		}
		// Round trip: JSON is YAML, so what Load accepted must load again
		// from its own encoding, unchanged.
		for i := range servers {
			out, err := json.Marshal(servers[i])
			if err != nil {
				t.Fatal(err)
			}
			again, err := LoadBytes("fuzz.yaml", out)
			if err != nil {
				t.Fatalf("re-loading %s: %v", out, err)
			}
			if len(again) != 1 || again[0].Hash() != servers[i].Hash() {
				t.Fatalf("round trip of %s changed the server", out)
			}
			a, _ := json.Marshal(again[0])
			if string(a) != string(out) {
				t.Fatalf("round trip changed\n%s\nto\n%s", out, a)
			}
		}
	})
}
