package reconciler

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/procfleet/procfleet/internal/api"
	"github.com/procfleet/procfleet/internal/testserver"
)

// TestReloadOfBadFilesIsFailed: a reload (apply while up runs) whose fleet
// files do not load is "it ran but did not succeed" (409 through the
// socket, result attached), not an internal error, and stops nothing.
func TestReloadOfBadFilesIsFailed(t *testing.T) {
	f := newTestFleet(t)
	f.add(&testSpec{name: "a", port: testserver.FreePort(t)})
	f.write()
	rr := f.run(t, nil)
	st := waitStatus(t, rr.r, "ready", allReady("a"))
	a1 := pidOf(st, "a")

	if err := os.WriteFile(f.file, []byte("apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata: {name: a}\nspec:\n  command: [x\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := rr.r.APIBackend().Reload(ctx, true, 10*time.Second)
	if !errors.Is(err, api.ErrFailed) {
		t.Fatalf("backend Reload error = %v, want one wrapping api.ErrFailed", err)
	}
	if bst, ok := res.(ApplyResult); !ok || len(bst.Errors) == 0 {
		t.Errorf("backend Reload result = %#v, want an ApplyResult naming the file errors", res)
	}

	// Through the socket, as `apply` sees it.
	ln, err := api.Listen(f.state.SocketPath(), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- (&api.Server{Backend: rr.r.APIBackend(), Log: testr.New(t)}).Serve(sctx, ln) }()
	t.Cleanup(func() {
		scancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	c, err := api.Dial(ctx, f.state.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got Status
	err = c.Reload(ctx, false, 0, &got)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.StatusCode != 409 {
		t.Fatalf("client Reload error = %v, want HTTP 409", err)
	}
	if len(got.Errors) == 0 {
		t.Errorf("client Reload result has no file errors: %+v", got)
	}
	if pidOf(rr.r.Status(), "a") != a1 {
		t.Errorf("a reload of bad files changed a running server")
	}
}
