package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Completion prints a script that makes your shell complete procfleet's
commands, flags and arguments: server names for status and describe (from
the fleet files and the state folder's records) and for logs (from the
state folder's logs). Load it as the examples show.`,
		Example: `  # bash: now, and in every new shell (needs the bash-completion package)
  source <(procfleet completion bash)
  procfleet completion bash > ~/.local/share/bash-completion/completions/procfleet

  # zsh: in a folder of your $fpath (compinit must be enabled)
  procfleet completion zsh > "${fpath[1]}/_procfleet"

  # fish
  procfleet completion fish > ~/.config/fish/completions/procfleet.fish`,
		ValidArgs:             []string{"bash", "zsh", "fish"},
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, root := cmd.OutOrStdout(), cmd.Root()
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(out, true)
			case "zsh":
				err = root.GenZshCompletion(out)
			case "fish":
				err = root.GenFishCompletion(out, true)
			}
			if err != nil {
				return fmt.Errorf("completion %s: %w", args[0], err)
			}
			return nil
		},
	}
}
