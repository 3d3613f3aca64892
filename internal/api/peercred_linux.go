package api

import "golang.org/x/sys/unix"

// peerCredFD reads SO_PEERCRED: the credentials the peer had at connect().
func peerCredFD(fd int) (peer, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return peer{}, err
	}
	return peer{UID: int(u.Uid), PID: int(u.Pid)}, nil
}
