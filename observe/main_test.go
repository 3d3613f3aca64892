package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// helperEnv makes the test binary run one observe call and print its result
// as JSON (used to call observe as another user).
const helperEnv = "OBSERVE_TEST_HELPER"

func TestMain(m *testing.M) {
	testserver.RunIfHelper()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:], os.Stdout))
	}
	os.Exit(m.Run())
}

// helperResult is what a helper prints.
type helperResult struct {
	Liveness  string     `json:"liveness,omitempty"`
	Identity  *Identity  `json:"identity,omitempty"`
	Err       string     `json:"err,omitempty"`
	Listeners []Listener `json:"listeners,omitempty"`
	Mode      string     `json:"mode,omitempty"`
}

func runHelper(mode string, args []string, out io.Writer) int {
	arg := 0
	if len(args) > 0 {
		arg, _ = strconv.Atoi(args[0])
	}
	var r helperResult
	switch mode {
	case "liveness":
		r.Liveness = CheckLiveness(arg).String()
		id, err := ReadIdentity(arg)
		if err != nil {
			r.Err = err.Error()
		} else {
			r.Identity = &id
		}
	case "listeners":
		ls, err := Listeners(arg)
		if err != nil {
			r.Err = err.Error()
		}
		r.Listeners = ls
	case "env":
		h, err := Pin(arg)
		if err != nil {
			r.Err = "pin: " + err.Error()
			break
		}
		defer h.Close()
		if _, _, err := h.Env("PATH"); err != nil {
			r.Err = err.Error()
		}
	case "alloc":
		return allocUntilKilled(os.Getenv(memcgEnv))
	case "signal":
		h, err := Pin(arg)
		if err != nil {
			r.Err = "pin: " + err.Error()
			break
		}
		defer h.Close()
		r.Mode = h.Mode().String()
		if err := h.Signal(syscall.SIGTERM); err != nil {
			r.Err = err.Error()
		}
	case "probe":
		// An exec probe that outlasts this process (pdeathsig_linux_test.go
		// kills it meanwhile).
		res := ProbeExec(context.Background(), args, "", nil, 10*time.Minute)
		r.Err = res.Message
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return 1
	}
	return 0
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// memcgEnv names the cgroup v1 memory folder the "alloc" helper joins.
const memcgEnv = "OBSERVE_TEST_MEMCG"

// allocUntilKilled joins the memory cgroup at dir, then allocates and
// touches memory 1 MiB at a time, up to 1 GiB (exit 3: no limit stopped
// it), so that the out-of-memory killer of a small limit ends it.
func allocUntilKilled(dir string) int {
	if err := os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		fmt.Fprintln(os.Stderr, "alloc: join memory cgroup:", err)
		return 2
	}
	var keep [][]byte
	for range 1024 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println(len(keep))
	return 3
}
