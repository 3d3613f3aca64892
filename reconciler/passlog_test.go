package reconciler

import (
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// passLogger logs what log.WithValues logs: the same entries, fields,
// names, levels and callers.
func TestPassLoggerLogsAsWithValues(t *testing.T) {
	script := func(l logr.Logger) {
		l.Info("plain", "k", 1)
		l.V(1).Info("verbose", "v", true)
		l.V(3).Info("not logged")
		l.Error(errors.New("boom"), "failed", "retries", 2)
		l.WithName("sub").WithValues("w", "x").Info("named")
		l.WithValues("server", "again").Info("duplicate key")
	}
	run := func(wrap func(logr.Logger) logr.Logger) []observer.LoggedEntry {
		core, logs := observer.New(zapcore.Level(-2)) // zapr's V(2)
		script(wrap(zapr.NewLogger(zap.New(core, zap.AddCaller())).WithName("r")))
		entries := logs.AllUntimed()
		for i := range entries {
			entries[i].Stack = ""
		}
		return entries
	}
	want := run(func(l logr.Logger) logr.Logger { return l.WithValues("server", "api", "reconcileID", 7) })
	got := run(func(l logr.Logger) logr.Logger { return passLogger(l, "server", "api", "reconcileID", 7) })
	if len(want) != 5 {
		t.Fatalf("WithValues logged %d entries, want 5", len(want))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("passLogger logged\n%+v\nWithValues logged\n%+v", got, want)
	}
	if l := passLogger(logr.Discard(), "server", "api"); l.Enabled() {
		t.Fatal("passLogger of a discarding logger is enabled")
	}
}

// BenchmarkPassLogger is one idle pass's logging under up's logger (zap's
// JSON to a file, info level): the pass logger made, and a V(1) check that
// logs nothing. BenchmarkPassLoggerWithValues is the same with WithValues.
func BenchmarkPassLogger(b *testing.B) {
	benchPassLog(b, func(l logr.Logger) logr.Logger { return passLogger(l, "server", "api", "reconcileID", 7) })
}

func BenchmarkPassLoggerWithValues(b *testing.B) {
	benchPassLog(b, func(l logr.Logger) logr.Logger { return l.WithValues("server", "api", "reconcileID", 7) })
}

func benchPassLog(b *testing.B, wrap func(logr.Logger) logr.Logger) {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel)
	log := zapr.NewLogger(zap.New(core)).WithName("reconciler")
	b.ReportAllocs()
	for b.Loop() {
		if l := wrap(log); l.V(1).Enabled() {
			b.Fatal("V(1) enabled at info level")
		}
	}
}
