package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestPathFlagsExpandHome: every path flag of every command turns a
// leading "~" into the home directory, as the manifest does, so that no
// command makes or reads a literal ./~ directory. A string flag whose
// help names a directory, a mirror or the writers manifest and is not a path flag fails
// the test: a new path flag cannot miss the expansion.
func TestPathFlagsExpandHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	root := newRootCmd(strings.NewReader(""), io.Discard, io.Discard)
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		check := func(f *pflag.Flag) {
			usage := strings.ToLower(f.Usage)
			pathLike := f.Value.Type() == "string" && (strings.Contains(usage, "directory") || strings.Contains(usage, "writers manifest") || strings.Contains(usage, "mirror"))
			if !pathFlags[f.Name] {
				if pathLike {
					t.Errorf("%s --%s looks like a path (%q) but is not in pathFlags", c.CommandPath(), f.Name, f.Usage)
				}
				return
			}
			seen++
			for in, want := range map[string]string{
				"~":            home,
				"~/ws":         filepath.Join(home, "ws"),
				"~/.openclaw/": filepath.Join(home, ".openclaw"),
				"/abs/~/x":     "/abs/~/x",
				"rel/x":        "rel/x",
				"~other/x":     "~other/x",
			} {
				if err := f.Value.Set(in); err != nil {
					t.Fatalf("%s --%s: Set(%q): %v", c.CommandPath(), f.Name, in, err)
				}
				if got := f.Value.String(); got != want {
					t.Errorf("%s --%s %s: got %q, want %q", c.CommandPath(), f.Name, in, got, want)
				}
			}
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
	}
	walk(root)
	if seen < 10 {
		t.Errorf("checked %d path flags, want every --workspace, --manifest and --mirror (at least 10)", seen)
	}
}
