package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the procfleet command tree. opts receives the global
// flags; every subcommand gets the same value.
func newRootCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "procfleet",
		Short: "Keep a fleet of local server processes in the state YAML files declare",
		Long: `procfleet keeps a fleet of local server processes in the state that YAML
files declare, the way Kubernetes keeps pods in the state manifests declare.
It never signals a process it cannot prove it owns.

Fleet files are read from -f PATH (a file or a folder of *.yaml/*.yml files,
repeatable), by default procfleet.yaml in the current folder. State (ownership
records, logs, the reconciler's socket) lives in --state-dir, else
$PROCFLEET_STATE_DIR, else .procfleet next to the first fleet file.

Exit codes: 0 success, 1 failure, 2 (diff only) changes pending.`,
		SilenceUsage:  true, // a failing command prints its error, not the usage
		SilenceErrors: true, // run prints the error once, with the exit code
		// PersistentPreRunE runs before every subcommand; subcommands must not
		// define their own, or this one is skipped.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			opts.logOut = cmd.ErrOrStderr()
			return opts.validate()
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitFailure, err: err}
	})
	opts.addPersistentFlags(cmd)

	// The subcommands. Each lives in its own file as new<Name>Cmd(opts);
	// add yours here (--help lists them sorted by name).
	cmd.AddCommand(
		newValidateCmd(opts),
		newSchemaCmd(),
		newVersionCmd(),
		newExportCmd(opts),
		newUpCmd(opts),
		newApplyCmd(opts),
		newDownCmd(opts),
		newStatusCmd(opts),
		newDiffCmd(opts),
		newDescribeCmd(opts),
		newLogsCmd(opts),
		newUICmd(opts),
		newStopCmd(opts),
		newStartCmd(opts),
		newRestartCmd(opts),
		newCompletionCmd(),
	)
	return cmd
}
