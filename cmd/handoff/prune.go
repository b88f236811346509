package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/prune"
	"github.com/handoff-sync/handoff/manifest"
)

func init() { commands = append(commands, newPruneCmd) }

type pruneCmd struct {
	g            *globals
	olderThan    string
	hosts        []string
	dryRun       bool
	manifestPath string
	workspace    string
}

func newPruneCmd(g *globals) *cobra.Command {
	c := &pruneCmd{g: g}
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "Delete archived handoffs (processed/) and the stored bytes of ingested ones older than a duration",
		Long: `prune deletes, on every host (or those named with --host), the regular files
in each inbox's processed/ directory that the ledger says were archived more
than --older-than ago (the writer's modification time plays no part; files the
ledger does not know stay, see ` + "`handoff import processed`" + `), and in the
workspace the stored bytes of handoffs ingested before then and the per-run
receipts of runs finished before then. It never touches malformed/, the
inboxes themselves, review drafts, latest.json, latest.log, the receipt of
the newest run that was not ok, or the ledger's rows; it never follows a
symlink and never descends below processed/.

It keeps the stored bytes (a handoff's exact bytes, in the ledger; earlier
versions' .handoff/spool/<sha256>.md files likewise) of every handoff a
person may still act on, however old: one that
waits in ` + "`handoff review`" + ` (review or quarantine), and one rejected less than
--older-than ago, so that ` + "`handoff review show ID`" + ` can still show what was
rejected. Once a rejection is older than --older-than, its bytes go like any
other ingested handoff's (a malformed handoff's stay: they are the
quarantine). It also removes the temporary files an earlier version's
crashed run left in .handoff/spool, which no run looks for any more.
What the mirror's repos/<slug>/RECENT.md shows of a handoff is kept in the
ledger when a sync first builds it, so removing the bytes does not blank
it; the output (and --dry-run's) says how many of the handoffs removed
have such notes and what changes in repos/ for the others.
It also applies the manifest's backups retention, as sync does once a day
(backups.keep, 90d by default; 0 keeps them all; --older-than plays no part):
it removes the backups in .handoff/backups of plans finished more than that
ago, by the file's time, but never an unfinished plan's, never the newest
backup of a target (the undo of its last change), another writer's late
edit (late.*) or the card index's index.MEMORY.md.
The ledger's file keeps its size: SQLite reuses the space for
the handoffs stored next. It holds the workspace lock like sync, and
works on as many hosts at once as sync pulls: every host, up to half the
available memory at 64 MiB a host, at most 64, at least 8.
--older-than is at least 1h; --dry-run lists every file it would remove
(stored bytes only by count).`,
		Example: "  handoff prune --older-than 30d\n  handoff prune --older-than 90d --host laptop --dry-run",
		Args:    cobra.NoArgs,
		RunE:    c.run,
	}
	f := cmd.Flags()
	f.StringVar(&c.olderThan, "older-than", "", "age past which archived handoffs go, such as 30d or 720h (required)")
	f.StringArrayVar(&c.hosts, "host", nil, "prune only this host (repeatable); only stored bytes from these hosts go")
	f.BoolVar(&c.dryRun, "dry-run", false, "show what would be removed; remove nothing")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest)")
	return cmd
}

