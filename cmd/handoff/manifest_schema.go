package main

import (
	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/manifest"
)

// newManifestSchemaCmd is "handoff manifest schema": it prints the
// manifest's JSON Schema for editors.
func newManifestSchemaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the writers manifest, for editors",
		Long: `Print the JSON Schema (draft 2020-12) of the writers manifest to stdout.

Save it and point your editor at it, for field descriptions, completion and
errors as you type:

  handoff manifest schema > ~/.config/handoff/writers.schema.json

then put this first line in writers.yaml (yaml-language-server, used by the
VS Code YAML extension, Neovim, Helix and others):

  # yaml-language-server: $schema=writers.schema.json

The schema checks the shape of the file; "handoff manifest check" also checks
what a schema cannot, such as unique host names. See docs/manifest.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := g.stdout.Write(manifest.Schema())
			return err
		},
	}
}
