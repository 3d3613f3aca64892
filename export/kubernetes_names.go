package export

import "strings"

// Kubernetes' rules for the names the export writes, each returning why a
// value is refused ("" when it is accepted) in the words of the first
// message of the k8s.io/apimachinery function named, which a warning or an
// error quotes (names_test.go compares both on every value of its table
// and under fuzzing). Written as loops over bytes: they run per server, and
// the regular expressions apimachinery compiles at package init cost
// every run of the binary.

const (
	k8sLabelReason     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	k8sDNS1035Reason   = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
	k8sSubdomainReason = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	k8sEnvNameReason   = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
	k8sKeyNameReason   = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	k8sKeyReason       = "a valid label key " + k8sKeyNameReason + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	k8sValueReason     = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

func isLower(c byte) bool    { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool    { return isLower(c) || c >= 'A' && c <= 'Z' }
func isLowerNum(c byte) bool { return isLower(c) || isDigit(c) }
func isAlnum(c byte) bool    { return isAlpha(c) || isDigit(c) }

// shaped reports whether s is not empty, its first byte passes first, its
// last passes last, and every byte passes inner (the first and last too).
func shaped(s string, first, last, inner func(byte) bool) bool {
	if s == "" || !first(s[0]) || !last(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !inner(s[i]) {
			return false
		}
	}
	return true
}

func labelByte(c byte) bool { return isLowerNum(c) || c == '-' }

// dns1123Shaped is [a-z0-9]([-a-z0-9]*[a-z0-9])?, without a length limit.
func dns1123Shaped(s string) bool { return shaped(s, isLowerNum, isLowerNum, labelByte) }

// subdomainShaped is dns1123Shaped parts joined by dots.
func subdomainShaped(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if !dns1123Shaped(part) {
			return false
		}
	}
	return true
}

// k8sDNS1123Label is validation.IsDNS1123Label's first message.
func k8sDNS1123Label(s string) string {
	switch {
	case len(s) > 63:
		return "must be no more than 63 characters"
	case dns1123Shaped(s):
		return ""
	case subdomainShaped(s):
		return "must not contain dots"
	default:
		return k8sLabelReason
	}
}

// k8sDNS1035Label is validation.IsDNS1035Label's first message.
func k8sDNS1035Label(s string) string {
	switch {
	case len(s) > 63:
		return "must be no more than 63 characters"
	case shaped(s, isLower, isLowerNum, labelByte):
		return ""
	default:
		return k8sDNS1035Reason
	}
}

// k8sEnvVarName is validation.IsEnvVarName's first message.
func k8sEnvVarName(s string) string {
	envByte := func(c byte) bool { return isAlnum(c) || c == '-' || c == '.' || c == '_' }
	envFirst := func(c byte) bool { return envByte(c) && !isDigit(c) }
	switch {
	case !shaped(s, envFirst, envByte, envByte):
		return k8sEnvNameReason
	case s == ".":
		return "must not be '.'"
	case s == "..":
		return "must not be '..'"
	case strings.HasPrefix(s, ".."):
		return "must not start with '..'"
	default:
		return ""
	}
}

// keyByte is a byte of a label key's name part or of a label value.
func keyByte(c byte) bool { return isAlnum(c) || c == '-' || c == '_' || c == '.' }

// k8sLabelKey is validation.IsQualifiedName's first message.
func k8sLabelKey(s string) string {
	prefix, name, slash := strings.Cut(s, "/")
	if !slash {
		name = prefix
	}
	switch {
	case strings.Contains(name, "/"):
		return k8sKeyReason
	case slash && prefix == "":
		return "prefix part must be non-empty"
	case slash && len(prefix) > 253:
		return "prefix part must be no more than 253 bytes"
	case slash && !subdomainShaped(prefix):
		return "prefix part " + k8sSubdomainReason
	case name == "":
		return "name part must be non-empty"
	case len(name) > 63:
		return "name part must be no more than 63 bytes"
	case !shaped(name, isAlnum, isAlnum, keyByte):
		return "name part " + k8sKeyNameReason
	default:
		return ""
	}
}

// k8sLabelValue is validation.IsValidLabelValue's first message.
func k8sLabelValue(s string) string {
	switch {
	case len(s) > 63:
		return "must be no more than 63 bytes"
	case s != "" && !shaped(s, isAlnum, isAlnum, keyByte):
		return k8sValueReason
	default:
		return ""
	}
}
