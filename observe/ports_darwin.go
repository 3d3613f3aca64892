package observe

// macOS code is compile-checked only (GOOS=darwin go build / go vet).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// lsofTimeout bounds one lsof run.
const lsofTimeout = 5 * time.Second

// Listeners runs `lsof -nP -l -iTCP:PORT -sTCP:LISTEN -a -F pcun` (macOS
// offers no listener table without cgo or libproc). lsof sees only this
// user's processes unless run as root: when it reports nothing, this is not
// root, and the port accepts connections, one Listener with
// OwnerVisible=false is returned. Inode is 0.
func Listeners(port int) ([]Listener, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("list listeners on port %d: invalid port", port)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lsofTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "lsof", "-nP", "-l", "-iTCP:"+strconv.Itoa(port), "-sTCP:LISTEN", "-a", "-F", "pcun")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1 && len(bytes.TrimSpace(out)) == 0) {
		return nil, fmt.Errorf("list listeners on port %d: lsof: %w: %s", port, err, bytes.TrimSpace(stderr.Bytes()))
	}
	found, err := parseLsof(out)
	if err != nil {
		return nil, fmt.Errorf("list listeners on port %d: %w", port, err)
	}
	var ls []Listener
	byAddr := map[netip.AddrPort]int{}
	for _, f := range found {
		if i, ok := byAddr[f.Addr]; ok {
			ls[i].PIDs = append(ls[i].PIDs, f.PID)
			continue
		}
		byAddr[f.Addr] = len(ls)
		l := Listener{Addr: f.Addr, UID: f.UID, PIDs: []int{f.PID}, OwnerVisible: true}
		if id, err := ReadIdentity(f.PID); err == nil {
			l.Cmdline = id.Cmdline
		}
		if len(l.Cmdline) == 0 && f.Comm != "" {
			l.Cmdline = []string{f.Comm}
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 && os.Geteuid() != 0 && PortAccepting(ctx, port) {
		ls = append(ls, Listener{Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), UID: -1})
	}
	return ls, nil
}
