package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/doctor"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newDoctorCmd) }

type doctorCmd struct {
	g            *globals
	json         bool
	manifestPath string
	workspace    string
	every        time.Duration
}

func newDoctorCmd(g *globals) *cobra.Command {
	c := &doctorCmd{g: g}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the workspace, the timer and every host; say what to fix",
		Long: "doctor checks the workspace (its identity: a directory without one is a\n" +
			"failure, naming the workspaces near it; writable, lock, interrupted plans, ledger\n" +
			"integrity, review-inbox depth, what waits for review and for how long, hosts\n" +
			"that keep sending malformed handoffs, the last receipt's outcome and age), the\n" +
			"systemd timer and the binary it is pinned to, and every host (its mirror;\n" +
			"reachable; per inbox: pending, processed, malformed and rejected files,\n" +
			"handoffs waiting more than 3 days, and whether the account may archive there;\n" +
			"whether the host has sent a handoff within its stale_after, 7d by default). It\n" +
			"prints one line per check, [ok], [warn] or [fail], with a hint under every\n" +
			"problem, and exits 1 if any check failed; --json carries the workspace_id. It\n" +
			"writes nothing but, to learn whether an inbox can be archived in, an empty\n" +
			"directory named .handoff-doctor-probe-<random> in it, removed at once.",
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the report as JSON on stdout")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest)")
	f.DurationVar(&c.every, "every", doctor.DefaultEvery, "how often the timer runs a sync; a last run older than 2x this warns, 6x fails")
	return cmd
}

func (c *doctorCmd) run(cmd *cobra.Command, _ []string) error {
	if c.every <= 0 {
		return usageError{errors.New("--every must be positive")}
	}
	now, err := clock()
	if err != nil {
		return err
	}
	m, ws, err := loadWiring(c.manifestPath, c.workspace)
	if err != nil {
		return err
	}
	rep := doctor.Run(cmd.Context(), doctor.Options{
		Manifest: m, Workspace: ws, Every: c.every, Log: c.g.logger(), Now: now,
	})
	if c.json {
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, ch := range rep.Checks {
			// A message or hint of several lines (an error as a host or a
			// run stored it) stays inside its check's block, indented.
			fmt.Fprintf(c.g.stdout, "[%s] %s: %s\n", ch.Status, ch.Scope, indentLines(ch.Message))
			if ch.Status != doctor.CheckOK && ch.Hint != "" {
				fmt.Fprintf(c.g.stdout, "  hint: %s\n", indentLines(ch.Hint))
			}
		}
	}
	if !rep.OK {
		return silent(exitFailed)
	}
	return nil
}

// indentLines indents every line of s but the first by two spaces.
func indentLines(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
