package actuate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
	"github.com/procfleet/procfleet/observe"
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
	// Prepared makes the spawner prepare the spawn first (PrepareNext),
	// as up does for a restart, so the intent record is a prepared one.
	Prepared bool `json:"prepared,omitempty"`
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
		testHookAfterSpawn = func(_ string, pid int) {
			_ = os.WriteFile(req.PauseFile, []byte(strconv.Itoa(pid)+"\n"), 0o600)
			<-ctx.Done() // the test kills this process first
			os.Exit(3)
		}
	}
	sreq := StartRequest{Name: req.Name, Argv: req.Argv, Env: req.Env, Port: req.Port, StartupTimeout: 30 * time.Second}
	if req.Prepared {
		a.PrepareNext(sreq)
		_ = preparedToken(a, sreq.Name)
	}
	r, err := a.Start(ctx, sreq)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spawner:", err)
		return 1
	}
	fmt.Println(r.Record.PID)
	return 0
}

// spawnerCommand is the test binary run as a spawner of req's server.
func spawnerCommand(t *testing.T, req spawnerRequest) *exec.Cmd {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spawner := exec.Command(self)
	spawner.Env = append(os.Environ(), spawnerEnv+"="+string(data))
	return spawner
}

// spawnElsewhere starts a server through another process (the test binary
// as a spawner), which exits once the server is ready: the server is not
// this test's child. It returns the server's pid.
func spawnElsewhere(t *testing.T, req spawnerRequest) int {
	t.Helper()
	spawner := spawnerCommand(t, req)
	var out, stderr bytes.Buffer
	spawner.Stdout, spawner.Stderr = &out, &stderr
	if err := spawner.Run(); err != nil {
		t.Fatalf("spawner: %v: %s", err, stderr.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("spawner output %q: %v", out.String(), err)
	}
	return pid
}

// killSpawnerPaused starts a spawner (the test binary) whose request has a
// PauseFile, waits until it has spawned the server and stopped in the
// test-only pause (the server's pid in PauseFile), kills it with SIGKILL
// there and waits for its end: procfleet dead between the intent record and
// the full one. It returns the server's pid, pinned.
func killSpawnerPaused(t *testing.T, req spawnerRequest) (int, *observe.Handle) {
	t.Helper()
	spawner := spawnerCommand(t, req)
	if err := spawner.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = spawner.Wait(); close(exited) }()
	t.Cleanup(func() { _ = spawner.Process.Kill(); <-exited })
	pid, h := pinnedFromFile(t, req.PauseFile, exited)
	if err := spawner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	return pid, h
}
