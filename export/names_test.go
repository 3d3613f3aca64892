package export

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// k8sNameCases are values at the edges of Kubernetes' name rules: lengths
// at and past the limits, dots, slashes, case, digits first, "..",
// non-ASCII and invalid UTF-8.
var k8sNameCases = []string{
	"", "a", "A", "0", "-", ".", "..", "...", "..x", ".x", "_", "a.", "a-", "-a", "_a", "a_",
	"api", "1api", "api-1", "a--b", "Api", "aPi", "a.b", "a.b.c", "a..b", ".a.b", "a.b.", "a b", "a\tb", "a\nb",
	"my.env-name", "MY_ENV.NAME", "MyEnvName1", "1ABC", "x y", "A=B", "é", "a\xffb", "\xff",
	"a/b", "/b", "a/", "/", "a/b/c", "//", "example.com/name", "Example.com/name", "ex_ample.com/name",
	"example.com/-name", "example.com/name-", "example.com/na.me", "example.com/na_me", "-bad", "-bad-value",
	"app.kubernetes.io/name", "procfleet.dev/image",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 62) + "-", strings.Repeat("a", 63) + ".b",
	strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 127) + "a", strings.Repeat("a", 254) + "/x",
	strings.Repeat("a", 253) + "/x", "x/" + strings.Repeat("b", 63), "x/" + strings.Repeat("b", 64),
	strings.Repeat("A", 64), strings.Repeat("1", 64), strings.Repeat(".", 64),
}

// first is the first message of apimachinery's list, "" for none.
func first(msgs []string) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[0]
}

// checkK8sNames fails for every rule whose message for s is not the
// first of apimachinery's function's messages.
func checkK8sNames(t *testing.T, s string) {
	t.Helper()
	rules := []struct {
		name     string
		own, api func(string) string
	}{
		{"IsDNS1123Label", k8sDNS1123Label, func(s string) string { return first(validation.IsDNS1123Label(s)) }},
		{"IsDNS1035Label", k8sDNS1035Label, func(s string) string { return first(validation.IsDNS1035Label(s)) }},
		{"IsEnvVarName", k8sEnvVarName, func(s string) string { return first(validation.IsEnvVarName(s)) }},
		{"IsQualifiedName", k8sLabelKey, func(s string) string { return first(validation.IsQualifiedName(s)) }},
		{"IsValidLabelValue", k8sLabelValue, func(s string) string { return first(validation.IsValidLabelValue(s)) }},
	}
	for _, r := range rules {
		if got, want := r.own(s), r.api(s); got != want {
			t.Errorf("%s(%q):\n got %q\nwant %q", r.name, s, got, want)
		}
	}
}

// TestK8sNamesAgree: the export's name rules give apimachinery's verdict
// and message for each value of the table.
func TestK8sNamesAgree(t *testing.T) {
	accepted := 0
	for _, s := range k8sNameCases {
		checkK8sNames(t, s)
		if k8sLabelKey(s) == "" {
			accepted++
		}
	}
	// The table is no use if every value is refused.
	if accepted == 0 {
		t.Fatalf("no value of the table is a valid label key")
	}
}

func FuzzK8sNames(f *testing.F) {
	for _, s := range k8sNameCases {
		f.Add(s)
	}
	f.Fuzz(checkK8sNames)
}
