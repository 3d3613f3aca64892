// Package observe tells what is running: process identity, liveness, exit
// notification, listening ports and their owners, and probes.
package observe
