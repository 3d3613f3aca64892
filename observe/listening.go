package observe

import "fmt"

// ListeningPorts reports which of ports have a TCP listener, on any
// address, IPv4 or IPv6: one ListeningOn query (a sock_diag dump per
// address family, filtered by the kernel to those ports) however many
// they are. Where that fails (no sock_diag, macOS), each port is asked as
// Listeners does.
func ListeningPorts(ports []int) (map[int]bool, error) {
	busy := make(map[int]bool, len(ports))
	for _, p := range ports {
		if p <= 0 || p > 65535 {
			return nil, fmt.Errorf("list listeners on port %d: invalid port", p)
		}
		busy[p] = false
	}
	if ls, err := ListeningOn(ports, nil); err == nil {
		for _, l := range ls {
			if p := int(l.Addr.Port()); p > 0 {
				if _, asked := busy[p]; asked {
					busy[p] = true
				}
			}
		}
		return busy, nil
	}
	for p := range busy {
		ls, err := Listeners(p)
		if err != nil {
			return nil, fmt.Errorf("list listeners on port %d: %w", p, err)
		}
		busy[p] = len(ls) > 0
	}
	return busy, nil
}
