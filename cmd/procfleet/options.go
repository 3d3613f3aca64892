package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Log formats accepted by --log-format.
const (
	logFormatAuto    = "auto"    // console when stderr is a terminal, json otherwise
	logFormatConsole = "console" // human-readable lines
	logFormatJSON    = "json"    // one JSON object per line
)

// stateDirEnv overrides the default state folder; --state-dir overrides it.
const stateDirEnv = "PROCFLEET_STATE_DIR"

// defaultFleetFile is read when no -f is given.
const defaultFleetFile = "procfleet.yaml"

// globalOptions holds the flags shared by every command and what is derived
// from them. One value is created per root command; commands receive it from
// their constructor and read it in RunE, after flag parsing.
type globalOptions struct {
	// Files are the -f/--file values, in order; empty means procfleet.yaml.
	Files []string
	// StateDir is --state-dir; empty means PROCFLEET_STATE_DIR, then the default.
	StateDir string
	// LogFormat is --log-format: auto (default), console or json.
	LogFormat string
	// Verbosity is the count of -v: logs up to V(Verbosity) are written.
	Verbosity int

	// getenv reads the environment; tests replace it. nil means os.Getenv.
	getenv func(string) string
	// logOut receives the logs: the root command's stderr, set before RunE.
	logOut io.Writer

	mu   sync.Mutex // guards log and sync
	log  *logr.Logger
	sync func() error
}

// addFileFlags registers -f/--file on a command that reads fleet files.
//
// -f is registered per command, not on the root, because `logs NAME -f`
// (DESIGN.md) means "follow": a persistent -f on the root would clash with it.
// Every command that reads fleet files or finds the state folder through them
// (validate, up, apply, diff, status, down, describe) calls this.
func (o *globalOptions) addFileFlags(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&o.Files, "file", "f", nil,
		"fleet file, or folder of *.yaml/*.yml files, at `PATH` (repeatable; default "+defaultFleetFile+")")
}

// addPersistentFlags registers the flags every command accepts.
func (o *globalOptions) addPersistentFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.StateDir, "state-dir", "",
		"state folder `DIR` (default $"+stateDirEnv+", else .procfleet next to the first fleet file)")
	fs.StringVar(&o.LogFormat, "log-format", logFormatAuto,
		"log `FORMAT`: console, json, or auto (console when stderr is a terminal, json otherwise)")
	fs.CountVarP(&o.Verbosity, "verbose", "v", "more detailed logs (-v shows V(1) messages)")
}

// validate checks the flag values; it runs before any command.
func (o *globalOptions) validate() error {
	switch o.LogFormat {
	case logFormatAuto, logFormatConsole, logFormatJSON:
	default:
		return fmt.Errorf("invalid --log-format %q: want console, json or auto", o.LogFormat)
	}
	return nil
}

// FleetPaths returns the fleet files and folders to read: the -f values, or
// procfleet.yaml when there are none.
func (o *globalOptions) FleetPaths() []string {
	if len(o.Files) == 0 {
		return []string{defaultFleetFile}
	}
	return o.Files
}

// StateDirPath resolves the state folder: --state-dir, else
// $PROCFLEET_STATE_DIR, else .procfleet in the folder of the first fleet file
// (the folder itself when the first -f names a folder). The result is absolute.
func (o *globalOptions) StateDirPath() (string, error) {
	getenv := o.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	dir := o.StateDir
	if dir == "" {
		dir = getenv(stateDirEnv)
	}
	if dir == "" {
		first := o.FleetPaths()[0]
		base := filepath.Dir(first)
		if fi, err := os.Stat(first); err == nil && fi.IsDir() {
			base = first
		}
		dir = filepath.Join(base, ".procfleet")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve state folder %s: %w", dir, err)
	}
	return abs, nil
}

// Logger returns the logger for this invocation, built on first use: zap
// behind logr, writing to the command's stderr, console lines for a terminal
// and JSON lines otherwise (or as --log-format says), at V(0) plus one level
// per -v.
//
// Logger is safe for concurrent use.
func (o *globalOptions) Logger() logr.Logger {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.log != nil {
		return *o.log
	}
	out := o.logOut
	if out == nil {
		out = os.Stderr
	}
	zl := newZap(out, o.logFormat(out), o.Verbosity)
	l := zapr.NewLogger(zl)
	o.log = &l
	o.sync = zl.Sync
	return l
}

// logFormat is the effective log format for out: auto is console on a
// terminal, json otherwise.
func (o *globalOptions) logFormat(out io.Writer) string {
	format := o.LogFormat
	if format == "" || format == logFormatAuto {
		format = logFormatJSON
		if isTerminal(out) {
			format = logFormatConsole
		}
	}
	return format
}

// jsonLogs reports whether stderr gets one JSON object a line: then every
// line a command writes there (progress included) is a log entry.
func (o *globalOptions) jsonLogs() bool {
	out := o.logOut
	if out == nil {
		out = os.Stderr
	}
	return o.logFormat(out) == logFormatJSON
}

// syncLogs flushes buffered log entries; main calls it before exiting.
func (o *globalOptions) syncLogs() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sync != nil {
		_ = o.sync() // Sync on a terminal or pipe fails with EINVAL; nothing to do about it.
	}
}

// newZap builds the zap logger behind Logger. logr's V(n) is zap level -n, so
// verbosity v enables levels down to -v.
func newZap(out io.Writer, format string, verbosity int) *zap.Logger {
	var enc zapcore.Encoder
	if format == logFormatConsole {
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		if isTerminal(out) {
			cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(cfg)
	} else {
		cfg := zap.NewProductionEncoderConfig()
		cfg.TimeKey = "ts"
		cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	}
	if verbosity > 127 {
		verbosity = 127
	}
	level := zap.NewAtomicLevelAt(zapcore.Level(-verbosity))
	core := zapcore.NewCore(enc, zapcore.AddSync(out), level)
	return zap.New(core)
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
