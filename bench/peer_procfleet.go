package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// procfleetPeer drives `procfleet up` (reconciler in the foreground), and
// `procfleet down` for the stop.
type procfleetPeer struct {
	name  string // its column: procfleet, or the baseline
	bin   string // procfleet binary
	dir   string // this run's folder: fleet file, state folder, logs
	fleet string
	state string
	up    *daemon
}

func newProcfleetPeer(bin, dir, name string) *procfleetPeer {
	return &procfleetPeer{
		name: name,
		bin:  bin,
		dir:  dir,
		// The fleet file gets a folder of its own: up watches the folder,
		// and the bench's logs and stamps must not look like edits.
		fleet: filepath.Join(dir, "fleet", "procfleet.yaml"),
		state: filepath.Join(dir, "state"),
	}
}

func (p *procfleetPeer) Name() string { return p.name }

// procfleetYAML renders the fleet file: one document per server, the
// workload as command, no declared probes (readiness defaults to a TCP
// connect to the port).
func procfleetYAML(f Fleet) []byte {
	var b bytes.Buffer
	for i, s := range f.Servers {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: %s\nspec:\n", s.Name)
		fmt.Fprintf(&b, "  command: [%q]\n", f.Workload)
		b.WriteString("  args: [")
		for j, a := range s.Args() {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", a)
		}
		b.WriteString("]\n")
		fmt.Fprintf(&b, "  port: %d\n", s.Port)
	}
	return b.Bytes()
}

// procfleetScaledYAML renders s as one server of s.Replicas instances,
// instance i on port s.Base+i through $(PORT).
func procfleetScaledYAML(s ScaledServer) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "apiVersion: procfleet.dev/v1alpha1\nkind: Server\nmetadata:\n  name: %s\nspec:\n", s.Name)
	fmt.Fprintf(&b, "  command: [%q]\n", s.Workload)
	fmt.Fprintf(&b, "  args: [\"-port\", \"$(PORT)\", \"-stamp-dir\", %q]\n", s.StampDir)
	fmt.Fprintf(&b, "  port: %d\n  replicas: %d\n", s.Base, s.Replicas)
	return b.Bytes()
}

func (p *procfleetPeer) flags() []string {
	return []string{"-f", p.fleet, "--state-dir", p.state}
}

func (p *procfleetPeer) Start(_ context.Context, f Fleet) error {
	if err := p.writeFleet(procfleetYAML(f)); err != nil {
		return err
	}
	return p.startUp()
}

func (p *procfleetPeer) writeFleet(data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p.fleet), 0o755); err != nil {
		return fmt.Errorf("procfleet: %w", err)
	}
	if err := writeFileAtomic(p.fleet, data); err != nil {
		return fmt.Errorf("procfleet: %w", err)
	}
	return nil
}

// logsFlags are the flags of `procfleet logs`, run in the fleet file's
// folder (where it finds procfleet.yaml): there -f means follow.
func (p *procfleetPeer) logsFlags() []string {
	return []string{"--state-dir", p.state}
}

// upLog is where `up` writes its output.
func (p *procfleetPeer) upLog() string { return filepath.Join(p.dir, "up.log") }

// startUp starts `procfleet up` with extra flags.
func (p *procfleetPeer) startUp(extra ...string) error {
	argv := append(append([]string{p.bin, "up"}, p.flags()...), extra...)
	d, err := startDaemon("procfleet up", argv, nil, p.upLog())
	if err != nil {
		return err
	}
	p.up = d
	return nil
}

// StartScaled checks that this binary honours spec.replicas (`status`
// lists the instances, before anything is started), then starts `up`.
func (p *procfleetPeer) StartScaled(ctx context.Context, s ScaledServer) error {
	if err := p.writeFleet(procfleetScaledYAML(s)); err != nil {
		return err
	}
	out, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "status", "-o", "json"}, p.flags()...)...)
	if err != nil {
		return fmt.Errorf("procfleet: status of a fleet with replicas: %w", err)
	}
	names, err := replicaNames(out)
	if err != nil {
		return err
	}
	if ok, why := replicasHonoured(names, s.Name, s.Replicas); !ok {
		return &unsupportedError{what: "spec.replicas (" + why + ")"}
	}
	return p.startUp()
}

// Scale saves the fleet file with the new replicas: `up` does the rest.
func (p *procfleetPeer) Scale(_ context.Context, s ScaledServer) error {
	return p.writeFleet(procfleetScaledYAML(s))
}

