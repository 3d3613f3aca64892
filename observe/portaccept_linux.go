package observe

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// portAccepting connects to both loopback addresses at once from the
// calling goroutine: two non-blocking sockets and one poll(2), no
// goroutines and no round trip through the runtime's poller. On loopback
// the kernel answers a connect (SYN-ACK or RST) before connect(2) returns,
// so the poll is normally answered at once; it is bounded by
// portAcceptingTimeout and ctx's deadline (a cancel is seen before the
// connects, not during the poll).
func portAccepting(ctx context.Context, port int) bool {
	if ctx.Err() != nil || port <= 0 || port > 65535 {
		return false
	}
	deadline := time.Now().Add(portAcceptingTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The connects in progress; each is closed once answered, the rest on
	// return.
	pending := make([]unix.PollFd, 0, 2)
	defer func() {
		for _, p := range pending {
			_ = unix.Close(int(p.Fd))
		}
	}()
	for _, sa := range []unix.Sockaddr{
		&unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}},
		&unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}},
	} {
		family := unix.AF_INET
		if _, v6 := sa.(*unix.SockaddrInet6); v6 {
			family = unix.AF_INET6
		}
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			continue // no IPv6 here
		}
		err = unix.Connect(fd, sa)
		if errors.Is(err, unix.EINPROGRESS) {
			pending = append(pending, unix.PollFd{Fd: int32(fd), Events: unix.POLLOUT})
			continue
		}
		_ = unix.Close(fd)
		if err == nil {
			return true
		}
		// Refused, or no such address.
	}
	for len(pending) > 0 {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			return false
		}
		n, err := unix.Poll(pending, int(ms))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return false
		}
		still := pending[:0]
		accepted := false
		for _, p := range pending {
			if p.Revents == 0 {
				still = append(still, p)
				continue
			}
			soerr, err := unix.GetsockoptInt(int(p.Fd), unix.SOL_SOCKET, unix.SO_ERROR)
			_ = unix.Close(int(p.Fd))
			if err == nil && soerr == 0 {
				accepted = true
			}
		}
		pending = still
		if accepted {
			return true
		}
	}
	return false
}
