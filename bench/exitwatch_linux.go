package main

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// exitPollSlice is how long one poll(2) of watchExit blocks before it looks
// whether it was stopped: it bounds stop's wait, not the exit's timing
// (the poll returns as soon as the pidfd is readable).
const exitPollSlice = 50 // ms

// watchExit pins pid with a pidfd and returns a channel that receives the
// moment the pidfd became readable (the process exited), as a goroutine
// blocked in poll(2) saw it; stop ends the watch and closes the pidfd. The
// crash scenario tells with it the kernel's teardown of a killed server
// (SIGKILL to exit) from the supervisor's share (exit to the new stamp).
func watchExit(pid int) (seen <-chan time.Time, stop func(), err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	ch := make(chan time.Time, 1)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, exitPollSlice)
			if n > 0 {
				ch <- time.Now()
				return
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			select {
			case <-quit:
				return
			default:
			}
		}
	}()
	return ch, func() { close(quit); <-done }, nil
}
