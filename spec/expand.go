package spec

import "strings"

// Expand replaces every $(NAME) in s by lookup(NAME), as Kubernetes expands
// command, args and env values: "$$" is a literal "$" (so "$$(NAME)" is a
// literal "$(NAME)"), a reference lookup does not resolve stays as written,
// and a "$" that starts neither is kept. unresolved, when not nil, is called
// with the name of each reference left as written.
func Expand(s string, lookup func(name string) (string, bool), unresolved func(name string)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 { // no closing parenthesis: not a reference
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
				if unresolved != nil {
					unresolved(name)
				}
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// References lists the names that s refers to with $(NAME), in order, the
// escaped "$$(NAME)" left out.
func References(s string) []string {
	var out []string
	Expand(s, func(string) (string, bool) { return "", false }, func(name string) { out = append(out, name) })
	return out
}
