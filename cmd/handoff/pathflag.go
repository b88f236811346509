package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/handoff-sync/handoff/manifest"
)

// pathFlags are the flags, in every command, whose value is a local path.
// Their "~" and "~/…" are expanded as the manifest's paths are (see
// homePath), so that a path pasted from a hint, or given as
// --workspace=~/x where no shell expands it, means what it says.
var pathFlags = map[string]bool{"workspace": true, "manifest": true, "mirror": true, "repo": true}

// homePath is a string flag whose value has its leading "~" expanded to
// the home directory when it is set (manifest.ExpandHome). "~user/…" and
// every path when the home directory is unknown stay as they are.
type homePath struct{ pflag.Value }

func (p homePath) Set(s string) error {
	home, err := os.UserHomeDir()
	if err != nil {
		home = ""
	}
	return p.Value.Set(manifest.ExpandHome(s, home))
}

// expandPathFlags makes every flag named in pathFlags, in c and every
// command below it, a homePath: the one place where flags get "~".
func expandPathFlags(c *cobra.Command) {
	for _, sub := range c.Commands() {
		expandPathFlags(sub)
	}
	wrap := func(f *pflag.Flag) {
		if pathFlags[f.Name] {
			if _, done := f.Value.(homePath); !done {
				f.Value = homePath{f.Value}
			}
		}
	}
	c.Flags().VisitAll(wrap)
	c.PersistentFlags().VisitAll(wrap)
}
