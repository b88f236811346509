package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/demo"
)

type demoCmd struct {
	g    *globals
	keep bool
}

func newDemoCmd(g *globals) *cobra.Command {
	c := &demoCmd{g: g}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A self-contained tour: an embedded SSH server plays a laptop, a real sync runs against it",
		Long: `demo lays out a laptop with two repositories and a canonical host in a new
temporary directory, starts an SSH server on 127.0.0.1 that plays the laptop,
makes the workspace as handoff init does, and runs a real sync (pulls in
worker processes, over SSH) against both. It
prints the summary, the receipt's path, what became of every handoff and the
workspace it produced. Nothing outside the temporary directory is touched;
it is removed at the end unless --keep is given.`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	cmd.Flags().BoolVar(&c.keep, "keep", false, "keep the temporary directory to look around")
	return cmd
}

func (c *demoCmd) run(cmd *cobra.Command, _ []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for pull workers: %w", err)
	}
	return demo.Run(cmd.Context(), c.g.stdout, demo.Options{
		Binary:  self,
		Keep:    c.keep,
		Log:     c.g.logger(),
		Isolate: isolateDemo,
	})
}

// isolateDemo points HOME inside the demo's directory and drops the
// ssh-agent for this process and the pull workers it starts, so that the
// user's ~/.ssh/config and agent take no part in the demo. The process
// exits after the demo, so nothing is restored.
func isolateDemo(home string) error {
	if err := os.Setenv("HOME", home); err != nil {
		return err
	}
	return os.Unsetenv("SSH_AUTH_SOCK")
}
