package logfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/procfleet/procfleet/internal/safefile"
)

// Defaults of Options.
const (
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 3
)

// Tuning of Rotate's copy.
const (
	// A copy round that finds less than this much new data is the last one
	// before the truncate.
	quietRound = 64 << 10
	// At most this many rounds chase a fast writer; then Rotate truncates
	// after reading whatever the file holds.
	maxRounds = 8
	// tmpSuffix marks the copy being written.
	tmpSuffix = ".tmp"
	// maxRemainder bounds the final read before the truncate, for a writer
	// faster than the copy; what it writes beyond is lost.
	maxRemainder = 16 << 20
	fileMode     = 0o600
)

// Options configure rotation. The zero value means the defaults.
type Options struct {
	// MaxBytes is the size at which RotateIfLarger rotates; 0 means 10 MiB.
	MaxBytes int64
	// Keep is how many rotated copies are kept (<name>.log.1 is the newest);
	// 0 means 3.
	Keep int
}

func (o Options) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return DefaultMaxBytes
}

func (o Options) keep() int {
	if o.Keep > 0 {
		return o.Keep
	}
	return DefaultKeep
}

// RotatedPath is the path of the n-th rotated copy of the log at path
// (1 is the newest).
func RotatedPath(path string, n int) string { return path + "." + strconv.Itoa(n) }

// RotateIfLarger rotates the log at path when it has reached MaxBytes. It
// reports whether it rotated. A missing log is not an error.
func RotateIfLarger(path string, opts Options) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rotate log %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() < opts.maxBytes() {
		return false, nil
	}
	return true, Rotate(path, opts)
}

// RotateDir rotates every *.log in dir that has reached MaxBytes and returns
// the paths it rotated, in name order. It goes on after an error and returns
// them joined; a missing dir is no error. It is Maintain without the stale
// check.
func RotateDir(dir string, opts Options) ([]string, error) {
	rotated, _, err := Maintain(dir, opts, nil)
	return rotated, err
}

// StaleCheck asks Maintain to remove the files of the servers that left the
// fleet, as RemoveStale does with the same arguments.
type StaleCheck struct {
	Keep func(name string) bool
	Age  time.Duration
	Now  time.Time
}

