package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
			"with a hint; the exit code is 2 when there is any.",
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
			return nil
		},
	})
	cmd.AddCommand(newManifestSchemaCmd(g))
	return cmd
}
