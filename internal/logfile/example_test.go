package logfile_test

import (
	"context"
	"os"

	"github.com/procfleet/procfleet/internal/logfile"
)

// How `up --attach` prints every server's output on stdout: a Fleet that
// follows the state folder's logs/, a server added as the fleet gains it
// (its log is printed from its first line once it appears), until up ends.
func ExampleFleet() {
	ctx, stop := context.WithCancel(context.Background())
	fl, err := logfile.NewFleet(logfile.FleetConfig{
		Dir:    ".procfleet/logs",
		Out:    os.Stdout,
		Follow: true,
		Prefix: true, // "api | ..."
		// The caller decides on colors: a terminal, and NO_COLOR unset.
		Color: false,
	})
	if err != nil {
		panic(err)
	}
	if err := fl.Add("api", "web"); err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- fl.Run(ctx) }()

	_ = fl.Add("worker") // when the fleet gains a server

	stop() // up ends
	<-done // Run returns nil once its held lines are out
}
