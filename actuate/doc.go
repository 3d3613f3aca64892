// Package actuate changes the world: it starts servers, stops them with
// escalation, and keeps the ownership records that prove which processes are
// procfleet's to signal.
package actuate
