package reconciler

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// appendEventJSON writes the bytes json.Marshal writes, for every escape
// encoding/json makes and for times in and out of its range.
func TestAppendEventJSON(t *testing.T) {
	strs := []string{
		"", "stopping", `sent SIGTERM to pid 12 "through" its pidfd pin; evidence: a\b`,
		"<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é ü 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x80", "\xed\xa0\x80 surrogate",
	}
	times := []time.Time{
		{},
		time.Date(2026, 12, 2, 21, 24, 19, 149321759, time.UTC),
		time.Date(2026, 12, 2, 21, 24, 19, 0, time.FixedZone("x", 5*3600+30*60)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Now(),
	}
	for _, tm := range times {
		for i, s := range strs {
			e := Event{Time: tm, Server: s, Type: EventNormal, Reason: strs[(i+1)%len(strs)], Message: strs[(i+2)%len(strs)], Detail: i%2 == 0}
			checkEventJSON(t, e)
		}
	}
}

func FuzzAppendEventJSON(f *testing.F) {
	f.Add("web", "Stopping", "stopping", int64(0), false)
	f.Add("<a>", "\u2028", "bad \xff", int64(1764710659149321759), true)
	f.Fuzz(func(t *testing.T, server, reason, message string, ns int64, detail bool) {
		checkEventJSON(t, Event{Time: time.Unix(0, ns).UTC(), Server: server, Type: EventWarning, Reason: reason, Message: message, Detail: detail})
	})
}

func checkEventJSON(t *testing.T, e Event) {
	t.Helper()
	want, werr := json.Marshal(e)
	got, gerr := appendEventJSON([]byte("x"), e)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%+v: error %v, json.Marshal's %v", e, gerr, werr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("%+v:\n got %s\nwant x%s", e, got, want)
	}
}
