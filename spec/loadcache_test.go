package spec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
		for i := range want.Servers {
			if !bytes.Equal(got.Fingerprint(i), want.Fingerprint(i)) {
				t.Fatalf("server %s: Loader's fingerprint %q, Load's %q", want.Servers[i].Metadata.Name, got.Fingerprint(i), want.Fingerprint(i))
			}
		}
		got.prints = nil // computed once per document by a Loader only
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

// TestLoaderDerivesOnlyWhatChanged: instances, warnings and fingerprints
// are computed again only for the servers whose document, env files or
// environment changed, and are exactly Load's (lines included) after a
// server above others grew, an env file changed, and the environment
// changed.
func TestLoaderDerivesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	path, envPath := filepath.Join(dir, "procfleet.yaml"), filepath.Join(dir, "app.env")
	write := func(file, s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Every server has values placed by line: env entries (one a reference
	// that stays as written, one a shell-style ${X}), a ${Y} in its args,
	// and an env file with a line procfleet ignores.
	doc := func(i int, extra string) string {
		return server(fmt.Sprintf("s%02d", i), fmt.Sprintf(
			"  args: [--gen, \"${Y}\", \"$(A)\"]\n  port: %d\n  envFile: [app.env]\n  env:\n%s  - name: A\n    value: \"$(MISSING)-$(PORT)\"\n  - name: B\n    value: \"${X}\"\n", 30000+i, extra))
	}
	fleet := func(extra map[int]string) string {
		docs := make([]string, 20)
		for i := range docs {
			docs[i] = doc(i, extra[i])
		}
		return strings.Join(docs, "---\n")
	}
	derived := func(l *Loader) int { return l.cache.derived }
	var l Loader
	write(envPath, "PORT=1\nFROM_FILE=$(A)\n")
	write(path, fleet(nil))
	t.Setenv("PROCFLEET_TEST_INHERITED", "1")
	f, _ := loadBoth(t, &l, path)
	if len(f.Warnings) == 0 {
		t.Fatal("no warnings: the fleet does not test their lines")
	}
	steps := []struct {
		what string
		do   func()
		want int // servers derived again
	}{
		{"the same files", func() {}, 0},
		{"one server edited", func() { write(path, fleet(map[int]string{7: "  - name: C\n    value: c\n"})) }, 1},
		{"a server near the top grew: the ones below moved", func() {
			write(path, fleet(map[int]string{1: "  - name: D\n    value: d\n  - name: E\n    value: e\n", 7: "  - name: C\n    value: c\n"}))
		}, 1},
		{"the env file changed", func() { write(envPath, "PORT=1\nFROM_FILE=$(A)\nMORE=x\n") }, 20},
		{"procfleet's environment changed", func() { t.Setenv("PROCFLEET_TEST_INHERITED", "2") }, 20},
		{"a server above the others shrank", func() { write(path, fleet(map[int]string{7: "  - name: C\n    value: c\n"})) }, 1},
	}
	for _, st := range steps {
		st.do()
		before := derived(&l)
		loadBoth(t, &l, path)
		if got := derived(&l) - before; got != st.want {
			t.Errorf("%s: %d servers derived again, want %d", st.what, got, st.want)
		}
	}
}

// TestLoaderChecksOnlyWhatChanged: a Loader runs a server's own
// validation checks again only when its document changed, and a changed
// document that fails them fails the load as Load fails it (loadBoth
// compares the errors), before and after it is kept; the checks across
// servers (duplicate names, ports) still see every server.
func TestLoaderChecksOnlyWhatChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "procfleet.yaml")
	type change struct {
		port  int
		extra string
	}
	fleet := func(changes map[int]change) string {
		docs := make([]string, 10)
		for i := range docs {
			c := changes[i]
			if c.port == 0 {
				c.port = 30000 + i
			}
			docs[i] = server(fmt.Sprintf("s%02d", i), fmt.Sprintf("  port: %d\n%s", c.port, c.extra))
		}
		return strings.Join(docs, "---\n")
	}
	bad := change{extra: "  restartPolicy: Sometimes\n"}
	var l Loader
	steps := []struct {
		what    string
		changes map[int]change
		fails   bool
		want    int // servers whose own checks ran
	}{
		{"the first load", nil, false, 10},
		{"the same file", nil, false, 0},
		{"one server edited", map[int]change{3: {extra: "  args: [x]\n"}}, false, 1},
		{"one server made invalid", map[int]change{3: {extra: "  args: [x]\n"}, 5: bad}, true, 1},
		// A server that failed them is checked at every load.
		{"still invalid, another edited", map[int]change{3: {extra: "  args: [x]\n"}, 4: {extra: "  args: [y]\n"}, 5: bad}, true, 2},
		{"fixed", map[int]change{3: {extra: "  args: [x]\n"}, 4: {extra: "  args: [y]\n"}}, false, 1},
		{"a port taken twice", map[int]change{3: {extra: "  args: [x]\n"}, 4: {extra: "  args: [y]\n"}, 7: {port: 30006}}, true, 1},
		// s07's first text is no longer kept: it is decoded and checked.
		{"the port given back", map[int]change{3: {extra: "  args: [x]\n"}, 4: {extra: "  args: [y]\n"}}, false, 1},
		{"the same file again", map[int]change{3: {extra: "  args: [x]\n"}, 4: {extra: "  args: [y]\n"}}, false, 0},
	}
	for _, st := range steps {
		if err := os.WriteFile(path, []byte(fleet(st.changes)), 0o644); err != nil {
			t.Fatal(err)
		}
		before := l.cache.checked
		f, _ := loadBoth(t, &l, path)
		if (f == nil) != st.fails {
			t.Errorf("%s: loaded %v, want failed %v", st.what, f != nil, st.fails)
		}
		if got := l.cache.checked - before; got != st.want {
			t.Errorf("%s: %d servers checked, want %d", st.what, got, st.want)
		}
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
			c.begin()
			got, gerr := c.parse("fuzz.yaml", data)
			c.end()
			want, werr := parse("fuzz.yaml", data)
			got = slices.Clone(got)
			for i := range got {
				got[i].memo = nil // the cache's own
			}
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
