// Package reconciler runs procfleet's level-triggered loop: desired state
// from the fleet files, observed state from the processes, a pure plan of
// actions between them, and the actuator that carries the plan out.
package reconciler