func (c *pruneCmd) run(cmd *cobra.Command, _ []string) error {
	if c.olderThan == "" {
		return usageError{errors.New("prune needs --older-than, such as --older-than 30d")}
	}
	age, err := manifest.ParseDuration(c.olderThan)
	if err != nil {
		return usageError{fmt.Errorf("--older-than: %w", err)}
	}
	if age <= 0 {
		return usageError{fmt.Errorf("--older-than %s: must be more than 0", c.olderThan)}
	}
	if age < minPruneAge {
		return &exitError{code: exitUsage, err: fmt.Errorf("--older-than %s: must be at least 1h", c.olderThan),
			hint: "durations count in s, m, h and d: 1m is a minute, not a month; for a month say --older-than 720h or --older-than 30d"}
	}
	now, err := clock()
	if err != nil {
		return err
	}
	m, ws, err := loadWiring(c.manifestPath, c.workspace)
	if err != nil {
		return err
	}
	r, err := prune.Run(cmd.Context(), prune.Options{
		Manifest: m, Workspace: ws, Hosts: c.hosts, OlderThan: age, DryRun: c.dryRun, Log: c.g.logger(), Now: now,
	})
	if errors.Is(err, handoff.ErrLocked) {
		return &exitError{code: exitLocked, err: err, hint: "another handoff run is using the workspace; prune again when it is done"}
	}
	if r == nil {
		return err
	}
	prefix, verb := "", "removed"
	if r.DryRun {
		prefix, verb = "[dry-run] ", "would remove"
	}
	for _, h := range r.Hosts {
		if h.Error != "" {
			fmt.Fprintf(c.g.stderr, "handoff: host %s: %s\n", h.Name, h.Error)
			if h.Removed == 0 {
				continue
			}
		}
		fmt.Fprintf(c.g.stdout, "%s%s: %s %d processed %s (%s)\n", prefix, h.Name, verb, h.Removed, plural(h.Removed, "handoff", "handoffs"), formatBytes(h.Bytes))
		if r.DryRun {
			for _, n := range h.Names {
				fmt.Fprintf(c.g.stdout, "%s  %s\n", prefix, claim.Printable(n))
			}
		}
		if h.Unknown > 0 {
			fmt.Fprintf(c.g.stdout, "%s%s: kept %d processed %s the ledger has no record of (`handoff import processed` records them, so that prune can age them)\n",
				prefix, h.Name, h.Unknown, plural(h.Unknown, "file", "files"))
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.g.stdout, "%sstore: %s the bytes of %d %s (%s)\n", prefix, verb, r.Spool.Files, plural(r.Spool.Files, "handoff", "handoffs"), formatBytes(r.Spool.Bytes))
	if r.Spool.Held > 0 {
		fmt.Fprintf(c.g.stdout, "%sstore: kept the bytes of %d %s that %s for a person or %s rejected less than %s ago (`handoff review --all`)\n",
			prefix, r.Spool.Held, plural(r.Spool.Held, "handoff", "handoffs"), plural(r.Spool.Held, "waits", "wait"), plural(r.Spool.Held, "was", "were"), c.olderThan)
	}
	if r.Spool.Files > 0 {
		fmt.Fprintf(c.g.stdout, "%srepos/: RECENT.md still shows what it showed of %d of them (their notes are in the ledger); %s\n", prefix, r.Spool.Notes, unkeptLine(r.Spool.Unkept, r.DryRun))
	}
	if r.Spool.Temps > 0 {
		fmt.Fprintf(c.g.stdout, "%sstore: removed %d temporary %s an earlier version's crashed run left in %s\n",
			prefix, r.Spool.Temps, plural(r.Spool.Temps, "file", "files"), layout.SpoolDir)
	}
	fmt.Fprintf(c.g.stdout, "%sreceipts: %s %d %s\n", prefix, verb, r.Receipts.Files, plural(r.Receipts.Files, "receipt", "receipts"))
	if r.DryRun {
		for _, n := range r.Receipts.Names {
			fmt.Fprintf(c.g.stdout, "%s  %s\n", prefix, n)
		}
	}
	fmt.Fprintf(c.g.stdout, "%sbackups: %s %d %s (%s)\n", prefix, verb, r.Backups.Files, plural(r.Backups.Files, "backup", "backups"), formatBytes(r.Backups.Bytes))
	if k := r.Backups.Open + r.Backups.Newest; k > 0 {
		fmt.Fprintf(c.g.stdout, "%sbackups: kept %d old enough to go: %d of unfinished plans, %d the newest of their targets\n", prefix, k, r.Backups.Open, r.Backups.Newest)
	}
	if r.DryRun {
		for _, n := range r.Backups.Names {
			fmt.Fprintf(c.g.stdout, "%s  %s\n", prefix, n)
		}
	}
	if r.Failed() {
		return silent(exitFailed)
	}
	return nil
}

// unkeptLine says what prune changes in repos/ for the contents whose
// notes the ledger does not keep.
func unkeptLine(n int, dryRun bool) string {
	if n == 0 {
		return "nothing in repos/ changes"
	}
	would := "will"
	if dryRun {
		would = "would"
	}
	return fmt.Sprintf("%d %s no notes in the ledger: any of them RECENT.md lists %s show as no longer stored", n, plural(n, "has", "have"), would)
}

// minPruneAge is the least --older-than prune accepts: a unit misread
// (1m taken for a month) must not empty every processed/ directory.
const minPruneAge = time.Hour

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatBytes renders a size in binary units: 512 B, 1.5 KiB, 34 KiB, 2.1 MiB.
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, 0
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for v >= 1024 && unit < len(units)-1 {
		v /= 1024
		unit++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, units[unit])
	}
	return fmt.Sprintf("%.0f %s", v, units[unit])
}
