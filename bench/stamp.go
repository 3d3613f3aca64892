package main

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// Stamp is one line of a workload's stamp file: when an instance started and
// its pid.
type Stamp struct {
	Time time.Time
	PID  int
}

// ParseStamps parses a stamp file's content: lines "<unix ns> <pid>". A
// final line without its newline is a write in progress and is ignored; any
// other malformed line is an error naming its line number.
func ParseStamps(data []byte) ([]Stamp, error) {
	var out []Stamp
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // partial last line
		}
		line := data[:i]
		data = data[i+1:]
		st, err := parseStampLine(line)
		if err != nil {
			return nil, fmt.Errorf("stamp line %d: %w", n, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func parseStampLine(line []byte) (Stamp, error) {
	fields := bytes.Fields(line)
	if len(fields) != 2 {
		return Stamp{}, fmt.Errorf("want \"<unix ns> <pid>\", got %q", line)
	}
	ns, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil || ns <= 0 {
		return Stamp{}, fmt.Errorf("bad time %q", fields[0])
	}
	pid, err := strconv.Atoi(string(fields[1]))
	if err != nil || pid <= 0 {
		return Stamp{}, fmt.Errorf("bad pid %q", fields[1])
	}
	return Stamp{Time: time.Unix(0, ns), PID: pid}, nil
}
