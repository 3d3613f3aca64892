package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/procfleet
//
// When empty, the module version from the build info is used ("(devel)" for a
// build from a work tree).
var version string

// buildInfo is what `procfleet version` reports.
type buildInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
}

// readBuildInfo gathers the version of the running binary.
func readBuildInfo() buildInfo {
	info := buildInfo{
		Version:   version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	return info
}

// writeVersion prints info as text or JSON.
func writeVersion(w io.Writer, info buildInfo, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	rev := info.Revision
	if rev == "" {
		rev = "unknown (built without VCS information)"
	} else if info.Modified {
		rev += " (modified)"
	}
	_, err := fmt.Fprintf(w, "procfleet %s\ngo:       %s\nplatform: %s\nrevision: %s\n",
		info.Version, info.GoVersion, info.Platform, rev)
	if err == nil && info.Time != "" {
		_, err = fmt.Fprintf(w, "time:     %s\n", info.Time)
	}
	return err
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o text|json]",
		Short: "Print version and build information",
		Example: `  procfleet version
  procfleet version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "text", "json":
			default:
				return fmt.Errorf("invalid -o %q: want text or json", output)
			}
			return writeVersion(cmd.OutOrStdout(), readBuildInfo(), output == "json")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output `FORMAT`: text or json")
	return cmd
}
