package spec

import "encoding/json"

// Fingerprint is the content of f.Servers[i] as bytes: every field of its
// document (its JSON, without its position in the file) and, for each env
// file it reads, the path and the variables it sets. Two servers with the
// same fingerprint are declared alike, whatever moved in their files. A
// fleet from a Loader has each one computed once per document; the
// returned bytes are shared: do not change them.
func (f *Fleet) Fingerprint(i int) []byte {
	if f.prints != nil {
		return f.prints[i]
	}
	return f.Servers[i].Fingerprint()
}

// Fingerprint is the server's content as bytes (see Fleet.Fingerprint),
// computed anew.
func (s *Server) Fingerprint() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		b = []byte(err.Error())
	}
	for _, e := range s.EnvFiles {
		b = append(b, "\nenvFile "...)
		b = append(b, e.Path...)
		b = append(b, '\n')
		b = e.AppendPrint(b)
	}
	return b
}

// AppendPrint appends what the env file sets to b: each variable's name,
// a NUL, its value and a newline, in file order.
func (e *EnvFile) AppendPrint(b []byte) []byte {
	for _, v := range e.Vars {
		b = append(b, v.Name...)
		b = append(b, 0)
		b = append(b, v.Value...)
		b = append(b, '\n')
	}
	return b
}
