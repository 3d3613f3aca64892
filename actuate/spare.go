package actuate

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// spareDir (servers/.spare) holds record inodes out of use. A record write
// takes its temp file from it instead of creating one, the inode a rename
// replaces goes back to it, and RemoveRecord moves a record there instead
// of unlinking it: starting and stopping servers then neither allocates
// nor frees inodes. On ext4 without a journal (these VMs' root file
// system) each allocation scans past every inode of its group freed in
// the last dirty_expire interval (30 s), so a burst of starts after a
// stop grows quadratically: 1 ms per record write after 2,000 writes,
// against 74 µs flat with spares. Nothing reads a spare: its stale
// content is overwritten before it is renamed anywhere.
const spareDir = ".spare"

// maxSpares bounds the spares kept: beyond it a replaced or removed
// record is unlinked as before. It covers a fleet of a few thousand
// servers stopped and started again, at one inode each.
const maxSpares = 4096

// sparePool is the StateDir's list of spare names. The list is a hint: a
// spare is taken by renaming it to a temp name, which only one taker can
// do, so two pools over one folder (two StateDirs, two processes) never
// write the same inode.
type sparePool struct {
	mu     sync.Mutex
	loaded bool
	names  []string
}

// spareDirPath is the folder of d's spares.
func (d *StateDir) spareDirPath() string { return filepath.Join(d.Path, serversDir, spareDir) }

// takeSpare returns a spare name to try, or false when there is none.
func (d *StateDir) takeSpare() (string, bool) {
	p := &d.spares
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loadLocked(d.spareDirPath())
	if len(p.names) == 0 {
		return "", false
	}
	n := p.names[len(p.names)-1]
	p.names = p.names[:len(p.names)-1]
	return n, true
}

// newSpareName names one more spare, or returns false when the pool holds
// maxSpares (those on disk included).
func (d *StateDir) newSpareName() (string, bool) {
	p := &d.spares
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loadLocked(d.spareDirPath())
	if len(p.names) >= maxSpares {
		return "", false
	}
	return "i" + strconv.FormatUint(rand.Uint64(), 36), true
}

// giveSpare adds name, a file now in the spare folder, to the pool.
func (d *StateDir) giveSpare(name string) {
	p := &d.spares
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = append(p.names, name)
}

// loadLocked lists the spare folder dir once, at the pool's first use.
// p.mu is held.
func (p *sparePool) loadLocked(dir string) {
	if p.loaded {
		return
	}
	p.loaded = true
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			p.names = append(p.names, e.Name())
		}
	}
}

// writeSpare writes data to a spare, renamed first to tmp (in any folder of
// the state folder), and syncs it when sync is set.
// It returns false when no spare could be used (none left, or each one
// tried was gone or not a plain file of one link); the caller then creates
// a temp file as before.
func (d *StateDir) writeSpare(tmp string, data []byte, sync bool) (bool, error) {
	for {
		name, ok := d.takeSpare()
		if !ok {
			return false, nil
		}
		if err := os.Rename(filepath.Join(d.spareDirPath(), name), tmp); err != nil {
			continue // taken by another writer, or removed by hand
		}
		f, err := os.OpenFile(tmp, os.O_WRONLY|noFollow, 0)
		if err != nil {
			_ = os.Remove(tmp)
			continue
		}
		// One link only: a spare that is also a record (a link made by
		// keepReplaced whose rename a crash of the machine lost) is never
		// written; dropping its spare name leaves the record as it is. A
		// file of another user (a record that was not trusted) is not
		// written either.
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || linkCount(fi) != 1 || !ownFile(fi) {
			_ = f.Close()
			_ = os.Remove(tmp)
			continue
		}
		return true, writeSynced(f, tmp, data, sync)
	}
}

// writeSynced makes f hold exactly data, mode 0600, synced when sync is
// set, and closes it; on error it removes path (f's name).
func writeSynced(f *os.File, path string, data []byte, sync bool) error {
	err := f.Chmod(recordMode)
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		// Shrinking within the file's one block frees nothing: no
		// block is given back (nor discarded) and none allocated.
		err = f.Truncate(int64(len(data)))
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// keepReplaced links the file at path, about to be replaced by a rename
// over it, into the spare folder. It returns the spare's name, to give to
// the pool once the rename is done (so that nobody writes the inode while
// path still names it), or "" when nothing was linked (no file there, the
// pool full).
func (d *StateDir) keepReplaced(path string) string {
	name, ok := d.newSpareName()
	if !ok {
		return ""
	}
	if err := os.Link(path, filepath.Join(d.spareDirPath(), name)); err != nil {
		return "" // no file at path (or no spare folder: then unlinked as before)
	}
	return name
}

// replaced ends keepReplaced: after a successful rename the spare joins
// the pool; after a failed one it is unlinked (it is still the file at
// path).
func (d *StateDir) replaced(spare string, renamed bool) {
	if spare == "" {
		return
	}
	if renamed {
		d.giveSpare(spare)
		return
	}
	_ = os.Remove(filepath.Join(d.spareDirPath(), spare))
}

// retire removes the file at path (a record) by moving it into the spare
// folder, or unlinks it when the pool is full or the move fails. A missing
// file is fs.ErrNotExist.
func (d *StateDir) retire(path string) error {
	if name, ok := d.newSpareName(); ok {
		err := renameInto(path, filepath.Join(d.spareDirPath(), name))
		if err == nil {
			d.giveSpare(name)
			return nil
		}
	}
	return os.Remove(path) // also when path is missing: fs.ErrNotExist
}

// ownFile reports whether fi belongs to this process's effective user.
func ownFile(fi fs.FileInfo) bool {
	uid, ok := fileOwner(fi)
	return ok && uid == os.Geteuid()
}
