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
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := manifest.DefaultPath()
			if len(args) == 1 {
				path = args[0]
			}
			m, err := loadManifest(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s: ok (%d hosts, workspace %s)\n", path, len(m.Hosts), m.Workspace)
			return nil
		},
	})
	cmd.AddCommand(newManifestSchemaCmd(g))
	return cmd
}
