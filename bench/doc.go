// Command bench measures procfleet against the DESIGN.md targets and, side by
// side, against supervisord and PM2 on the same machine in the same run.
//
// Run it from the repository root:
//
//	go run ./bench -json bench/results.json
//
// Each peer runs the same workload (./bench/workload: appends "<start unix
// ns> <pid>" to a stamp file, listens on a loopback port, answers /health)
// through the same scenarios:
//
//  1. crash: kill -9 a server -kills times, each time a different server of
//     a fleet of -kills (so every kill is a first crash: procfleet backs off
//     from the second crash in a row, by design; -crash-same kills one
//     server every round); from the kill to the new instance's stamp and to
//     its first /health 200. Floors: the bench itself spawning the server
//     and seeing its stamp, plainly and in a new session (setsid), as
//     procfleet and PM2 start servers.
//  2. cold: -n servers on distinct ports, from the command to all answering
//     /health. Floor: the bench starting the same -n in parallel.
//  3. stop: the -n running, until no process is left and every port is free.
//  4. edit: one server's args changed in the fleet file while running, until
//     the new instance answers; every other server's stamp file is checked
//     for a restart.
//  5. idle: -n servers running for -idle: CPU (utime+stime, and schedstat)
//     and peak RSS (VmHWM) of the supervisor process itself.
//  6. plan: BenchmarkReconcilePass1000 from ./reconciler, when it exists.
//
// procfleet is built (and its benchmark run) from the committed HEAD,
// exported with git archive, so edits in progress in a shared work tree are
// not measured; -src worktree measures the work tree, -procfleet-bin a
// binary.
//
// Guarantees:
//   - Loopback only; ports come from -port-base upwards, each checked free.
//   - No fixed sleeps wait for an event: stamps are watched with fsnotify
//     (with a bounded re-read as a safety net), /health and ports are polled
//     with deadlines, and every wait is bounded.
//   - Every process the bench starts is ended by pid, after checking that the
//     pid still runs the program the bench started (never by name), and its
//     temp folder is removed unless -keep is given.
//   - Peers are installed when missing: supervisord from the Debian package
//     "supervisor" (apt-get), PM2 from npm into -pm2-dir.
//
// The bench is Linux-only (procfs, supervisord); on other systems it builds
// and says so.
package main
