// Package testutil holds test helpers shared by several packages' tests.
//
// Guarantees: every wait is bounded (30 s) and fails the test, never hangs
// it; every goroutine a helper starts has returned, or the test has failed
// saying so, by the end of the test. Only test code imports this package.
package testutil
