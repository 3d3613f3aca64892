// Package testserver is a small, configurable server process for procfleet's
// own tests: it listens on a loopback port, answers /health, prints a line
// on stdout when asked (/print?line=S), records the signals it receives,
// and can be told to misbehave (ignore SIGTERM, exit early, delay
// listening, spawn a grandchild that stays in its process group or escapes
// it).
//
// Tests run it in one of two ways:
//   - from the test binary itself: call RunIfHelper at the top of TestMain,
//     then start Command(...) with Env() added to the environment;
//   - as a real binary: Build(t) compiles ./internal/testserver/cmd/testserver
//     once per test binary and returns its path.
//
// Ports: FreePort(t) picks a loopback port that was free a moment ago;
// two calls may return the same one, so a test that needs several takes
// FreePorts(t, n), n distinct ports. PortFree(port) says whether nothing
// holds a port on loopback now.
package testserver
