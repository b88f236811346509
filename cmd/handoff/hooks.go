package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/internal/harness"
	"github.com/handoff-sync/handoff/internal/harness/claude"
	"github.com/handoff-sync/handoff/internal/harness/codex"
	"github.com/handoff-sync/handoff/transport"
)

func init() { commands = append(commands, newHooksCmd) }

type hooksCmd struct {
	g                    *globals
	harness, scope, repo string
	program, mirrorDir   string
	dryRun, json         bool
}

func newHooksCmd(g *globals) *cobra.Command {
	c := &hooksCmd{g: g}
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Install, check or remove handoff's session hooks in Claude Code or Codex",
		Long: `hooks manages the two hooks that make a writer host's agents take part in
handoff without having to remember to: when a session starts,
` + "`handoff context --hook`" + ` adds what the last agents in the repository left
(from this host's mirror) to the session's context; when a session that
changed files stops without writing a handoff, ` + "`handoff hook stop`" + ` asks
for one, once. See docs/hooks.md.

They go into the harness's own file, merged with everything already there:
Claude Code's settings.json (~/.claude/settings.json for --scope user, the
default; <repo>/.claude/settings.json for --scope project) or Codex's
hooks.json (~/.codex/hooks.json or <repo>/.codex/hooks.json). Every other key
and hook stays as it was. The hooks run this handoff binary by its absolute
path, so they work whatever PATH the harness has.`,
	}
	install := &cobra.Command{
		Use:   "install --harness claude|codex [--scope user|project] [--dry-run] [--json]",
		Short: "Merge handoff's two hooks into the harness's settings",
		Long: `install merges handoff's SessionStart and Stop hooks into the harness's
file. It is idempotent: when they are already there and current it writes
nothing. An older install (another path to handoff, another matcher) is
replaced. The file is replaced atomically, only if nobody changed it in the
meantime, after its old content is saved in
$XDG_STATE_HOME/handoff/backups/. --dry-run prints the diff and writes
nothing. For Codex it says what Codex needs besides: trusting the hooks once
in /hooks, and the feature flag in config.toml where an older Codex wants it.`,
		Example: `  handoff hooks install --harness claude --dry-run
  handoff hooks install --harness claude
  handoff hooks install --harness codex
  handoff hooks install --harness claude --scope project --repo ~/code/app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.change(cmd, true) },
	}
	uninstall := &cobra.Command{
		Use:   "uninstall --harness claude|codex [--scope user|project] [--dry-run] [--json]",
		Short: "Remove handoff's hooks from the harness's settings, and nothing else",
		Long: `uninstall removes handoff's handlers from the harness's file (any handler
that runs a program named handoff with ` + "`context --hook`" + ` or ` + "`hook stop`" + `), and the
groups and lists that removing them left empty; everything else stays as it
was. A file left with nothing in it (install created it, or it held only
handoff's hooks) is removed. The old content is saved in
$XDG_STATE_HOME/handoff/backups/ first; --dry-run prints the diff.`,
		Example: `  handoff hooks uninstall --harness claude --dry-run
  handoff hooks uninstall --harness codex --scope project`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.change(cmd, false) },
	}
	status := &cobra.Command{
		Use:   "status [--harness claude|codex] [--scope user|project] [--json]",
		Short: "Say where handoff's hooks are installed and whether they are current",
		Long: `status reads the harnesses' files (both harnesses and both scopes unless
--harness and --scope narrow it; the project scope of the repository holding
the current directory) and says for each whether handoff's hooks are current
(as install would write them now), outdated (another path to handoff, a
program that no longer exists, another matcher or timeout, or twice) or
absent, with what keeps the harness from running them (Codex's trust, its
feature flag, Claude Code's disableAllHooks). It exits 1 when a file cannot
be read.`,
		Example: `  handoff hooks status
  handoff hooks status --harness codex --json`,
		Args: cobra.NoArgs,
		RunE: c.status,
	}
	for _, sub := range []*cobra.Command{install, uninstall, status} {
		f := sub.Flags()
		f.StringVar(&c.harness, "harness", "", "the harness: claude (Claude Code) or codex (Codex)")
		f.StringVar(&c.scope, "scope", harness.ScopeUser, "user (the user's own settings: every repository) or project (one repository's)")
		f.StringVar(&c.repo, "repo", "", "the repository of --scope project (default: the one holding the current directory)")
		f.BoolVar(&c.json, "json", false, "print the result as JSON")
		if sub != status {
			f.BoolVar(&c.dryRun, "dry-run", false, "print the change as a diff and write nothing")
			f.StringVar(&c.program, "program", "", "the handoff binary the hooks run (default: this one, by its absolute path)")
			f.StringVar(&c.mirrorDir, "mirror", "", "the host's mirror, given to the hooks when it is not "+defaultMirror)
		} else {
			f.StringVar(&c.program, "program", "", "the handoff binary the hooks should run (default: this one)")
			f.StringVar(&c.mirrorDir, "mirror", "", "the mirror the hooks should be given, when it is not "+defaultMirror)
		}
	}
	cmd.AddCommand(install, uninstall, status)
	return cmd
}

// targets are the files the command is about: one harness and scope for
// install and uninstall, every one asked for by status.
func (c *hooksCmd) targets(cmd *cobra.Command, all bool) ([]harness.Target, error) {
	harnesses := []string{claude.Name, codex.Name}
	if c.harness != "" || !all {
		if !slices.Contains(harnesses, c.harness) {
			return nil, usageError{fmt.Errorf("--harness must be claude or codex, not %q", c.harness)}
		}
		harnesses = []string{c.harness}
	}
	scopes := []string{harness.ScopeUser, harness.ScopeProject}
	explicit := cmd.Flags().Changed("scope")
	if explicit || !all {
		if c.scope != harness.ScopeUser && c.scope != harness.ScopeProject {
			return nil, usageError{fmt.Errorf("--scope must be user or project, not %q", c.scope)}
		}
		scopes = []string{c.scope}
	}
	program := c.program
	if program == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, &exitError{code: exitFailed, err: fmt.Errorf("hooks: where is this handoff binary? %w", err), hint: "name it with --program PATH"}
		}
		program = exe
	}
	if !filepath.IsAbs(program) {
		return nil, usageError{fmt.Errorf("--program must be an absolute path, not %q (a hook runs with whatever PATH the harness has)", program)}
	}
	var extra []string
	if c.mirrorDir != "" {
		m, err := resolveMirror(c.mirrorDir)
		if err != nil {
			return nil, usageError{err}
		}
		if d, _ := resolveMirror(""); m != d {
			extra = []string{"--mirror", m}
		}
	}
	repo := ""
	if slices.Contains(scopes, harness.ScopeProject) {
		dir := c.repo
		if dir == "" {
			dir, _ = os.Getwd()
		}
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		r, err := continuity.FindRepo(cmd.Context(), transport.NewLocal(), dir)
		switch {
		case err == nil:
			repo = filepath.FromSlash(r)
		case explicit || !all:
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("hooks: %s is not inside a repository", dir),
				hint: "run it in the repository, or name it with --repo DIR; or use --scope user, which covers every repository"}
		default:
			scopes = []string{harness.ScopeUser}
		}
	}
	var out []harness.Target
	for _, h := range harnesses {
		for _, s := range scopes {
			var t harness.Target
			var err error
			if h == claude.Name {
				t, err = claude.Target(s, repo, program, extra...)
			} else {
				t, err = codex.Target(s, repo, program, extra...)
			}
			if err != nil {
				return nil, &exitError{code: exitFailed, err: fmt.Errorf("hooks: %w", err), hint: "set $HOME"}
			}
			out = append(out, t)
		}
	}
	return out, nil
}

func (c *hooksCmd) change(cmd *cobra.Command, install bool) error {
	if c.harness == "" {
		return usageError{errors.New("which harness? give --harness claude or --harness codex")}
	}
	ts, err := c.targets(cmd, false)
	if err != nil {
		return err
	}
	t := ts[0]
	state, err := harness.StateDir()
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("hooks: %w", err), hint: "set $HOME or $XDG_STATE_HOME"}
	}
	verb, apply := "install", t.Install
	if !install {
		verb, apply = "uninstall", t.Uninstall
	}
	ch, err := apply(harness.BackupsDir(state), c.dryRun)
	if err != nil {
		hint := "fix the file, or run the command again"
		switch {
		case harness.IsSyntax(err):
			hint = "handoff changes only a file that is a JSON object in the harness's shape; fix it (or move it aside) and run the command again"
		case errors.Is(err, harness.ErrChanged):
			hint = "something (the harness itself?) wrote the file at the same moment; run the command again"
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("hooks %s: %s: %w", verb, t.Path, err), hint: hint}
	}
	var notes []string
	if install && t.Notes != nil {
		data, _, _, _ := harness.ReadFile(t.Path)
		notes = t.Notes(data)
	}
	if install && t.Scope == harness.ScopeProject {
		notes = append(notes, "this file may be committed and shared: its hooks name this host's handoff at "+t.Want[0].Program+
			", which another machine may not have; --scope user keeps them to you")
	}
	if c.json {
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"harness": t.Harness, "scope": t.Scope, "change": ch, "hooks": t.Want, "notes": nonNil(notes)})
	}
	w := c.g.stdout
	where := fmt.Sprintf("%s (%s scope): %s", t.Harness, t.Scope, t.Path)
	if ch.Target != t.Path {
		where += " -> " + ch.Target
	}
	switch {
	case !ch.Changed && install:
		fmt.Fprintf(w, "%s: handoff's hooks are already current; nothing written\n", where)
	case !ch.Changed:
		fmt.Fprintf(w, "%s: no hooks of handoff's there; nothing written\n", where)
	case c.dryRun:
		fmt.Fprint(w, ch.Diff)
		fmt.Fprintf(w, "%s: dry run, nothing written\n", where)
	default:
		what := map[bool]string{true: "installed", false: "uninstalled"}[install]
		if ch.Removed {
			what += "; the file held nothing else and was removed"
		}
		fmt.Fprintf(w, "%s: %s\n", where, what)
		if ch.Backup != "" {
			fmt.Fprintf(w, "  the old file is saved as %s\n", ch.Backup)
		}
	}
	if install && (ch.Changed || !c.dryRun) {
		for _, h := range t.Want {
			fmt.Fprintf(w, "  %s: %s\n", h.Event, h.Command)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *hooksCmd) status(cmd *cobra.Command, _ []string) error {
	ts, err := c.targets(cmd, true)
	if err != nil {
		return err
	}
	var sts []harness.Status
	bad := false
	for _, t := range ts {
		st := t.Status()
		bad = bad || st.State == harness.StateUnreadable
		sts = append(sts, st)
	}
	if c.json {
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"files": sts}); err != nil {
			return err
		}
	} else {
		for _, st := range sts {
			printHookStatus(c.g, st)
		}
	}
	if bad {
		return silent(exitFailed)
	}
	return nil
}

func printHookStatus(g *globals, st harness.Status) {
	w := g.stdout
	fmt.Fprintf(w, "%-6s %-7s %-9s %s\n", st.Harness, st.Scope, st.State, st.Path)
	if st.Err != "" {
		fmt.Fprintf(w, "  %s\n", printable(st.Err))
		return
	}
	for _, h := range st.Hooks {
		if len(h.Found) == 0 {
			if st.State != harness.StateAbsent {
				fmt.Fprintf(w, "  %-12s absent\n", h.Event)
			}
			continue
		}
		for _, f := range h.Found {
			fmt.Fprintf(w, "  %-12s %-8s %s\n", h.Event, h.State, printable(f.Command))
			if !f.ProgramExists {
				fmt.Fprintf(w, "  %-12s          %s does not exist (or cannot run): run handoff hooks install again\n", "", printable(f.Program))
			}
			if f.Event != h.Event {
				fmt.Fprintf(w, "  %-12s          it is under %s, not %s\n", "", printable(f.Event), h.Event)
			}
		}
	}
	if st.State == harness.StateOutdated {
		fmt.Fprintf(w, "  run `handoff hooks install --harness %s --scope %s` to make them current\n", st.Harness, st.Scope)
	}
	for _, n := range st.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