func (p *procfleetPeer) Apply(_ context.Context, f Fleet) error {
	// `up` watches the file: saving it is all a user does.
	return p.writeFleet(procfleetYAML(f))
}

func (p *procfleetPeer) PrepareStop(context.Context) error { return p.endUp() }

// endUp ends `up` with SIGTERM, which leaves the servers running
// (DESIGN.md), and checks that it exited 0.
func (p *procfleetPeer) endUp() error {
	if p.up == nil {
		return nil
	}
	if err := p.up.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		return fmt.Errorf("procfleet: end up before down: %w", err)
	}
	// DESIGN.md: up exits 0 after SIGTERM.
	if code := p.up.ExitCode(); code != 0 {
		err := fmt.Errorf("procfleet: up exited with code %d after SIGTERM, want 0: %w", code, p.up.Err())
		p.up = nil
		return err
	}
	p.up = nil
	return nil
}

func (p *procfleetPeer) StopAll(ctx context.Context) error {
	_, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "down"}, p.flags()...)...)
	return err
}

func (p *procfleetPeer) SupervisorPID() (int, error) {
	if p.up == nil {
		return 0, errors.New("procfleet up is not running")
	}
	return p.up.PID(), nil
}

func (p *procfleetPeer) Err() error {
	if p.up == nil {
		return nil
	}
	return p.up.Err()
}

func (p *procfleetPeer) Close(ctx context.Context) error {
	var errs []error
	if p.up != nil {
		if err := p.up.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
		p.up = nil
	}
	if _, err := os.Stat(p.fleet); err == nil {
		if _, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "down"}, p.flags()...)...); err != nil {
			errs = append(errs, fmt.Errorf("procfleet: down at cleanup: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Restarts sums the restarts that `procfleet status -o json` reports.
func (p *procfleetPeer) Restarts(ctx context.Context) (int, error) {
	out, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "status", "-o", "json"}, p.flags()...)...)
	if err != nil {
		return 0, err
	}
	return parseStatusRestarts(out)
}

// parseStatusRestarts sums servers[].restarts of `status -o json` output.
func parseStatusRestarts(out []byte) (int, error) {
	var st struct {
		Servers []struct {
			Name     string `json:"name"`
			Restarts int    `json:"restarts"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("parse procfleet status: %w", err)
	}
	n := 0
	for _, s := range st.Servers {
		n += s.Restarts
	}
	return n, nil
}

// AllReady reports whether status.json, as up last wrote it, shows every
// server ready, and how many are not. It reads the file rather than asking
// up, so that it costs up nothing while the idle window is measured; up
// writes the file within its write interval of a change.
func (p *procfleetPeer) AllReady(context.Context) (bool, int, error) {
	out, err := os.ReadFile(filepath.Join(p.state, "status.json"))
	if err != nil {
		return false, 0, fmt.Errorf("procfleet: %w", err)
	}
	notReady, err := parseStatusNotReady(out)
	return err == nil && notReady == 0, notReady, err
}

// allReady reports whether `procfleet status -o json` shows every server
// ready, and how many are not.
func (p *procfleetPeer) allReady(ctx context.Context) (bool, int, error) {
	out, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "status", "-o", "json"}, p.flags()...)...)
	if err != nil {
		return false, 0, err
	}
	notReady, err := parseStatusNotReady(out)
	return err == nil && notReady == 0, notReady, err
}

// parseStatusNotReady counts the servers of `status -o json` output that
// are not ready.
func parseStatusNotReady(out []byte) (int, error) {
	var st struct {
		Servers []struct {
			Ready bool `json:"ready"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("parse procfleet status: %w", err)
	}
	if len(st.Servers) == 0 {
		return 0, errors.New("parse procfleet status: no servers")
	}
	n := 0
	for _, s := range st.Servers {
		if !s.Ready {
			n++
		}
	}
	return n, nil
}

// ApplyOnce runs `procfleet apply --wait`: converge once, exit 0 when every
// server is Ready.
func (p *procfleetPeer) ApplyOnce(ctx context.Context, f Fleet) error {
	if err := writeFileAtomic(p.fleet, procfleetYAML(f)); err != nil {
		return fmt.Errorf("procfleet: %w", err)
	}
	_, err := runCmd(ctx, cmdBound, nil, append([]string{p.bin, "apply", "--wait", "--timeout", coldLimit(len(f.Servers)).String()}, p.flags()...)...)
	return err
}
