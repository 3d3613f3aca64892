package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/export"
	"github.com/procfleet/procfleet/spec"
)

// exportFlags are the flags of procfleet export.
type exportFlags struct {
	to        string
	outDir    string
	name      string
	images    []string
	waitImage string
}

func newExportCmd(opts *globalOptions) *cobra.Command {
	var fl exportFlags
	cmd := &cobra.Command{
		Use:   "export --to kubernetes|nomad|systemd [-f PATH]... [-o DIR]",
		Short: "Write the fleet as Kubernetes manifests, a Nomad job or systemd units",
		Long: `Export translates the fleet files into what another engine runs, for when
the fleet outgrows one machine:

  kubernetes  per server <name>.yaml: a Deployment (replicas 1; a Job for
              restartPolicy OnFailure or Never) and a Service when it has a
              port. Needs a container image per server: --image IMAGE for all,
              --image NAME=IMAGE for one, or the label procfleet.dev/image.
  nomad       <fleet>.nomad.json: one job, a group per server, driver raw_exec,
              as the Nomad HTTP API takes it (nomad job run -json FILE).
  systemd     <fleet>-<name>.service per server and <fleet>.target.

Every mapping that is not exact is printed on stderr as a warning naming the
server and the field. Without -o the files go to stdout (several files each
behind a "# Source: NAME" or "# ==> NAME <==" comment line); with -o DIR they
are written into DIR.

The fleet's name (Nomad job, systemd target, Kubernetes part-of label) is
--name, by default the name of the folder holding the first fleet file.

Exit status: 0 when the files were written (warnings or not), 1 on any error.`,
		Example: `  # Kubernetes manifests for the quick start, straight into a cluster
  procfleet export --to kubernetes -f examples/quickstart --image ghcr.io/acme/quickstart:1.0 | kubectl apply -f -

  # One image per server, written into a folder
  procfleet export --to kubernetes --image api=ghcr.io/acme/api:1.0 --image web=ghcr.io/acme/web:1.0 -o k8s/

  # A Nomad job
  procfleet export --to nomad -o nomad/ && nomad job run -json nomad/*.nomad.json

  # systemd user units
  procfleet export --to systemd -o ~/.config/systemd/user && systemctl --user daemon-reload`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExport(cmd, opts, fl)
		},
	}
	opts.addFileFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&fl.to, "to", "", "target `ENGINE`: kubernetes, nomad or systemd (required)")
	f.StringVarP(&fl.outDir, "output-dir", "o", "", "write the files into `DIR` (created if missing) instead of stdout")
	f.StringVar(&fl.name, "name", "", "fleet `NAME`, a DNS label (default: the folder of the first fleet file)")
	f.StringArrayVar(&fl.images, "image", nil, "container image for kubernetes: `IMAGE` for every server, or NAME=IMAGE for one (repeatable)")
	f.StringVar(&fl.waitImage, "wait-image", export.DefaultWaitImage, "`IMAGE` of the init containers that wait for dependencies (kubernetes; needs sh and nc)")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func runExport(cmd *cobra.Command, opts *globalOptions, fl exportFlags) error {
	target, err := export.ParseTarget(fl.to)
	if err != nil {
		return err
	}
	xo := export.Options{Name: fl.name, WaitImage: fl.waitImage}
	if err := parseImages(fl.images, &xo); err != nil {
		return err
	}
	if xo.Name == "" {
		xo.Name = defaultFleetName(opts.FleetPaths()[0])
	}

	fleet, err := spec.Load(opts.FleetPaths()...)
	if err != nil {
		list := fieldErrors(err)
		if list == nil {
			return fmt.Errorf("export: %w", err)
		}
		var b strings.Builder
		for _, e := range list {
			b.WriteString(e.Error())
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "export: the fleet files have %s; nothing exported\n", plural(len(list), "error"))
		_, _ = io.WriteString(cmd.ErrOrStderr(), b.String())
		return silentExit(exitFailure)
	}

	res, err := export.Export(target, fleet.Servers, xo)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if target != export.Kubernetes && (len(fl.images) > 0 || cmd.Flags().Changed("wait-image")) {
		fmt.Fprintf(stderr, "warning: --image and --wait-image apply to --to %s only; ignored\n", export.Kubernetes)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if fl.outDir == "" {
		if _, err := res.WriteTo(cmd.OutOrStdout()); err != nil {
			return fmt.Errorf("export: write output: %w", err)
		}
		return nil
	}
	return writeExport(cmd.OutOrStdout(), fl.outDir, res)
}

// parseImages splits --image values: NAME=IMAGE for one server (an image
// reference never holds "="), IMAGE for every other; only one of those.
func parseImages(values []string, o *export.Options) error {
	for _, v := range values {
		name, img, one := strings.Cut(v, "=")
		switch {
		case one && (name == "" || img == ""):
			return fmt.Errorf("invalid --image %q: want IMAGE or NAME=IMAGE", v)
		case one:
			if o.Images == nil {
				o.Images = map[string]string{}
			}
			if prev, dup := o.Images[name]; dup && prev != img {
				return fmt.Errorf("invalid --image %q: %s already has the image %s", v, name, prev)
			}
			o.Images[name] = img
		case v == "":
			return fmt.Errorf("invalid --image \"\": want IMAGE or NAME=IMAGE")
		case o.Image != "" && o.Image != v:
			return fmt.Errorf("invalid --image %q: the image of every server is already %s (use NAME=IMAGE for one server)", v, o.Image)
		default:
			o.Image = v
		}
	}
	return nil
}

// defaultFleetName is the name of the folder holding the first fleet file
// (the folder itself when -f names one), made a DNS label.
func defaultFleetName(first string) string {
	dir := filepath.Dir(first)
	if fi, err := os.Stat(first); err == nil && fi.IsDir() {
		dir = first
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return export.SanitizeName(filepath.Base(dir))
}

// writeExport writes every file into dir and lists the paths on w.
func writeExport(w io.Writer, dir string, res *export.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export: create %s: %w", dir, err)
	}
	for _, f := range res.Files {
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return fmt.Errorf("export: write %s: %w", p, err)
		}
		fmt.Fprintln(w, p)
	}
	return nil
}
