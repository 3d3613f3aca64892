package logfile

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
)

// FollowOptions configure Follow. The zero value prints only what is
// written from now on.
type FollowOptions struct {
	// Lines is how many of the log's last lines are printed first: 0 none,
	// negative all of it (its rotated copies first).
	Lines int
	// Keep is how many rotated copies the rotator keeps; 0 means
	// DefaultKeep (see FleetConfig.Keep).
	Keep int
	// Log receives what cannot be followed, and why. The zero value
	// discards.
	Log logr.Logger
}

// Follow copies to w the lines written to the log at path (<name>.log), as
// they arrive, until ctx ends (then it returns nil) or writing to w fails,
// with the guarantees of Fleet: across rotations and re-creations of the
// file, whole lines, none lost or repeated however slowly w takes them
// unless more than Keep rotations pass meanwhile, which a marker line
// reports. The log must exist when Follow starts.
func Follow(ctx context.Context, path string, w io.Writer, opts FollowOptions) error {
	f, _, err := openLog(path)
	if err != nil {
		return fmt.Errorf("follow: %w", err)
	}
	_ = f.Close()
	name, ok := strings.CutSuffix(filepath.Base(path), logExt)
	if !ok {
		return fmt.Errorf("follow %s: a log's name ends in %s", path, logExt)
	}
	fl, err := NewFleet(FleetConfig{Dir: filepath.Dir(path), Out: w, Lines: opts.Lines, Follow: true, Keep: opts.Keep, Log: opts.Log})
	if err != nil {
		return err
	}
	if err := fl.Add(name); err != nil {
		return err
	}
	return fl.Run(ctx)
}
