package api

import "golang.org/x/sys/unix"

// peerCredFD reads LOCAL_PEERCRED (the peer's effective uid at connect())
// and, for the log, LOCAL_PEERPID. Compile-checked only: no macOS machine
// was available.
func peerCredFD(fd int) (peer, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return peer{}, err
	}
	p := peer{UID: int(x.Uid)}
	if pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID); err == nil {
		p.PID = pid
	}
	return p, nil
}
