package actuate

import (
	"os"
	"sync"
)

// folderSyncs holds one *folderSync per folder path.
var folderSyncs sync.Map

// folderSync groups the fsyncs of one folder (a group commit): an fsync of
// a folder makes durable every rename done in it before the fsync began, so
// callers that arrive while one runs share the next one instead of each
// issuing its own. A cold start's spawns, each ending with a record renamed
// into servers/, then pay one folder fsync per group instead of one each.
type folderSync struct {
	laterRounds
	err error // the last fsync's
}

// syncDir returns once an fsync of dir that began after the call was made
// has ended, with that fsync's error: what was renamed in dir before the
// call is then durable.
func syncDir(dir string) error {
	v, ok := folderSyncs.Load(dir)
	if !ok {
		v, _ = folderSyncs.LoadOrStore(dir, &folderSync{})
	}
	s := v.(*folderSync)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.await(func() {
		s.mu.Unlock()
		err := fsyncFolder(dir)
		s.mu.Lock()
		s.err = err
	})
	return s.err
}

// fsyncFolder is fsyncDir; tests count and hold the fsyncs through it.
var fsyncFolder = fsyncDir

// fsyncDir opens dir, fsyncs it and closes it.
func fsyncDir(dir string) error {
	df, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := df.Sync()
	cerr := df.Close()
	if serr != nil {
		return serr
	}
	return cerr
}
