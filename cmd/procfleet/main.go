// Command procfleet keeps a fleet of local server processes in the state that
// YAML files declare.
//
// This package is the command line only: flags, output formats and exit
// codes. Loading, planning and acting live in spec, reconciler, observe and
// actuate.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	go onSignals(cancel)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// onSignals cancels the command at the first SIGINT, SIGTERM or SIGHUP
// (SIGHUP too: closing up's terminal ends it cleanly, socket removed,
// --down-on-exit honoured). The first signal asks for a clean exit, which
// can take a while (up ends its passes, and with --down-on-exit stops every
// server); a second one, whenever it comes, ends procfleet at once by the
// signal's default action. That leaves what a crash of procfleet leaves:
// intent or full records the next up adopts through.
func onSignals(cancel context.CancelFunc) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	<-sigs
	cancel()
	sig := <-sigs
	signal.Reset()
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), s)
	}
	os.Exit(1) // a fallback: the default action of all three ends the process first
}

// run executes procfleet with args and returns the process exit code.
// Tests call it in place of main.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := &globalOptions{logOut: stderr}
	root := newRootCmd(opts)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	opts.syncLogs()
	return exitCodeOf(err, stderr)
}
