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
	mu      sync.Mutex
	ended   *sync.Cond
	begun   uint64 // fsyncs begun
	done    uint64 // the last fsync ended (fsyncs run one at a time)
	err     error  // its error
	running bool
	waiting int // callers blocked until a later fsync ends (tests read it)
}

// syncDir returns once an fsync of dir that began after the call was made
// has ended, with that fsync's error: what was renamed in dir before the
// call is then durable.
func syncDir(dir string) error {
	v, ok := folderSyncs.Load(dir)
	if !ok {
		ns := &folderSync{}
		ns.ended = sync.NewCond(&ns.mu)
		v, _ = folderSyncs.LoadOrStore(dir, ns)
	}
	return v.(*folderSync).sync(dir)
}

func (s *folderSync) sync(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Every fsync numbered need or later begins after this point.
	need := s.begun + 1
	for s.done < need {
		if s.running {
			s.waiting++
			s.ended.Wait()
			s.waiting--
			continue
		}
		s.running = true
		s.begun++
		n := s.begun
		s.mu.Unlock()
		err := fsyncFolder(dir)
		s.mu.Lock()
		s.running = false
		s.done, s.err = n, err
		s.ended.Broadcast()
	}
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
