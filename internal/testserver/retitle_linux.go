package testserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// setTitle overwrites this process's argument area with title, padded
// with NULs to its end, as setproctitle does (nginx, postgres, redis), so
// that /proc/self/cmdline shows title followed by empty arguments; with
// wipeEnv it zeroes the environment area too, so /proc/self/environ shows
// no variable. It writes through /proc/self/mem at the addresses the kernel
// gives in /proc/self/stat (fields 48-51). Go's copies of the arguments
// and the environment point into these areas: the caller no longer needs
// them.
func setTitle(title string, wipeEnv bool) error {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return errors.New("no ')' in /proc/self/stat")
	}
	// Field 3 is the first after the comm; fields 48-51 are arg_start,
	// arg_end, env_start, env_end.
	f := bytes.Fields(b[i+1:])
	if len(f) < 49 {
		return fmt.Errorf("/proc/self/stat has %d fields after comm", len(f))
	}
	var addr [4]int64
	for k := range addr {
		v, err := strconv.ParseUint(string(f[45+k]), 10, 64)
		if err != nil {
			return fmt.Errorf("/proc/self/stat field %d: %w", 48+k, err)
		}
		addr[k] = int64(v)
	}
	argStart, argEnd, envStart, envEnd := addr[0], addr[1], addr[2], addr[3]
	if argEnd <= argStart {
		return errors.New("empty argument area")
	}
	area := make([]byte, argEnd-argStart)
	copy(area[:len(area)-1], title)
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	// The environment first: whoever sees the new title (tests wait for
	// it) sees the wiped environment too.
	if wipeEnv && envEnd > envStart {
		if _, err := mem.WriteAt(make([]byte, envEnd-envStart), envStart); err != nil {
			return fmt.Errorf("write the environment area: %w", err)
		}
	}
	if _, err := mem.WriteAt(area, argStart); err != nil {
		return fmt.Errorf("write the argument area: %w", err)
	}
	return nil
}
