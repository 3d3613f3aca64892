//go:build !linux

package observe

import (
	"context"
	"net"
	"strconv"
)

// portAccepting dials both loopback addresses at once through the runtime's
// poller.
func portAccepting(ctx context.Context, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, portAcceptingTimeout)
	defer cancel()
	res := make(chan bool, 2)
	for _, host := range []string{"127.0.0.1", "::1"} {
		go func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err == nil {
				c.Close()
			}
			res <- err == nil
		}()
	}
	if <-res {
		return true
	}
	return <-res
}
