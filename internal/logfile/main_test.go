package logfile

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// writerEnv makes the test binary a writer process: it writes lines
// "%08d <padding>" numbered from 0 to stdout, one write per line, the count
// given by the variable, as a server writes its log.
const writerEnv = "PROCFLEET_LOGFILE_TEST_WRITER"

func TestMain(m *testing.M) {
	if n := os.Getenv(writerEnv); n != "" {
		os.Exit(writerMain(n))
	}
	os.Exit(m.Run())
}

func writerMain(count string) int {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Optional pacing: stdin delivers one byte per batch to write when
	// PROCFLEET_LOGFILE_TEST_BATCH is set.
	batch, _ := strconv.Atoi(os.Getenv("PROCFLEET_LOGFILE_TEST_BATCH"))
	in := bufio.NewReader(os.Stdin)
	for i := 0; i < n; i++ {
		if batch > 0 && i%batch == 0 {
			if _, err := in.ReadByte(); err != nil {
				return 0
			}
		}
		if _, err := fmt.Fprintf(os.Stdout, "%08d %s\n", i, "the quick brown fox jumps"); err != nil {
			return 3
		}
	}
	return 0
}
