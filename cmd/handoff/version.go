package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

// versionFlag makes `handoff --version` print what `handoff version`
// prints.
func versionFlag(root *cobra.Command) {
	bi, _ := debug.ReadBuildInfo()
	root.Version = versionLine(bi)
	root.SetVersionTemplate("{{.Version}}\n")
	root.InitDefaultVersionFlag()
	if f := root.Flags().Lookup("version"); f != nil {
		f.Usage = "print the version, as the version command does"
	}
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			fmt.Fprintln(g.stdout, versionLine(bi))
			return nil
		},
	}
}

// versionLine describes the binary in one line:
//
//	handoff v1.2.0 (revision 3f9a1c…, committed 2026-04-20T15:37:00Z) go1.26.0 linux/amd64
//
// The version is the module's ("(devel)" from a plain checkout build); the
// revision gains ", modified" when the tree had uncommitted changes. Build
// settings missing (-buildvcs=false, no VCS) read "unknown".
func versionLine(bi *debug.BuildInfo) string {
	version, goVersion := "(devel)", runtime.Version()
	rev, when, modified := "unknown", "unknown", ""
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
	}
	return fmt.Sprintf("handoff %s (revision %s%s, committed %s) %s %s/%s", version, rev, modified, when, goVersion, runtime.GOOS, runtime.GOARCH)
}
