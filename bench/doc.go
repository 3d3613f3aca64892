// Command bench measures procfleet against the DESIGN.md targets and, side by
// side, against supervisord and PM2 on the same machine in the same run.
//
// The full run, for a quiet machine (20-25 minutes: the three runs of
// 2026-12-02 that cover it took 11.5, 3 and 8 minutes; supervisord and PM2
// are installed when missing):
//
//	go run ./bench -json bench/results.json -md /tmp/bench.md
//
// It measures every scenario below, the fleet ones at 100 and 1,000
// servers (-fleet 100,1000), and records the load average at its start and
// end: a run whose 1-minute load was above half the CPUs says under its
// table that its figures are not comparable. A quick check of the harness:
// -fleet 5,10 -kills 3 -idle 2s -window 2s -scale 2,5 -logs-rate 2000.
//
// Each peer runs the same workload (./bench/workload: appends "<start unix
// ns> <pid>" to a stamp file, listens on a loopback port, answers /health)
// through the same scenarios:
//
//  1. crash: a fleet of -kills servers; each is killed with SIGKILL once
//     (its first crash), then again once it has answered /health for 12 s
//     (a second crash, which DESIGN.md does not count as a loop); from the
//     kill to the new instance's stamp and to its first /health 200, first
//     and second crashes reported apart. Floors: the bench itself spawning
//     the server and seeing its stamp, plainly and in a new session
//     (setsid), as procfleet and PM2 start servers. The kill's figure (the
//     one held to the target) includes the kernel's teardown of the killed
//     process, which the floor does not; a second row starts when the
//     bench's own pidfd of the killed process turns readable (its exit
//     seen) and so shows the supervisor's own share against the same floor.
//
// For each fleet size, on one fleet, in this order:
//
//  2. cold: from the start command to all answering /health; procfleet also
//     with `apply --wait` after the stop. Floor: the bench starting them in
//     parallel.
//  5. idle: the fleet running for -idle: CPU (utime+stime, and schedstat)
//     and RSS of the supervisor process itself: its peak (VmHWM, the row
//     compared with the target), and, as information, its size at the
//     window's end (VmRSS) and the file-backed part of that (RssFile).
//     CPU is taken over two windows of -idle: one from the moment the bench
//     has seen every /health 200, and, for a peer whose own status says
//     when every server is ready (procfleet's status.json, read from the
//     file so that it costs the supervisor nothing), one from that moment,
//     with the time between the two as a row of its own. The first holds
//     the tail of the start the supervisor had not seen yet; the second
//     what it costs at rest. A peer that reports no readiness has one
//     window, shown in both rows.
//  6. logs-idle (procfleet): `procfleet logs -f` of the whole fleet, and
//     `tail -F` of every log as its floor, once both follow every file:
//     their CPU over -window.
//  4. edit: one server's args changed in the fleet file, until the new
//     instance answers; every other server's stamp file is checked for a
//     restart.
//  7. ui (procfleet): `up` started again with --ui, adopting the fleet; its
//     CPU over -window with no page open, then with one (the page and its
//     event stream, as a browser holds them).
//  3. stop: until no process is left and every port is free. Floor: SIGTERM
//     to every pid from the bench.
//
// And once per peer:
//
//  8. scale: one server of -scale FROM instances edited to TO and back
//     (procfleet: spec.replicas in the fleet file; supervisord: numprocs and
//     `supervisorctl update`; PM2: `pm2 scale`): to all answering, then to
//     exactly FROM left running and listening; and how many of the FROM
//     running instances the scale-up replaced.
//  9. logs (procfleet): one server printing -logs-rate lines a second for
//     -window; `procfleet logs -f` and `tail -F` (the floor) follow its log;
//     their CPU up to printing the last line, and every line checked to be
//     printed exactly once.
//  10. neighbour (procfleet): `up` of 10 servers, its CPU over -window with
//     the fleet file's folder quiet, then while a file beside the fleet file
//     is written at 3 MB/s; no server may restart.
//  11. plan: BenchmarkReconcilePass1000 from ./reconciler.
//
// Scenario steps that grow with the fleet have limits that grow with it
// (cold start 60 s + 150 ms a server, stop 30 s + 100 ms a server). A peer
// that does not finish within one is reported as "> limit", never left out,
// and a ratio to it is a bound. Where the procfleet binary lacks what a
// scenario drives (`up --ui`, spec.replicas honoured, `logs` of the whole
// fleet), its rows say "not supported" with what is missing, and the rest of
// the run goes on. Every row gives procfleet's figure as a ratio to the
// floor and to each peer.
//
// procfleet is built (and its benchmark run) from the committed HEAD,
// exported with git archive, so edits in progress in a shared work tree are
// not measured; -src worktree measures the work tree, -procfleet-bin a
// binary.
//
// An A/B in one run: -baseline REV (a commit, exported and built the same
// way, or a binary) is measured as a column of its own, beside procfleet,
// and -rounds N runs everything N times, the peers in turn (their order
// reversed every other round). A row then shows each figure's median and
// range, and marks a ratio whose two ranges do not overlap. For issue 17's
// stop at 1,000:
//
//	go run ./bench -fleet 1000 -scenarios stop -baseline REV -rounds 5
//
// Guarantees:
//   - Loopback only; ports come from -port-base upwards, each checked free.
//   - No fixed sleeps wait for an event: stamps are watched with fsnotify
//     (with a bounded re-read as a safety net), followers' output is read
//     line by line, /health, ports and status are polled with deadlines, and
//     every wait is bounded. The timers that remain measure: the idle and
//     CPU windows, and the age of a server before its second crash.
//   - Every process the bench starts is ended by pid, after checking that the
//     pid still runs the program the bench started (never by name), and its
//     temp folder is removed unless -keep is given.
//   - Peers are installed when missing: supervisord from the Debian package
//     "supervisor" (apt-get), PM2 from npm into -pm2-dir.
//
// The bench is Linux-only (procfs, supervisord); on other systems it builds
// and says so.
package main
