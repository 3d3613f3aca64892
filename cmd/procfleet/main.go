// Command procfleet keeps a fleet of local server processes in the state that
// YAML files declare.
package main

func main() {}
