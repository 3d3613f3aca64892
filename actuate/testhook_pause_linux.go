//go:build procfleet_testhooks && linux

package actuate

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Built only with -tags procfleet_testhooks (the chaos soak builds its
// procfleet so; a release never is), this makes the window of ownership
// rule 8 real in the whole binary, as testHookAfterSpawn does in
// actuate's own tests: with PROCFLEET_TESTHOOK_PAUSE_AFTER_SPAWN set to
// NAME=FILE, the first Spawn of server NAME stops between the spawn and
// the full record (the intent record is on disk, the process runs),
// writes the new pid to FILE and blocks there for good, for the caller to
// kill the actor. The variable is removed from the environment at once,
// so no server inherits it.
const envPauseAfterSpawn = "PROCFLEET_TESTHOOK_PAUSE_AFTER_SPAWN"

func init() {
	v, ok := os.LookupEnv(envPauseAfterSpawn)
	if !ok {
		return
	}
	_ = os.Unsetenv(envPauseAfterSpawn)
	name, file, ok := strings.Cut(v, "=")
	if !ok || name == "" || file == "" {
		return
	}
	var fired atomic.Bool
	testHookAfterSpawn = func(server string, pid int) {
		if server != name || !fired.CompareAndSwap(false, true) {
			return
		}
		if err := os.WriteFile(file, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			return
		}
		select {} // until the actor is killed
	}
}