// Maintain is what the reconciler does to the logs folder dir on each
// periodic resync, from one listing of it: when stale is not nil, first
// RemoveStale (the files of a server it removes are not rotated), then
// RotateDir. It stats each *.log relative to the folder, and each file of a
// server stale.Keep does not keep; the files of a server kept cost no stat
// of their own. It returns the paths rotated and removed, each sorted, and
// the errors joined; a missing dir is no error.
func Maintain(dir string, opts Options, stale *StaleCheck) (rotated, removed []string, err error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("look after the logs in %s: %w", dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, nil, fmt.Errorf("look after the logs in %s: %w", dir, err)
	}
	var errs []error
	var gone map[string]bool // servers whose files were removed
	if stale != nil {
		removed, gone, err = removeStaleIn(d, dir, names, stale)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range names {
		server, isLog := strings.CutSuffix(name, logExt)
		if !isLog || gone[server] {
			continue
		}
		st, err := statIn(d, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rotate log %s: %w", filepath.Join(dir, name), err))
			continue
		}
		if !st.regular || st.size < opts.maxBytes() {
			continue
		}
		p := filepath.Join(dir, name)
		rotated = append(rotated, p)
		if err := Rotate(p, opts); err != nil {
			errs = append(errs, err)
		}
	}
	slices.Sort(rotated)
	return rotated, removed, errors.Join(errs...)
}

// Rotate copies the log at path to <path>.1.tmp, cuts what it copied from
// the log while its writers keep their O_APPEND descriptors, shifts the
// older copies up by one (dropping those beyond Keep), and renames the copy
// to <path>.1 (see the package doc for what is guaranteed). An empty or
// missing log is left alone.
func Rotate(path string, opts Options) error {
	f, err := safefile.Open(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	if fi.Size() == 0 {
		return nil
	}

	tmp := RotatedPath(path, 1) + tmpSuffix
	if _, err := os.Lstat(tmp); err == nil {
		// A copy left by a crash between the cut and the rename: it is the
		// newest rotated output, so it takes the place of .1, after the
		// shift that crash did not finish (none is left to do once .1 has
		// moved: the shift ends with it).
		if _, err := os.Lstat(RotatedPath(path, 1)); err == nil {
			if err := shift(path, opts.keep()); err != nil {
				return err
			}
		}
		if err := os.Rename(tmp, RotatedPath(path, 1)); err != nil {
			return fmt.Errorf("rotate log %s: recover %s: %w", path, tmp, err)
		}
	}
	out, err := safefile.Open(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fileMode)
	if err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	cut, err := copyTruncate(f, out)
	if err != nil {
		_ = out.Close()
		if !cut {
			_ = os.Remove(tmp)
		}
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	// The live file is already cut: from here on, a failure leaves the
	// copy in tmp, which the next Rotate recovers. The older copies are
	// shifted now, while tmp exists, so that a follower never finds
	// <path>.1 missing without a rotation under way (see Fleet).
	if err := out.Close(); err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	if err := shift(path, opts.keep()); err != nil {
		return err
	}
	if err := os.Rename(tmp, RotatedPath(path, 1)); err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	return nil
}

// shift renames path.(keep-1) -> path.keep, ..., path.1 -> path.2, which
// drops the old path.keep; missing copies are skipped.
func shift(path string, keep int) error {
	for i := keep - 1; i >= 1; i-- {
		err := os.Rename(RotatedPath(path, i), RotatedPath(path, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate log %s: %w", path, err)
		}
	}
	if keep == 1 {
		if err := os.Remove(RotatedPath(path, 1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate log %s: %w", path, err)
		}
	}
	return nil
}

// errNoCollapse: collapsePrefix cannot be used here.
var errNoCollapse = errors.New("collapse range not supported")

// disableCollapse forces the copy-then-truncate path (tests).
var disableCollapse = false

// copyTruncate copies f to out while f grows, then removes what was copied
// from f: with collapsePrefix where the file system can (nothing lost), else
// by reading the remainder and truncating at once. cut reports whether f
// was cut (then out holds what left it, even on error).
func copyTruncate(f, out *os.File) (cut bool, err error) {
	var copied int64
	for round := 0; round < maxRounds; round++ {
		fi, err := f.Stat()
		if err != nil {
			return false, err
		}
		n := fi.Size() - copied
		if n <= 0 {
			break
		}
		if _, err := io.Copy(out, io.NewSectionReader(f, copied, n)); err != nil {
			return false, fmt.Errorf("copy: %w", err)
		}
		copied += n
		if n < quietRound {
			break
		}
	}
	// Make the bulk durable before the original is cut.
	if err := out.Sync(); err != nil {
		return false, fmt.Errorf("sync copy: %w", err)
	}
	if n, err := collapsePrefix(f, copied); err == nil {
		// The copy keeps exactly what left the live file.
		if err := out.Truncate(n); err != nil {
			return true, fmt.Errorf("trim copy: %w", err)
		}
		return true, nil
	}
	// The remainder: read up to end of file, then truncate with nothing in
	// between. Bytes written after this read returns end of file and before
	// the truncate are the only ones lost.
	rest, err := io.ReadAll(io.NewSectionReader(f, copied, maxRemainder))
	if err != nil {
		return false, fmt.Errorf("copy: %w", err)
	}
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("truncate: %w", err)
	}
	if _, err := out.Write(rest); err != nil {
		return true, fmt.Errorf("copy: %w", err)
	}
	return true, nil
}

// Files returns the log at path and its rotated copies that exist, oldest
// first, the live log last (when it exists).
func Files(path string, opts Options) []string {
	var files []string
	for i := opts.keep(); i >= 1; i-- {
		if fi, err := os.Lstat(RotatedPath(path, i)); err == nil && fi.Mode().IsRegular() {
			files = append(files, RotatedPath(path, i))
		}
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
		files = append(files, path)
	}
	return files
}

// fileStat is what Maintain reads of a file of the logs folder.
type fileStat struct {
	size    int64
	mtime   time.Time
	regular bool
}
