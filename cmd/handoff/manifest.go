package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
)

func newManifestCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "manifest", Short: "Work with the writers manifest"}
	cmd.AddCommand(&cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a manifest; errors name the host and field",
		Long: "check parses and validates a manifest, and checks that every ssh host's\n" +
			"identity_file and known_hosts exist on this machine (and that no identity file\n" +
			"is readable by group or others). Each problem names the file, host and field,\n" +
			"with a hint; the exit code is 2 when there is any. A workspace that does not\n" +
			"exist yet, or has no identity (see `handoff init`), is a warning on stderr,\n" +
			"naming any workspace near it: sync would refuse it.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := manifest.DefaultPath()
			if len(args) == 1 {
				path = args[0]
			}
			m, err := loadManifest(path)
			if err != nil {
				return err
			}
			if err := m.CheckFiles(); err != nil {
				return manifestError(err)
			}
			fmt.Fprintf(g.stdout, "%s: ok (%d hosts, workspace %s)\n", path, len(m.Hosts), m.Workspace)
			if ws, err := setup.Workspace(m, ""); err == nil {
				var missing *workspace.MissingError
				if _, _, err := workspace.Check(ws); errors.As(err, &missing) {
					fmt.Fprintf(g.stderr, "handoff: warning: %s: %v\nhint: %s\n", path, missing, missing.Hint())
				}
			}
			return nil
		},
	})
	cmd.AddCommand(newManifestSchemaCmd(g))
	return cmd
}
