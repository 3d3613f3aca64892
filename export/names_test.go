package export

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// k8sNameCases are values at the edges of Kubernetes' name rules: lengths
// at and past the limits, dots, slashes, case, digits first, "..",
// non-ASCII and invalid UTF-8.
var k8sNameCases = []string{
	"", "a", "$", "a$b", "%i", "a@b", "a+b=c:d,e./f", "a;b", "a'b", "a\\b", "a\"b", "A", "0", "-", ".", "..", "...", "..x", ".x", "_", "a.", "a-", "-a", "_a", "a_",
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

// The expressions the loops of the systemd escaping and of validateName
// stand for.
var (
	systemdEnvNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	safeWordRE       = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./$-]+$`)
	dnsLabelRE       = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// checkNameRules fails for every Kubernetes rule whose message for s is
// not the first of apimachinery's function's messages, and for every
// other rule that does not give its regular expression's verdict.
func checkNameRules(t *testing.T, s string) {
	t.Helper()
	for _, r := range []struct {
		name string
		own  func(string) bool
		re   *regexp.Regexp
	}{
		{"envName", envName, systemdEnvNameRE},
		{"safeWord", safeWord, safeWordRE},
		{"dns1123Shaped", dns1123Shaped, dnsLabelRE},
	} {
		if got, want := r.own(s), r.re.MatchString(s); got != want {
			t.Errorf("%s(%q) = %v, want %v", r.name, s, got, want)
		}
	}
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

// TestNameRulesAgree: the export's name rules give apimachinery's verdict
// and message, or their expression's verdict, for each value of the table.
func TestNameRulesAgree(t *testing.T) {
	accepted := 0
	for _, s := range k8sNameCases {
		checkNameRules(t, s)
		if k8sLabelKey(s) == "" {
			accepted++
		}
	}
	// The table is no use if every value is refused.
	if accepted == 0 {
		t.Fatalf("no value of the table is a valid label key")
	}
}

func FuzzNameRules(f *testing.F) {
	for _, s := range k8sNameCases {
		f.Add(s)
	}
	f.Fuzz(checkNameRules)
}
