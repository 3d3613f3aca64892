package reconciler

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/spec"
)

// TestFleetWatcherGivenLoader: a watcher given the loader that read the
// files before (as up does, to check them before it locks) starts from
// the files as they are now, the same fleet spec.Load reads, also when
// a file changed between the two reads.
func TestFleetWatcherGivenLoader(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "procfleet.yaml")
	writeFile(t, main, fleetYAML(serverYAML("a", "1"), serverYAML("b", "1")))
	loader := new(spec.Loader)
	if _, err := loader.Load(main); err != nil {
		t.Fatal(err)
	}
	writeFile(t, main, fleetYAML(serverYAML("a", "1"), serverYAML("b", "2"), serverYAML("c")))

	w, err := NewFleetWatcher(FleetWatcherConfig{Paths: []string{main}, Log: testr.New(t), Loader: loader})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.backend.close() })
	got, errs := w.Fleet()
	if errs != nil {
		t.Fatal(errs)
	}
	want, err := spec.Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Servers, want.Servers) {
		t.Fatalf("the watcher's fleet differs from spec.Load's:\n%+v\nwant\n%+v", got.Servers, want.Servers)
	}
	if b, ok := got.Get("b"); !ok || len(b.Spec.Args) != 1 || b.Spec.Args[0] != "2" {
		t.Fatalf("b = %+v, %v; want the args written after the loader's first read", b, ok)
	}
}
