//go:build !linux

package actuate

// scanGroups has no whole-table scan here: addStragglers asks
// observe.GroupMembers for its own group instead (macOS: compile-checked
// only).
func scanGroups() (map[int][]int, error) { return nil, errNoGroupScan }
