package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/go-logr/logr"

	"github.com/procfleet/procfleet/actuate"
	"github.com/procfleet/procfleet/internal/logfile"
	"github.com/procfleet/procfleet/reconciler"
	"github.com/procfleet/procfleet/spec"
)

// attachFollower is what the reconciler shows the follower of `up --attach`
// (*reconciler.Reconciler; a small interface so its test needs no fleet).
type attachFollower interface {
	Fleet() *spec.Fleet
	Status() reconciler.Status
	Changes() <-chan struct{}
}

// startAttach prints every server's output on out while up runs, as
// `logs -f` prints it: "name | " before each line (colored on a terminal
// without NO_COLOR), lines interleaved as written, across rotations, and a
// marker line at each start. It follows each server from the moment it is
// known (the fleet as loaded, the recorded servers, and each server a
// fleet-file edit adds); a server that leaves the fleet stays followed, so
// its last words as it stops are printed. The returned stop ends the
// follower after printing what the logs hold by then; it must be called
// once.
func startAttach(r attachFollower, sd *actuate.StateDir, out io.Writer, color bool, log logr.Logger) (stop func(), err error) {
	fl, err := logfile.NewFleet(logfile.FleetConfig{
		Dir:     filepath.Dir(sd.LogPath("x")),
		Out:     out,
		Follow:  true,
		Prefix:  true,
		Color:   color,
		Markers: true,
		Log:     log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan error, 1)
	go func() { followed <- fl.Run(ctx) }()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		addServers(ctx, r, fl, log)
	}()
	return func() {
		cancel()
		<-watched
		if err := <-followed; err != nil {
			log.Error(err, "Cannot print the servers' output (--attach)")
		}
	}, nil
}

// addServers adds to fl every server r knows of, and those it comes to
// know, until ctx ends: the instances of the fleet in force and the
// servers in Status (recorded ones too), looked at again at each load of
// the fleet files.
func addServers(ctx context.Context, r attachFollower, fl *logfile.Fleet, log logr.Logger) {
	var fleet *spec.Fleet
	known := map[string]bool{}
	for {
		changes := r.Changes()
		if f := r.Fleet(); f != fleet || len(known) == 0 {
			fleet = f
			var names []string
			add := func(n string) {
				if !known[n] {
					known[n] = true
					names = append(names, n)
				}
			}
			if f != nil {
				// The servers a load adds have no state in Status yet.
				for _, in := range f.Instances() {
					add(in.Name)
				}
			}
			for _, s := range r.Status().Servers {
				add(s.Name)
			}
			if err := fl.Add(names...); err != nil {
				log.Error(err, "Cannot print a server's output (--attach)")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
	}
}
