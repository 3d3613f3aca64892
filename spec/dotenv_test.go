package spec

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseDotenv(t *testing.T) {
	type v struct {
		name, value string
		line        int
	}
	type e struct {
		line int
		msg  string
	}
	tests := []struct {
		name string
		in   string
		want []v
		errs []e
	}{
		{"empty", "", nil, nil},
		{"plain", "A=1\nB=two words\n", []v{{"A", "1", 1}, {"B", "two words", 2}}, nil},
		{"comments and blanks", "# a comment\n\n  # indented\nA=1\n", []v{{"A", "1", 4}}, nil},
		{"no trailing newline", "A=1", []v{{"A", "1", 1}}, nil},
		{"crlf", "A=1\r\nB=2\r\n", []v{{"A", "1", 1}, {"B", "2", 2}}, nil},
		{"export prefix", "export A=1\nexport\tB=2\nexported=3\n", []v{{"A", "1", 1}, {"B", "2", 2}, {"exported", "3", 3}}, nil},
		{"spaces around =", "A = 1\n  B=  2  \n", []v{{"A", "1", 1}, {"B", "2", 2}}, nil},
		{"empty value", "A=\nB=''\nC=\"\"\n", []v{{"A", "", 1}, {"B", "", 2}, {"C", "", 3}}, nil},
		{"inline comment", "A=1 # one\nB=a#b\nC=x\t# tab\n", []v{{"A", "1", 1}, {"B", "a#b", 2}, {"C", "x", 3}}, nil},
		{"single quotes literal", `A='a $B \n "c" # d'` + "\n", []v{{"A", `a $B \n "c" # d`, 1}}, nil},
		{"double quote escapes", `A="a\nb\tc \"q\" \\ \$x \w"` + "\n", []v{{"A", "a\nb\tc \"q\" \\ $x \\w", 1}}, nil},
		{"comment after quote", "A=\"x\" # c\nB='y'\n", []v{{"A", "x", 1}, {"B", "y", 2}}, nil},
		{"multi-line quoted", "A=\"one\ntwo\"\nB=3\nC='x\ny\nz'\nD=4\n", []v{{"A", "one\ntwo", 1}, {"B", "3", 3}, {"C", "x\ny\nz", 4}, {"D", "4", 7}}, nil},
		{"values stay literal", "A=$HOME\nB=${HOME}/x\nC=$(PORT)\nD=$$(X)\n", []v{{"A", "$HOME", 1}, {"B", "${HOME}/x", 2}, {"C", "$(PORT)", 3}, {"D", "$$(X)", 4}}, nil},
		{"equals in value", "URL=postgres://u:p@h/db?sslmode=disable&a=b\n", []v{{"URL", "postgres://u:p@h/db?sslmode=disable&a=b", 1}}, nil},
		{"dotted and underscored names", "_A=1\na.b=2\nX9=3\n", []v{{"_A", "1", 1}, {"a.b", "2", 2}, {"X9", "3", 3}}, nil},
		{"later wins is the caller's: both kept in order", "A=1\nA=2\n", []v{{"A", "1", 1}, {"A", "2", 2}}, nil},
		{"no equals", "A=1\nJUSTAWORD\nB=2\n", []v{{"A", "1", 1}, {"B", "2", 3}}, []e{{2, "expected KEY=VALUE"}}},
		{"bad name", "1A=x\nA B=y\nC-D=z\n", nil, []e{{1, `invalid variable name "1A"`}, {2, `invalid variable name "A B"`}, {3, `invalid variable name "C-D"`}}},
		{"text after quote", "A=\"x\" y\nB=1\n", []v{{"B", "1", 2}}, []e{{1, "A: unexpected text after the closing quote"}}},
		{"unclosed quote", "A=1\nB=\"never closed\nC=3\n", []v{{"A", "1", 1}}, []e{{2, "B: the quoted value is not closed"}}},
		{"NUL", "A=1\nB=\x00\n", nil, []e{{2, "NUL"}}},
		{"yaml style is not dotenv", "A: 1\n", nil, []e{{1, "expected KEY=VALUE"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars, errs := parseDotenv([]byte(tt.in))
			var got []v
			for _, x := range vars {
				if x.From.Kind != FromEnvFile {
					t.Errorf("%s: kind %q, want envFile", x.Name, x.From.Kind)
				}
				got = append(got, v{x.Name, x.Value, x.From.Line})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("vars = %+v\nwant   %+v", got, tt.want)
			}
			if len(errs) != len(tt.errs) {
				t.Fatalf("errors = %+v, want %+v", errs, tt.errs)
			}
			for i, w := range tt.errs {
				if errs[i].line != w.line || !strings.Contains(errs[i].msg, w.msg) {
					t.Errorf("error %d = line %d %q, want line %d ...%s...", i, errs[i].line, errs[i].msg, w.line, w.msg)
				}
			}
		})
	}
}

// TestDotenvErrorsHideValues: a syntax error names the line and the key,
// never the value (env files hold secrets).
func TestDotenvErrorsHideValues(t *testing.T) {
	for _, in := range []string{"TOKEN=\"s3cr3t\" trailing\n", "TOKEN='s3cr3t\n", "s3cr3t\n"} {
		_, errs := parseDotenv([]byte(in))
		if len(errs) == 0 {
			t.Fatalf("%q: no error", in)
		}
		for _, e := range errs {
			if strings.Contains(e.msg, "s3cr3t") {
				t.Errorf("%q: error %q shows the value", in, e.msg)
			}
		}
	}
}

func FuzzParseDotenv(f *testing.F) {
	for _, s := range []string{"A=1\n", "A=\"x\ny\"\n", "export A='b'", "#\n=\n", "A=\"\\", "A='"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		vars, errs := parseDotenv([]byte(s))
		lines := strings.Count(strings.ReplaceAll(s, "\r\n", "\n"), "\n") + 1
		for _, v := range vars {
			if v.Name == "" || v.From.Line < 1 || v.From.Line > lines {
				t.Fatalf("bad var %+v in %q", v, s)
			}
		}
		for _, e := range errs {
			if e.line < 1 || e.line > lines || e.msg == "" {
				t.Fatalf("bad error %+v in %q", e, s)
			}
		}
	})
}
