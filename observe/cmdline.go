package observe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of FormatCmdline. A message names a command line so that a person
// recognises the process; 200 runes show any real command's program and
// its first arguments, and 80 runes of one argument show a path or a flag.
const (
	cmdlineMaxRunes    = 200
	cmdlineArgMaxRunes = 80
)

// FormatCmdline renders an argv for a message: each argument quoted, in
// brackets (["nginx: master process" "-g" "daemon off;"]). Trailing empty
// arguments are dropped (a program that retitles itself pads its title with
// them: redis leaves about 50); an argument longer than 80 runes, and a
// command line longer than 200, are cut with an ellipsis, and the number of
// arguments left out is said. An empty argv is "[]".
func FormatCmdline(argv []string) string {
	for len(argv) > 0 && argv[len(argv)-1] == "" {
		argv = argv[:len(argv)-1]
	}
	var b strings.Builder
	b.WriteByte('[')
	used := 0
	for i, a := range argv {
		if utf8.RuneCountInString(a) > cmdlineArgMaxRunes {
			a = string([]rune(a)[:cmdlineArgMaxRunes-1]) + "…"
		}
		q := strconv.Quote(a)
		n := utf8.RuneCountInString(q)
		if i > 0 && used+n+1 > cmdlineMaxRunes {
			b.WriteString(" … +" + strconv.Itoa(len(argv)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
			used++
		}
		b.WriteString(q)
		used += n
	}
	b.WriteByte(']')
	return b.String()
}
