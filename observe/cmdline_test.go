package observe

import (
	"strings"
	"testing"
)

func TestFormatCmdline(t *testing.T) {
	redis := append([]string{"/usr/bin/redis-server 127.0.0.1:22379"}, make([]string, 50)...)
	long := strings.Repeat("x", 100)
	many := make([]string, 40)
	for i := range many {
		many[i] = "--flag-number-" + strings.Repeat("n", 3)
	}
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"empty", nil, "[]"},
		{"only empty arguments", []string{"", ""}, "[]"},
		{"plain", []string{"sleep", "3111"}, `["sleep" "3111"]`},
		{"quotes and spaces", []string{"sh", "-c", `echo "hi"; exec x`}, `["sh" "-c" "echo \"hi\"; exec x"]`},
		{"redis title padding dropped", redis, `["/usr/bin/redis-server 127.0.0.1:22379"]`},
		{"empty argument in the middle kept", []string{"a", "", "b", ""}, `["a" "" "b"]`},
		{"long argument cut", []string{"prog", long}, `["prog" "` + strings.Repeat("x", 79) + `…"]`},
		{"many arguments cut with a count", many, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FormatCmdline(tt.argv)
			if tt.want != "" && got != tt.want {
				t.Fatalf("FormatCmdline = %s, want %s", got, tt.want)
			}
			if n := len([]rune(got)); n > cmdlineMaxRunes+20 {
				t.Errorf("FormatCmdline gave %d runes, want about %d at most: %s", n, cmdlineMaxRunes, got)
			}
		})
	}
	got := FormatCmdline(many)
	if !strings.HasPrefix(got, `["--flag-number-nnn" "--flag-number-nnn"`) || !strings.HasSuffix(got, `" … +30 more]`) {
		t.Errorf("FormatCmdline(40 flags) = %s, want the first 10 flags and \"… +30 more\"", got)
	}
}
