package spec_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/procfleet/procfleet/spec"
)

// Hardening (issue 8): a server's name becomes a file name in the state
// folder (servers/<name>.json, logs/<name>.log), so nothing but a DNS label
// may pass, whichever way the fleet reaches procfleet.

var hostileNames = []struct {
	name, why string
}{
	{"../x", "parent folder"},
	{"..", "parent folder itself"},
	{".", "the folder itself"},
	{"/abs", "absolute path"},
	{"/etc/passwd", "absolute path to a real file"},
	{"a/b", "sub folder"},
	{`a\b`, "backslash"},
	{"x/../../y", "traversal in the middle"},
	{strings.Repeat("a", 64), "64 characters"},
	{strings.Repeat("a", 255), "longer than a file name may be"},
	{"API", "upper case"},
	{"Api", "upper case first"},
	{"ápi", "unicode letter"},
	{"api\u200b", "zero-width space"},
	{"аpi", "Cyrillic a"},
	{"a.b", "dot"},
	{".hidden", "leading dot"},
	{"a_b", "underscore"},
	{"-a", "leading dash"},
	{"a-", "trailing dash"},
	{"a b", "space"},
	{"a\nb", "newline"},
	{"a\x00b", "NUL"},
	{"", "empty"},
	{"*", "glob"},
	{"a.json", "looks like a record"},
}

func serverDoc(name string) string {
	return fmt.Sprintf("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: %s\nspec:\n  command: [./bin/api]\n", strconv.Quote(name))
}

func TestHostileNamesRejectedByValidate(t *testing.T) {
	for _, tc := range hostileNames {
		t.Run(tc.why, func(t *testing.T) {
			s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind,
				Metadata: spec.ObjectMeta{Name: tc.name}, Spec: spec.ServerSpec{Command: []string{"./bin/api"}}}
			spec.SetDefaults(&s)
			errs := spec.Validate([]spec.Server{s})
			if len(errs) == 0 {
				t.Fatalf("Validate accepted name %q (%s)", tc.name, tc.why)
			}
			if !hasField(errs, "metadata.name") {
				t.Errorf("Validate(%q): no error on metadata.name: %v", tc.name, errs)
			}
		})
	}
}

func TestHostileNamesRejectedByLoad(t *testing.T) {
	for _, tc := range hostileNames {
		t.Run(tc.why, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "procfleet.yaml")
			if err := os.WriteFile(file, []byte(serverDoc(tc.name)), 0o600); err != nil {
				t.Fatal(err)
			}
			fleet, err := spec.Load(file)
			if err == nil {
				t.Fatalf("Load accepted name %q (%s): %+v", tc.name, tc.why, fleet.Servers)
			}
			if fleet != nil {
				t.Errorf("Load returned a fleet with an error: %+v", fleet)
			}
			var list spec.ErrorList
			if !errors.As(err, &list) || !hasField(list, "metadata.name") {
				t.Errorf("Load(%q) = %v, want an error on metadata.name", tc.name, err)
			}
		})
	}
}

// A dependency name is a reference, not a file name, but it must not smuggle
// one in either.
func TestHostileDependsOnRejected(t *testing.T) {
	for _, dep := range []string{"../x", "/abs", "a/b", strings.Repeat("d", 64)} {
		s := spec.Server{APIVersion: spec.APIVersion, Kind: spec.Kind,
			Metadata: spec.ObjectMeta{Name: "api"},
			Spec:     spec.ServerSpec{Command: []string{"./bin/api"}, DependsOn: []string{dep}}}
		spec.SetDefaults(&s)
		if errs := spec.Validate([]spec.Server{s}); len(errs) == 0 {
			t.Errorf("Validate accepted dependsOn %q", dep)
		}
	}
}

func TestLongestValidNameAccepted(t *testing.T) {
	name := strings.Repeat("a", 62) + "0"
	file := filepath.Join(t.TempDir(), "procfleet.yaml")
	if err := os.WriteFile(file, []byte(serverDoc(name)), 0o600); err != nil {
		t.Fatal(err)
	}
	fleet, err := spec.Load(file)
	if err != nil {
		t.Fatalf("Load(63-character name): %v", err)
	}
	if _, ok := fleet.Get(name); !ok {
		t.Errorf("63-character name not loaded")
	}
}

// Resource bounds: huge input gives a clear error, never exhaustion.
func TestHugeFleetInputClearErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		setup func(t *testing.T) []string
		want  string
	}{
		{
			name: "file over 4 MiB",
			setup: func(t *testing.T) []string {
				f := filepath.Join(dir, "big.yaml")
				doc := serverDoc("api")
				b := []byte(doc + "# " + strings.Repeat("x", spec.MaxFileSize) + "\n")
				if err := os.WriteFile(f, b, 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{f}
			},
			want: "larger than",
		},
		{
			name: "more servers than MaxServers in one file",
			setup: func(t *testing.T) []string {
				var b strings.Builder
				for i := 0; i <= spec.MaxServers; i++ {
					fmt.Fprintf(&b, "---\napiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: s%d}\nspec: {command: [x]}\n", i)
				}
				f := filepath.Join(dir, "many.yaml")
				if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{f}
			},
			want: "too many servers",
		},
		{
			name: "more files than MaxFiles in a folder",
			setup: func(t *testing.T) []string {
				d := filepath.Join(dir, "files")
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
				for i := 0; i <= spec.MaxFiles; i++ {
					if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d.yaml", i)), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				return []string{d}
			},
			want: "too many fleet files",
		},
		{
			name: "one very long line",
			setup: func(t *testing.T) []string {
				f := filepath.Join(dir, "longline.yaml")
				b := serverDoc("api") + "  args: [" + strings.Repeat("a", spec.MaxFileSize-200) + "\n"
				if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{f}
			},
			want: "longline.yaml",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fleet, err := spec.Load(tc.setup(t)...)
			if err == nil {
				t.Fatalf("Load succeeded with %d servers", len(fleet.Servers))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error does not say %q: %.300s", tc.want, err)
			}
			if len(err.Error()) > 64<<10 {
				t.Errorf("Load error is %d bytes: bounded output expected", len(err.Error()))
			}
		})
	}
}

func hasField(errs spec.ErrorList, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}
