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
	// With batches and PROCFLEET_LOGFILE_TEST_ACK set, a byte on descriptor
	// 3 says that a batch is written.
	batch, _ := strconv.Atoi(os.Getenv("PROCFLEET_LOGFILE_TEST_BATCH"))
	in := bufio.NewReader(os.Stdin)
	var ack *os.File
	if os.Getenv("PROCFLEET_LOGFILE_TEST_ACK") != "" {
		ack = os.NewFile(3, "ack")
	}
	for i := 0; i < n; i++ {
		if batch > 0 && i%batch == 0 {
			if i > 0 && ack != nil {
				_, _ = ack.Write([]byte{'.'})
			}
			if _, err := in.ReadByte(); err != nil {
				return 0
			}
		}
		if _, err := fmt.Fprintf(os.Stdout, "%08d %s\n", i, "the quick brown fox jumps"); err != nil {
			return 3
		}
	}
	if batch > 0 && ack != nil {
		_, _ = ack.Write([]byte{'.'})
	}
	return 0
}
