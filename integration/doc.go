// Package integration is procfleet's end-to-end suite with real servers:
// nginx, redis, postgres and memcached from Debian's packages, run from the
// fleet of examples/real-servers through the real procfleet binary and its
// CLI (`up` in the background, `apply`, `status -o json`, `describe`,
// `down`). It is a go test behind the build tag "integration", Linux only:
//
//	integration/run.sh                                  # what CI runs (as root)
//	go test -tags integration -v -count=1 ./integration # the same, by hand
//
// What it holds procfleet to, for each server (nginx with 2 workers and
// `daemon off`, redis with its default title, postgres run as the user
// postgres with procfleet as root and with procfleet as that user,
// memcached -u nobody), each scenario on a fresh fleet:
//   - ready: started and probed Ready, and it answers its own protocol;
//   - kill: its main process (nginx's master, the postmaster) killed with
//     SIGKILL is restarted and Ready, and nothing of the old instance is
//     left;
//   - edit: an edit of its args replaces it, and nothing of the old
//     instance is left;
//   - adopt: after `up` itself is killed with SIGKILL and started again,
//     the same process is Running and Ready, adopted, and no second
//     instance runs;
//   - down: `down` exits 0, nothing is left and the port is free;
//   - agree: `status -o json` and `describe` say the same thing (phase,
//     readiness, pid, and never "Running, ready" for a process procfleet
//     says it will not signal), before and after an args edit.
//
// Also nginx without `daemon off` (reported Failed / Daemonized, its daemon
// stopped, nothing left after `down`), the whole example fleet (apply
// --wait in dependency order, the app reaching postgres, redis and
// memcached through nginx, down leaving nothing), and a control:
// redis-server --set-proc-title no, which keeps the command line procfleet
// recorded, so every scenario can pass on a procfleet that checks command
// lines.
//
// "Nothing left" is counted by a /proc scan, not by asking procfleet: every
// process whose environment carries one of the fleet's PROCFLEET_INSTANCE
// tokens (from its records) or the marker the suite puts in procfleet's own
// environment (which every server inherits unless it overwrites its
// environment, as retitling servers do), every process whose working folder
// is under the test's folder (where procfleet starts the servers and where
// postgres moves to), every process of the packages' binaries whose command
// line names that folder, every holder of one of the test's ports, and
// every descendant of those. procfleet's own processes (its binary, and the
// exec probes in the session of an `up` the test started) are not counted;
// the probes a killed `up` leaves must end on their own within a bound.
//
// Every process a test starts (`up`, and every process the scan finds) is
// killed when the test ends, even on failure: pinned with a pidfd, checked
// to have the start time the scan saw, then signalled through the pidfd.
// Waits are on events or on polls with a deadline, never fixed sleeps.
//
// The suite installs the packages when they are missing (as root, with
// apt-get and a policy-rc.d that exits 101 so their system services do not
// start); -integration.install=false makes a missing package an error
// instead. -integration.procfleet=PATH tests a prebuilt binary instead of
// building ./cmd/procfleet. Run as another user than root, TestPostgres
// (procfleet as root, postgres dropping to its user) is skipped with the
// reason, the postgres-as-user scenarios run procfleet as the test's user,
// and nothing changes uid.
package integration
