package spec

import (
	"fmt"
	"strings"
)

// suggest returns ", did you mean "x"?" for the known name nearest to name
// by edit distance (case-insensitive), or the list of valid names when none
// is near.
func suggest(name string, known []string) string {
	if best, near := NearestName(name, known); near {
		return fmt.Sprintf(", did you mean %q?", best)
	}
	if len(known) == 0 {
		return ""
	}
	return "; valid fields: " + strings.Join(known, ", ")
}

// editDistance is the Levenshtein distance between a and b, in bytes.
// Inputs are bounded by the callers (field names of at most maxNameLen).
func editDistance(a, b string) int {
	if len(a) > maxNameLen {
		a = a[:maxNameLen]
	}
	if len(b) > maxNameLen {
		b = b[:maxNameLen]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// NearestName returns the name of known nearest to name by edit distance
// (case-insensitive), and whether it is near enough to suggest: within two
// edits, or a third of its length for longer names. It is what "did you
// mean" messages about server names use.
func NearestName(name string, known []string) (string, bool) {
	best, bestDist := "", -1
	for _, k := range known {
		dist := editDistance(strings.ToLower(name), strings.ToLower(k))
		if bestDist < 0 || dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best, bestDist >= 0 && bestDist <= max(2, len(best)/3)
}
