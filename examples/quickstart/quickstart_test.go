package quickstart_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procfleet/procfleet/internal/testserver"
)

// binDir holds the binaries buildBinaries built, once per test binary;
// TestMain removes it.
var (
	binDir   string
	buildErr error
	build    sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinaries compiles the example servers, the check program and procfleet
// once, and returns the folder that holds them.
func buildBinaries(t *testing.T) string {
	t.Helper()
	build.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "procfleet-quickstart-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"./backend", "./api", "./web", "./check", "../../cmd/procfleet")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// TestServers runs the three quick-start servers as real processes on free
// ports, checks web -> api -> backend with the check program, then stops them
// with SIGTERM and expects each to exit 0 (graceful shutdown).
func TestServers(t *testing.T) {
	bin := buildBinaries(t)
	free := testserver.FreePorts(t, 3)
	backendPort, apiPort, webPort := free[0], free[1], free[2]
	url := func(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

	backend := start(t, filepath.Join(bin, "backend"), "-port", strconv.Itoa(backendPort))
	api := start(t, filepath.Join(bin, "api"), "-port", strconv.Itoa(apiPort), "-backend", url(backendPort))
	web := start(t, filepath.Join(bin, "web"), "-port", strconv.Itoa(webPort), "-api", url(apiPort))
	for _, port := range []int{backendPort, apiPort, webPort} {
		waitHealthy(t, url(port)+"/health")
	}

	check := exec.Command(filepath.Join(bin, "check"), "-backend", url(backendPort), "-api", url(apiPort), "-web", url(webPort))
	out, err := check.CombinedOutput()
	if err != nil {
		t.Fatalf("check failed: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "ok "); got != 4 {
		t.Errorf("check printed %d ok lines, want 4:\n%s", got, out)
	}

	for _, s := range []*server{web, api, backend} {
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM %s: %v", s.name, err)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit within 10s of SIGTERM", s.name)
		}
		if s.err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want status 0; output:\n%s", s.name, s.err, s.out.String())
		}
		if !strings.Contains(s.out.String(), "stopped") {
			t.Errorf("%s did not log its graceful stop:\n%s", s.name, s.out.String())
		}
	}
}

type server struct {
	name string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// start runs a server binary; t.Cleanup kills it if the test did not stop it.
func start(t *testing.T, path string, args ...string) *server {
	t.Helper()
	s := &server{name: filepath.Base(path), out: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(path, args...)
	// One writer for both: exec then copies them on a single goroutine. It is
	// read only after the process has exited.
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.name, err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// waitHealthy polls url until it answers 200, for at most 10 seconds.
func waitHealthy(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s not healthy within 10s: %v", url, errors.Join(last, ctx.Err()))
		case <-tick.C:
		}
	}
}
