package actuate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	r, err := a.Start(ctx, StartRequest{Name: req.Name, Argv: req.Argv, Env: req.Env, Port: req.Port, StartupTimeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawner:", err)
		return 1
	}
	fmt.Println(r.Record.PID)
	return 0
}
