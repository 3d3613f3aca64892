package observe

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// Who holds a listening socket is found by reading the /proc/PID/fd links
// of every process: with a few hundred processes, tens of milliseconds of
// CPU. A fleet whose ports are held by another copy of it asks that for
// every server at once, and again at each re-check of its PortConflict
// (100 ms to 1 s apart): 100 such servers kept an up at 60% of a CPU. So
// one scan serves every caller that waits while it runs, and it records
// the holders of every listening socket, not only those asked about; a
// later caller is answered from it when each pid it names still holds the
// socket (one process's descriptors read, not every process's).

// ownerScan is one scan of every process's descriptors for the holders of
// the sockets that were listening when it began.
type ownerScan struct {
	seq    uint64
	done   chan struct{} // closed when the fields below are set
	owners map[uint64][]int
	denied bool
	err    error
}

// ownerScans is the latest scan, running or done.
var ownerScans struct {
	mu   sync.Mutex
	seq  uint64
	last *ownerScan
}

// socketOwnersShared fills inodes (socket inode -> pids) as socketOwners
// does, with the same denied, from the latest scan when it found every
// inode asked about and each pid it names still holds it; otherwise from a
// scan that began after this call did (joined when one is running, else
// run here). Inodes that are not listening sockets are not found.
func socketOwnersShared(inodes map[uint64][]int) (denied bool, err error) {
	ownerScans.mu.Lock()
	mine := ownerScans.seq
	s := ownerScans.last
	ownerScans.mu.Unlock()
	if s != nil {
		<-s.done // a running scan is waited for: it may answer this call
		if s.err == nil && s.answers(inodes) {
			return s.denied, nil
		}
	}
	ownerScans.mu.Lock()
	s = ownerScans.last
	if s == nil || s.seq <= mine {
		// None began after this call did: a fresh one, which callers
		// arriving meanwhile join.
		ownerScans.seq++
		s = &ownerScan{seq: ownerScans.seq, done: make(chan struct{})}
		ownerScans.last = s
		ownerScans.mu.Unlock()
		s.run()
	} else {
		ownerScans.mu.Unlock()
		<-s.done
	}
	if s.err != nil {
		return false, s.err
	}
	for ino := range inodes {
		inodes[ino] = append([]int(nil), s.owners[ino]...)
	}
	return s.denied, nil
}

// run scans and then wakes the callers that joined it.
func (s *ownerScan) run() {
	defer close(s.done)
	s.owners, s.denied, s.err = scanListenOwners()
}

// answers fills inodes from a finished scan s when s found a holder of
// each of them and every holder it names still holds it now; false
// (inodes unchanged) otherwise.
func (s *ownerScan) answers(inodes map[uint64][]int) bool {
	for ino := range inodes {
		pids := s.owners[ino]
		if len(pids) == 0 {
			return false
		}
		for _, pid := range pids {
			if !holdsSocket(pid, ino) {
				return false
			}
		}
	}
	for ino := range inodes {
		inodes[ino] = append([]int(nil), s.owners[ino]...)
	}
	return true
}

// holdsSocket reports whether process pid has a descriptor on socket ino.
func holdsSocket(pid int, ino uint64) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	fds, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(dir + fd); err == nil {
			if got, ok := socketInode(link); ok && got == ino {
				return true
			}
		}
	}
	return false
}

// scanListenOwners lists the listening sockets of this network namespace
// and finds their holders among every process's descriptors.
func scanListenOwners() (owners map[uint64][]int, denied bool, err error) {
	listening, err := listeningInodes()
	if err != nil {
		return nil, false, fmt.Errorf("list listening sockets: %w", err)
	}
	owners = make(map[uint64][]int, len(listening))
	for ino := range listening {
		owners[ino] = nil
	}
	denied, err = socketOwners(owners)
	return owners, denied, err
}

// listeningInodes returns the inodes of every TCP socket listening in this
// network namespace (IPv4 and IPv6).
func listeningInodes() (map[uint64]bool, error) {
	entries, err := listenEntries(0)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]bool, len(entries))
	for _, e := range entries {
		if e.State == tcpListenState {
			out[e.Inode] = true
		}
	}
	return out, nil
}
