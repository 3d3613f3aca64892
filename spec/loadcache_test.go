package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fleetOf renders n servers, one document each, server i with arg gen.
func fleetOf(n int, gen func(i int) int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "%smetadata:\n  name: s%04d\nspec:\n  command: [./srv]\n  args: [--port, \"%d\", --gen, \"%d\"]\n  port: %d\n", header, i, 20000+i, gen(i), 20000+i)
	}
	return b.String()
}

// loadBoth loads path through l and through Load and fails unless they
// agree; it returns the fleet and how many documents l decoded.
func loadBoth(t *testing.T, l *Loader, path string) (*Fleet, int) {
	t.Helper()
	before := l.cache.decoded
	got, gerr := l.Load(path)
	want, werr := Load(path)
	if !reflect.DeepEqual(gerr, werr) {
		t.Fatalf("Loader.Load error %v, Load error %v", gerr, werr)
	}
	if got != nil && want != nil {
		got.Environ, want.Environ = nil, nil // os.Environ() of each call
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Loader.Load and Load differ:\n%+v\n%+v", got, want)
	}
	return got, l.cache.decoded - before
}

func TestLoaderDecodesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "procfleet.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	one := func(int) int { return 1 }
	var l Loader
	write(fleetOf(200, one))
	if _, n := loadBoth(t, &l, path); n != 200 {
		t.Fatalf("first load decoded %d documents, want 200", n)
	}
	if _, n := loadBoth(t, &l, path); n != 0 {
		t.Fatalf("load of the same file decoded %d documents, want 0", n)
	}
	write(fleetOf(200, func(i int) int { return 1 + i/150 })) // s0150.. edited
	f, n := loadBoth(t, &l, path)
	if n != 50 {
		t.Fatalf("an edit of 50 servers decoded %d documents, want 50", n)
	}
	if s, _ := f.Get("s0199"); s.Spec.Args[3] != "2" {
		t.Fatalf("s0199 args %q: the edit was not read", s.Spec.Args)
	}
	// A server added at the top moves every other one by lines and index:
	// they are not decoded again, and their lines are the file's.
	added := header + "metadata: {name: a-first}\nspec: {command: [./x]}\n---\n# a comment\n\n"
	write(added + fleetOf(200, func(i int) int { return 1 + i/150 }))
	f, n = loadBoth(t, &l, path)
	if n != 2 { // the new one, and s0000, now after a marker and a comment
		t.Fatalf("a server added at the top decoded %d documents, want 2", n)
	}
	if s, _ := f.Get("s0001"); s.Source.Line != 17 || s.Source.Doc != 2 || s.Source.Fields["spec.port"] != 24 {
		t.Fatalf("s0001 moved to %+v, want line 17, doc 2, spec.port at 24", s.Source)
	}
	// An error anywhere is reported as Load reports it, and the next good
	// load still finds the documents it kept.
	write(fleetOf(200, one) + "---\n" + header + "metadata: {name: bad}\nspec: {command: [x], port: \"80\"}\n")
	loadBoth(t, &l, path)
	write(fleetOf(200, one))
	if _, n := loadBoth(t, &l, path); n > 150 {
		t.Fatalf("after an error, a load decoded %d documents, want at most the 150 of the last good load", n)
	}
}

// The cache decodes a part of a file alone only where that cannot change
// what the file means; every case here must load as Load loads it.
func TestLoaderAgreesWithLoad(t *testing.T) {
	a, b := server("a", "  port: 8080\n"), server("b", "  args: [x]\n")
	cases := map[string]string{
		"one":              a,
		"leading marker":   "---\n" + a + "---\n" + b,
		"comment first":    "# fleet\n\n---\n" + a + "---\n" + b,
		"marker content":   a + "--- # second\n" + b,
		"empty documents":  "---\n---\n" + a + "---\n---\n" + b + "---\n",
		"crlf":             strings.ReplaceAll(a+"---\n"+b, "\n", "\r\n"),
		"lone cr":          strings.ReplaceAll(a, "\n", "\r"),
		"directive":        "%YAML 1.2\n---\n" + a,
		"end marker":       a + "...\n---\n" + b,
		"marker not alone": a + "---x: 1\n",
		"block scalar":     header + "metadata: {name: c}\nspec:\n  command: [x]\n  args:\n  - |\n    line\n---\n" + b,
		"alias across":     header + "metadata: {name: c}\nspec: &s {command: [x]}\n---\n" + header + "metadata: {name: d}\nspec: *s\n",
		"duplicate names":  a + "---\n" + a,
		"syntax error":     a + "---\n" + header + "metadata: {name: [\n",
		"other kind":       "apiVersion: v1\nkind: Pod\n---\n" + b,
		"not a mapping":    "- a\n---\n" + b,
		"tab after marker": a + "---\t\n" + b,
	}
	dir := t.TempDir()
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			var l Loader
			loadBoth(t, &l, path)
			loadBoth(t, &l, path) // from the cache
		})
	}
}

// FuzzDocCache: decoding a file through the cache, cold, warm and after
// the file grew a document at its top, gives what decoding it whole gives.
func FuzzDocCache(f *testing.F) {
	f.Add([]byte(server("a", "  port: 8080\n") + "---\n" + server("b", "  args: [x]\n")))
	f.Add([]byte("# c\n---\n" + server("a", "") + "--- \n\n---\n" + server("b", "")))
	f.Add([]byte(server("a", "  args:\n  - |\n    x\n") + "---\n" + server("b", "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c docCache
		check := func(data []byte) {
			c.next = map[docKey]*docEntry{}
			got, gerr := c.parse("fuzz.yaml", data)
			c.prev, c.next = c.next, nil
			want, werr := parse("fuzz.yaml", data)
			if !reflect.DeepEqual(gerr, werr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("cache gave %+v, %v; parse gave %+v, %v", got, gerr, want, werr)
			}
		}
		check(data)
		check(data)
		check(append([]byte(server("top", "")+"---\n"), data...))
	})
}

// BenchmarkLoaderEdit is what a save of one server of a 1,000-server fleet
// file costs the loader that read the file before: each op loads the file
// with one document changed. BenchmarkLoad1000File is the same load
// without a Loader, for comparison.
func BenchmarkLoaderEdit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "procfleet.yaml")
	versions := [2][]byte{
		[]byte(fleetOf(1000, func(int) int { return 1 })),
		[]byte(fleetOf(1000, func(i int) int { return 1 + i/999 })),
	}
	var l Loader
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, versions[i%2], 0o644); err != nil {
			b.Fatal(err)
		}
		i++
		b.StartTimer()
		if f, err := l.Load(path); err != nil || len(f.Servers) != 1000 {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad1000File(b *testing.B) {
	path := filepath.Join(b.TempDir(), "procfleet.yaml")
	if err := os.WriteFile(path, []byte(fleetOf(1000, func(int) int { return 1 })), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if f, err := Load(path); err != nil || len(f.Servers) != 1000 {
			b.Fatal(err)
		}
	}
}
