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
