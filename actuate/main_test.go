package actuate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// spawnerEnv makes the test binary act as "another procfleet process": it
// starts one server with Actuator.Start from the JSON request in the
// variable, then exits, leaving the server running.
const spawnerEnv = "ACTUATE_TEST_SPAWNER"

type spawnerRequest struct {
	Dir  string   `json:"dir"`
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Port int      `json:"port"`
	// PauseFile, when set, makes the spawner stop between the spawn and
	// the full record (testHookAfterSpawn): it writes the server's pid
	// there and waits to be killed, standing for a crash in that window.
	PauseFile string `json:"pauseFile,omitempty"`
	// DenyClone3 makes the spawner refuse itself clone3 first (seccomp).
	DenyClone3 bool `json:"denyClone3,omitempty"`
}

func TestMain(m *testing.M) {
	testserver.RunIfHelper()
	if v := os.Getenv(spawnerEnv); v != "" {
		os.Exit(runSpawner(v))
	}
	os.Exit(m.Run())
}

func runSpawner(v string) int {
	var req spawnerRequest
	if err := json.Unmarshal([]byte(v), &req); err != nil {
		fmt.Fprintln(os.Stderr, "spawner:", err)
		return 2
	}
	d, err := OpenStateDir(req.Dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawner:", err)
		return 2
	}
	a := &Actuator{Dir: d}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	os.Unsetenv(spawnerEnv)
	if req.DenyClone3 {
		if err := denyClone3(); err != nil {
			fmt.Fprintln(os.Stderr, "spawner: seccomp:", err)
			return 2
		}
	}
	if req.PauseFile != "" {
		testHookAfterSpawn = func(pid int) {
			_ = os.WriteFile(req.PauseFile, []byte(strconv.Itoa(pid)+"\n"), 0o600)
			<-ctx.Done() // the test kills this process first
			os.Exit(3)
		}
	}
	r, err := a.Start(ctx, StartRequest{Name: req.Name, Argv: req.Argv, Env: req.Env, Port: req.Port, StartupTimeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawner:", err)
		return 1
	}
	fmt.Println(r.Record.PID)
	return 0
}
