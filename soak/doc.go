// Package soak holds procfleet's chaos soak: a go test behind the "soak"
// build tag (Linux only) that builds the real procfleet binary and the test
// server, runs `procfleet up` on a fleet of 30 servers in a temporary folder,
// injects faults at random from a printed seed, checks invariants
// continuously, and reports them as figures.
//
// Run it for two minutes (what CI runs, through soak/run.sh):
//
//	go test -tags soak -run TestSoak -timeout 10m ./soak -soak.duration=2m -v
//
// or soak/run.sh (SOAK_DURATION, SOAK_SEED, SOAK_RUNS, SOAK_FLAGS).
//
// Flags: -soak.duration (the whole run; faults are injected for all of it
// but the last 30 s), -soak.seed (0: from the clock; printed; it replays the
// schedule of fault kinds and pauses exactly, the targets as far as timing
// allows), -soak.servers (fleet size, default 30), -soak.converge (bound on
// convergence once faults stop), -soak.faults (the fault kinds, comma
// separated), -soak.inplace=false (write fleet files atomically instead of
// in place), -soak.procfleet (soak a prebuilt binary), -soak.report (write
// the figures as JSON), -soak.keep (keep the temporary folder; a failing run
// always keeps it). run/faults.log in that folder journals every fault with
// its time, server and pid, and every violation.
//
// The Regress tests (go test -tags soak -run Regress ./soak) reproduce, in
// seconds, what the soak found.
//
// Faults, chosen at random with fixed weights:
//   - kill: SIGKILL one server's process;
//   - stopcont: SIGSTOP one server, SIGCONT it 0.2-2 s later;
//   - portgrab: remove a server's file, let a stranger bind its freed port,
//     declare the server again; the stranger holds the port 1-8 s (or to the
//     end, when the faults stop first: the server's expected state is then
//     Quarantined / PortConflict);
//   - badfile: write a server's file half-way, or with a YAML syntax error,
//     an unknown field or a bad port, then restore it 0.3-2 s later;
//   - addremove: remove a declared server's file, or declare one (again);
//   - killup: SIGKILL `procfleet up` itself and start it again;
//   - corrupt: corrupt a running server's record (garbage, truncated, mode
//     0666, or owned by uid 65534 when run as root);
//   - stranger: start a stranger process with a server's exact command line;
//   - exec: edit the file (an environment value) of a server whose process
//     no longer shows what was spawned, and wait for it to be replaced.
//     Half the fleet is launched that way: `sh -c 'exec testserver ...'`,
//     a pyenv-style shim (a script that execs /usr/bin/env, which execs
//     the test server), or the test server rewriting its argument area and
//     wiping its environment (-retitle, as nginx does); kill, addremove,
//     killup and the final down act on these servers as on the others;
//   - pgid: set a running server's record's pgid to the process group of a
//     stranger the soak started (a group leader with a member, both
//     recording signals; at most 3 a run, alive to the end), the record
//     valid in every other way: untrusted (rule 7), moved aside when read,
//     the stranger's group never signalled;
//   - foreign: start a server with `procfleet apply` in a project folder
//     of its own (at most 3 a run) and copy its record into the soak's
//     state folder, over a running server's record or as an undeclared
//     spare's: foreign (rule 7), moved aside (.foreign-<time>), never acted
//     on; the other folder's server must get no signal, and `procfleet
//     down` in its own folder stops it at the end;
//   - intent: kill -9 the actor (up, or apply while no up runs) between the
//     intent record and the full record of a spawn, then start up: the
//     process carrying the intent's token is adopted (same pid, started
//     once). The window is real: the soak builds procfleet with
//     -tags procfleet_testhooks, whose actor, given
//     PROCFLEET_TESTHOOK_PAUSE_AFTER_SPAWN=<server>=<file>, writes the
//     spawned pid to <file> and blocks right after the spawn (off with
//     -soak.procfleet).
//
// The faults end with a final burst (SIGKILL to a third of the running
// servers, at most 10, at once); convergence is measured from there, per
// server, at 10 ms resolution (its process running, its port accepting),
// and confirmed by `procfleet status -o json`.
//
// Invariants:
//   - never two live instances of one server (a /proc scan every 20 ms; the
//     strangers the soak started itself are told apart by pid);
//   - no stranger ever signalled (a stranger records every catchable signal
//     to a file; its exit and its stopped state are watched);
//   - a server's process survives a broken fleet file, a SIGSTOP and a
//     restart of `up` (adopted, same pid);
//   - a removed server is stopped, its port freed and its record removed;
//   - once faults stop, every declared server converges (Ready, or its
//     expected quarantine) within -soak.converge;
//   - a Ready server has exactly one process, its record names that pid
//     (and a pgid equal to it), its log exists and its port accepts;
//   - after `procfleet down` no process of the fleet remains and every port
//     is free, except the processes whose records were moved aside as
//     untrusted or foreign (rule 7: procfleet cannot prove them its own),
//     which the soak kills itself and counts;
//   - every corrupted record still in place when `up` read it was moved
//     aside (*.corrupt-*), never deleted;
//   - environment values (a secret in every server's env) never appear in
//     procfleet's own output or events.
//
// Every process the soak starts (up, strangers) and every process of its
// fleet (matched by the exact command line, which names the soak's private
// temporary folder) is killed by pid when the test ends, even on failure.
package soak
