// Package api is the transport between a running `procfleet up` and the
// commands that talk to it (`apply`, `down`, `stop`, `start`, `restart`,
// `status`, `describe`): HTTP/1.1 over a Unix socket, procfleet.sock in the
// state folder (DESIGN.md "State folder").
//
// What it can do is fixed by the routes, and none of them accepts a spec, a
// command line or a path:
//
//	GET  /v1/ping                          is an `up` listening? (pid, api version)
//	GET  /v1/status[?name=N&name=M...]     the fleet, or the named servers
//	POST /v1/reload {"wait":B,"timeout":D} re-read the fleet files, converge
//	POST /v1/down   {"names":[...]} | {"all":true}   stop servers
//	GET  /v1/events/{name}                 a server's recent events
//	GET  /v1/ui                            the dashboard's URL (up --ui), with its token
//	POST /v1/stop    {"names":[...],"wait":B,"timeout":D}   stop, keep stopped
//	POST /v1/start   {"names":[...],"wait":B,"timeout":D}   start (lift a stop)
//	POST /v1/restart {"names":[...],"wait":B,"timeout":D}   replace now
//
// The reconciler implements Backend; results are whatever it returns,
// marshalled as JSON, so its status types stay in the reconciler.
//
// Guarantees:
//   - The socket file is mode 0600 whatever the umask: Listen binds at a
//     temporary name in the same folder, chmods and checks it, and only then
//     renames it to its final name, so no connection can reach it by that name
//     before its mode is tight.
//   - Every accepted connection is checked with the kernel's peer credentials
//     (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS) and closed unread unless
//     the peer's uid is our effective uid. Where peer credentials cannot be
//     read (other systems, or an error), the connection is refused. The file
//     mode is the first gate, the peer check the second; the client also checks
//     the server's uid, so a socket planted by another user is never talked to.
//   - A socket file left by a dead `up` (nobody accepts on it) is replaced; a
//     live one is never taken over (ErrInUse); a file that is not a socket, or
//     belongs to another user, is never removed or replaced. Listen expects its
//     caller to hold the state folder's lock, which makes the check-then-replace
//     free of races between two procfleet processes.
//   - Request bodies are small JSON objects (at most 64 KiB by default),
//     decoded strictly: unknown fields, trailing data, duplicate or invalid
//     server names (DNS labels) are rejected with 400 before the Backend sees
//     them. Errors are JSON: {"error": "...", "result": ...}.
//   - Every request runs under a context that ends when the client goes away
//     or the server shuts down; headers must arrive within 5 s and a body
//     within 10 s; idle connections are closed after a minute.
//   - Dial returns an error matching ErrNoServer when nobody listens (no socket
//     file, or a stale one), so a command can fall back to acting by itself.
//
// macOS support (LOCAL_PEERCRED through getsockopt_xucred) is compile-checked
// only: no macOS machine was available when it was written.
package api
