package logfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultStaleAge is how long the logs and events of a server that is no
// longer in the fleet are kept after their last write: long enough to look
// at what a removed server printed over a long weekend, short enough that
// the state folder does not keep every name ever used.
const DefaultStaleAge = 7 * 24 * time.Hour

// RemoveStale removes from the logs folder dir the files of the servers
// for which keep returns false, once none of them has been written for age
// (0 means DefaultStaleAge) before now: <name>.log, its rotated copies
// <name>.log.N (and an interrupted rotation's <name>.log.N.tmp), and
// <name>.events.jsonl with its rotated copy. keep should hold the servers
// of the fleet files and those with an ownership record (a server still
// running is never stale). Files that are not regular, and files moved
// aside (<file>.corrupt-<time>), are left alone. It returns the paths it
// removed, sorted; it goes on after an error and returns the errors
// joined. The caller is the state folder's lock holder (up's rotation
// pass).
func RemoveStale(dir string, keep func(name string) bool, age time.Duration, now time.Time) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove stale logs in %s: %w", dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("remove stale logs in %s: %w", dir, err)
	}
	removed, _, err := removeStaleIn(d, dir, names, &StaleCheck{Keep: keep, Age: age, Now: now})
	return removed, err
}

// removeStaleIn is RemoveStale over names, the listing of the folder d at
// dir. It also returns the servers whose files it removed.
func removeStaleIn(d *os.File, dir string, names []string, sc *StaleCheck) (removed []string, gone map[string]bool, err error) {
	age := sc.Age
	if age <= 0 {
		age = DefaultStaleAge
	}
	type server struct {
		files  []string
		newest time.Time
	}
	byName := map[string]*server{}
	for _, fname := range names {
		name, ok := serverOf(fname)
		if !ok || sc.Keep(name) {
			continue
		}
		st, err := statIn(d, fname)
		if err != nil || !st.regular {
			continue // gone meanwhile, or not ours to remove
		}
		s := byName[name]
		if s == nil {
			s = &server{}
			byName[name] = s
		}
		s.files = append(s.files, filepath.Join(dir, fname))
		if st.mtime.After(s.newest) {
			s.newest = st.mtime
		}
	}
	var errs []error
	for name, s := range byName {
		if sc.Now.Sub(s.newest) < age {
			continue
		}
		if gone == nil {
			gone = map[string]bool{}
		}
		gone[name] = true
		for _, p := range s.files {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove stale log %s: %w", p, err))
				continue
			}
			removed = append(removed, p)
		}
	}
	sort.Strings(removed)
	return removed, gone, errors.Join(errs...)
}

// serverOf returns the server a file of the logs folder belongs to: a
// server's name is a DNS label (no dot), followed by one of the suffixes
// the logs folder holds.
func serverOf(file string) (string, bool) {
	name, _, ok := strings.Cut(file, ".")
	if !ok || name == "" {
		return "", false
	}
	rest := file[len(name):] // from the dot on
	switch {
	case rest == logExt, rest == eventsExt:
		return name, true
	case strings.HasPrefix(rest, logExt+"."):
		if n := strings.TrimSuffix(rest[len(logExt)+1:], tmpSuffix); n != "" && strings.Trim(n, "0123456789") == "" {
			return name, true
		}
	case rest == eventsExt+".1":
		return name, true
	}
	return "", false
}
