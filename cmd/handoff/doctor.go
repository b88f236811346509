package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/doctor"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newDoctorCmd) }

type doctorCmd struct {
	g            *globals
	json         bool
	manifestPath string
	workspace    string
	mirrorDir    string
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
			"directory named .handoff-doctor-probe-<random> in it, removed at once. Hosts\n" +
			"are checked as many at once as sync pulls: every host, up to half the available\n" +
			"memory at 64 MiB a host, at most 64, at least 8.\n\n" +
			"On a writer host (a mirror at " + defaultMirror + " or --mirror DIR, and no manifest)\n" +
			"it checks the writer's side instead: the mirror present, complete and fresh\n" +
			"(MIRROR.json) with every file as SHA256SUMS lists it; the Claude Code and Codex\n" +
			"hooks installed and current (handoff hooks status); the current repository's\n" +
			"inbox, and that the handoffs waiting in it lint clean. It writes nothing there.",
		Example: "  handoff doctor --manifest ~/.config/handoff/writers.yaml\n" +
			"  cd ~/code/app && handoff doctor          # on a writer host",
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the report as JSON on stdout")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest)")
	f.StringVar(&c.mirrorDir, "mirror", "", "on a writer host, its mirror directory (default "+defaultMirror+")")
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
	var rep *doctor.Report
	if w := c.writer(); w != nil {
		rep, err = c.writerReport(cmd, w)
		if err != nil {
			return err
		}
	} else {
		m, ws, err := loadWiring(c.manifestPath, c.workspace)
		if err != nil {
			return err
		}
		rep = doctor.Run(cmd.Context(), doctor.Options{
			Manifest: m, Workspace: ws, Every: c.every, Log: c.g.logger(), Now: now,
		})
	}
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

// writer is this host's writer side when doctor should check it: no
// --manifest, no manifest at the default place, and a mirror (at
// --mirror, or the default place).
func (c *doctorCmd) writer() *writer {
	if c.manifestPath != "" || c.workspace != "" {
		return nil
	}
	if _, err := os.Stat(manifest.DefaultPath()); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if w := writerAt(c.mirrorDir); w != nil {
		return w
	}
	if c.mirrorDir != "" {
		// Named but holding no MIRROR.json: the writer check says so.
		m, err := resolveMirror(c.mirrorDir)
		if err == nil {
			return &writer{mirror: m}
		}
	}
	return nil
}

func (c *doctorCmd) writerReport(cmd *cobra.Command, w *writer) (*doctor.Report, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, &exitError{code: exitFailed, err: fmt.Errorf("doctor: %w", err), hint: "run it from a directory that still exists"}
	}
	program, err := os.Executable()
	if err != nil {
		program = ""
	}
	var extra []string
	if d, _ := resolveMirror(""); w.mirror != d {
		extra = []string{"--mirror", w.mirror}
	}
	return doctor.RunWriter(cmd.Context(), doctor.WriterOptions{Mirror: w.mirror, Dir: dir, Program: program, Extra: extra}), nil
}
