package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// completion replaces cobra's default completion command (which cobra
// leaves out once a command of that name exists): that one prints its help
// and exits 0 for an unknown shell; this one is a usage error, exit 2.
func init() { commands = append(commands, newCompletionCmd) }

var completionShells = []string{"bash", "zsh", "fish", "powershell"}

func newCompletionCmd(g *globals) *cobra.Command {
	var noDesc bool
	cmd := &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script for bash, zsh, fish or powershell",
		Long: `completion prints a script that makes the shell complete handoff's commands,
flags and host names. Load it for the current shell, or install it for good:

  bash:        source <(handoff completion bash)
               handoff completion bash > ~/.local/share/bash-completion/completions/handoff
  zsh:         handoff completion zsh > "${fpath[1]}/_handoff"    (with compinit enabled)
  fish:        handoff completion fish > ~/.config/fish/completions/handoff.fish
  powershell:  handoff completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             completionShells,
		DisableFlagsInUseLine: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && slices.Contains(completionShells, args[0]) {
				return nil
			}
			msg := "completion needs a shell"
			if len(args) > 0 {
				msg = fmt.Sprintf("completion: unsupported shell %q", strings.Join(args, " "))
			}
			return &exitError{code: exitUsage, err: errors.New(msg), hint: "use one of: " + strings.Join(completionShells, ", ")}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), g.stdout
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, !noDesc)
			case "zsh":
				if noDesc {
					return root.GenZshCompletionNoDesc(out)
				}
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, !noDesc)
			default:
				if noDesc {
					return root.GenPowerShellCompletion(out)
				}
				return root.GenPowerShellCompletionWithDesc(out)
			}
		},
	}
	cmd.Flags().BoolVar(&noDesc, "no-descriptions", false, "leave command and flag descriptions out of the completions")
	return cmd
}
