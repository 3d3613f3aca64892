package reconciler

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func init() {
	for name, typ := range map[string]dto.MetricType{
		"process_open_fds":              dto.MetricType_GAUGE,
		"process_resident_memory_bytes": dto.MetricType_GAUGE,
		"process_start_time_seconds":    dto.MetricType_GAUGE,
		"process_virtual_memory_bytes":  dto.MetricType_GAUGE,
	} {
		runtimeFamilies[name] = typ
	}
}

// TestProcessMetricsLinux: the process series agree with what the kernel
// says of this process: its RSS is above zero and below its virtual size,
// it started within the last hour, and it has open what /proc/self/fd lists.
func TestProcessMetricsLinux(t *testing.T) {
	mfs := scrapeFamilies(t, NewMetrics())
	rss, _ := value(mfs, "process_resident_memory_bytes", nil)
	vsz, _ := value(mfs, "process_virtual_memory_bytes", nil)
	if rss <= 0 || rss > vsz {
		t.Errorf("rss %v, virtual %v: want 0 < rss <= virtual", rss, vsz)
	}
	start, _ := value(mfs, "process_start_time_seconds", nil)
	// The test binary started in the last hour; btime and the start tick
	// are whole seconds and hundredths, hence the second of slack.
	if now := float64(time.Now().Unix()); start > now+1 || start < now-3600 {
		t.Errorf("process_start_time_seconds %v, now %v: want within the last hour", start, now)
	}
	fds, _ := value(mfs, "process_open_fds", nil)
	if fds < 3 {
		t.Errorf("process_open_fds %v, want at least stdin, stdout, stderr", fds)
	}
}

// TestParseSelfStat: the fields after the last ')' of a stat line whose
// command holds spaces and parentheses; a short or garbled line is refused.
func TestParseSelfStat(t *testing.T) {
	line := "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 9 0 123456 987654321 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, ok := parseSelfStat([]byte(line))
	if !ok || st != (selfStat{startTicks: 123456, vsize: 987654321, rssPages: 2500}) {
		t.Errorf("parseSelfStat = %+v, %v", st, ok)
	}
	for _, bad := range []string{"", "4242 (a", "4242 (a) S 1 2 3", "4242 (a) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 9 0 x 987654321 2500"} {
		if st, ok := parseSelfStat([]byte(bad)); ok {
			t.Errorf("parseSelfStat(%q) = %+v, want refused", bad, st)
		}
	}
}
