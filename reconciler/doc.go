// Package reconciler runs procfleet's level-triggered loop: desired state
// from the fleet files, observed state from the processes, a pure plan of
// actions between them, and the actuator that carries the plan out.
//
// The pipeline, once:
//
//	fleet files --FleetWatcher--> desired (spec.Fleet, hashes)
//	exit events, probe results, file changes, resync --> work queue (names)
//	worker: observe one server anew --> Plan --> apply (actuate)
//
// Guarantees:
//   - Level-triggered. A trigger (process exit, probe result, file change,
//     periodic resync, default every 30 s) only marks a server dirty; the
//     worker reads that server's whole state anew (its tracked process, or
//     its record verified against the kernel). Exits are events (pidfd or
//     kqueue through observe.ExitWatcher), never found by polling. A Ready
//     server without declared probes costs nothing between resyncs; a
//     resync reads again only the records whose file changed since their
//     last trusted read (inode, change time, size, mode), so a record
//     turned untrusted is still moved aside at the next one.
//   - One writer. Only the worker that holds a server's key changes its
//     state, and only through the named transitions of state.go, each
//     legal from a listed set of phases (an illegal one is an error). Exit
//     watchers, readiness waits, probes, exit-status looks and record scans
//     post what they learn to the server's inbox and enqueue it.
//   - Stingy. The queue (queue, workqueue.go)
//     dedups names; a server being reconciled is only marked dirty and runs
//     once more after; one server is never reconciled by two workers at
//     once; Workers bounds the parallelism.
//   - Plan decides. Plan and PlanServer map (desired, observed) to actions
//     (Start, Stop, Replace, Quarantine, Wait, Adopt, Nothing) with a reason,
//     including apply's one-shot rules and whether a start forgets the
//     crash loop; applying them is the only side effect, in numbered steps.
//   - One "done". settled decides, for apply (with and without --wait),
//     Converge, Reload's wait and down, whether a server is done, and only
//     from a pass made after the wait began. apply --wait gives up on a
//     server that is Failed or Quarantined, has exited twice before it was
//     Ready, exited after it was Ready since the wait began, or waits for
//     a dependency given up on; it never counts a server Ready that is not.
//   - minReadySeconds. A server counts as Ready (status, dependsOn, apply
//     --wait) only once its readiness has held that long without a break
//     or an exit, counted from when it first held (for "running", from the
//     spawn); meanwhile it is Running, not Ready, reason MinReadySeconds,
//     and an exit is an exit before Ready. Plan decides when the window
//     ends and looks again then.
//   - Plain start failures. A program that cannot be executed is reported
//     as spec.FindProgram words it ("program ./bin/api not found in
//     workingDir /repo/svc"), never as fork/exec; an exit carries the last
//     lines the process wrote to its log.
//   - One observation. Inspect, the read-only snapshot that status,
//     describe and diff take without up, verifies records with the same
//     ObservedFromRecord and runs probes with the same ProbeOnce as up.
//   - Never twice. Every record that ownership rule 2 proves is adopted
//     (watched, probed), never started again; a server being started is
//     never started again until its readiness wait ends.
//   - Never a stranger. Quarantined servers (rules 4-7, PortConflict,
//     Unkillable) are reported and never signalled (a quarantined process
//     is pinned for its exit only, so that a stop by hand is seen at once);
//     a stale or reused record is removed without a signal. An
//     UntrustedRecord quarantine is lifted once the process its moved-aside
//     record named is gone, the port is free and no process runs the
//     declared command line; a tracked server whose record turns untrusted
//     gets a fresh record written from its pinned process.
//   - A held port is waited for: a PortConflict quarantine re-reads the
//     socket tables from 100 ms, doubling to 1 s, and the server starts
//     once the port is free.
//   - Parallel. Starting only spawns on a worker; readiness is awaited on
//     its own goroutine, so independent servers start in parallel.
//     dependsOn orders starts (dependents wait for Ready) and prunes and
//     down (dependents stop first).
//   - Replicas. The desired state is keyed by instance: "api", or
//     "api-0" ... "api-<n-1>" for spec.replicas, each on its own port
//     (spec.port + index), record, log and events file. Scaling down stops
//     the instances beyond the count, in parallel; scaling up starts the
//     new ones, touching no other; any other change replaces the replicas
//     one at a time, in index order, each only while every other is
//     Ready (a replica that is down already goes at once), so at most one
//     is down; apply waits for the last. dependsOn waits for every
//     instance. A server's name in a request stands for all its instances
//     (ExpandNames).
//   - Restarts follow restartPolicy and Backoff, pure arithmetic: an exit
//     after 10 s of Ready restarts at once and resets the count; sooner,
//     the first restart is immediate, the n-th waits 1 s x 2^(n-2), capped
//     at 60 s (CrashLoopBackOff meanwhile); a fresh start (new spec) resets
//     it. The reason says which rule applied. apply restarts a first exit
//     before Ready and gives up at the second, or at an exit after Ready.
//   - File events are hints. Folders are watched for names created, moved
//     and removed, and the fleet and env files for their content (on Linux
//     the kernel drops everything else, so a busy log beside them costs
//     nothing); events on names that cannot change what spec.Load reads
//     are ignored, the rest debounced; then every file is re-read and
//     compared by content, so a save that changes nothing changes nothing
//     running. A file caught half-written never stops, replaces or starts
//     a server: a read that differs from the fleet in force is applied
//     only once every changed file is whole (FleetWatcher's confirmer, a
//     pure function of events and reads): on Linux once no writer has it
//     open, so an in-place save applies when its writer closes the file
//     however long it stalls, an atomic save at once; a removed file, and
//     elsewhere a file written in place, once its content stayed the same
//     for 1 s. An inotify overflow re-reads everything; a file that does
//     not load keeps the last good fleet in force and shows its errors
//     (Status.Errors).
//   - Reported. Every event (starting, ready, exited with reason, backing
//     off, replaced, stopped, adopted, quarantined, and each signal with its
//     evidence) is logged with the server's name, kept in a bounded ring per
//     server and appended to the server's events file, by up, apply and
//     down alike; status.json is rewritten after changes, at most every
//     50 ms.
//   - Requests by name. Stop, Start and Restart (the CLI verbs, the API's
//     and the dashboard's) return once the reconciler has taken them;
//     Request.Wait tells how they end. A stop is a hold: the server stays
//     stopped through resyncs, exits of other servers and restarts of up
//     (held.json in the state folder, read in setup) until Start, Restart,
//     apply, or a change to its fleet file or env files (also one made
//     while no up ran: the hold keeps the server's fingerprint). Start and
//     Restart lift the holds of the servers and of what they depend on;
//     a server not running then starts at once, afresh, whatever its last
//     exit, restart policy or backoff; Restart replaces a running one
//     (graceful stop, port released, fresh start) and never its
//     dependents, and a quarantined server refuses it. A request counts as
//     carried out only from the pass that acts on it, so a wait never
//     ends on what the server showed before. Act does the same without up.
//   - Logs rotated. Run rotates the servers' logs (logs/*.log) that have
//     reached Config.LogRotation's size as it starts and on each periodic
//     resync, as the holder of the state folder's lock.
//
// Faults (each made for real in faults_linux_test.go):
//   - The state folder full or read-only when a server's record is
//     written: Spawn SIGKILLs the child it has just started (its own,
//     pinned at spawn) and reaps it before it reports, so no process runs
//     without a record; the start fails with the cause ("write record: ...:
//     no space left on device" in the last exit, the phase and a Failed
//     event), is retried with the restart backoff (CrashLoopBackOff
//     meanwhile; Failed with apply at the second failure), and succeeds
//     once there is room. Other servers are not touched.
//   - A record that cannot be removed: a stop of a proven process still
//     stops it, then fails saying "pid N stopped, but its record stays"
//     (phase Failed, a Failed event; down reports it). The record left names
//     an exited process: each later pass finds it stale and removes it,
//     signalling nothing; until that works nothing else is done for the
//     server (no start over it), the status message and a RecordFailed
//     event say why, and the pass is retried with the queue's backoff (50 ms
//     doubling to 30 s) and at each resync.
//   - The untrusted record of a tracked server that cannot be rewritten:
//     the server stays Running (its pidfd proves it), never quarantined;
//     a RecordFailed event and the status message say so, and every pass
//     writes it again (queue backoff) until RecordRewritten.
//   - status.json or an events file that cannot be written: logged as an
//     error once per run of failures (then at V(1)), and its recovery once;
//     nothing waits on it, status.json keeps its last whole content.
//   - /proc/PID unreadable when a record is verified (rule 6): Quarantined /
//     UnverifiedOwner, "cannot read the identity of pid N", the record kept,
//     nothing signalled or started; each resync verifies it again and adopts
//     it once it reads. A tracked server does not need /proc to stay
//     tracked (the pidfd tells its exit): it stays Running; a stop of it
//     re-verifies, so it is refused the same way (Quarantined, not Ready,
//     down fails), and that quarantine is not kept once a resync verifies
//     it.
//
// Run is `procfleet up`; Converge is `procfleet apply`; Down is
// `procfleet down` (DownServers through a running up); Stop, Start and
// Restart are `procfleet stop`, `start` and `restart` through up (Act
// without it); Inspect is what status, describe and diff see without up. ARCHITECTURE.md at the root of
// the repository draws the state machine and maps DESIGN.md's rules to the
// code.
package reconciler
