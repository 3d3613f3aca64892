// Command testserver is procfleet's test server as a stand-alone binary; see
// package testserver for its flags.
package main

import (
	"os"

	"github.com/procfleet/procfleet/internal/testserver"
)

func main() {
	os.Exit(testserver.Main(os.Args[1:], os.Stdout, os.Stderr))
}
