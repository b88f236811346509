package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/legacy"
)

func init() { commands = append(commands, newImportCmd) }

type importCmd struct {
	g            *globals
	hosts        []string
	dryRun       bool
	json         bool
	manifestPath string
	workspace    string
}

func newImportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Bring in what an earlier tool already did",
	}
	c := &importCmd{g: g}
	processed := &cobra.Command{
		Use:   "processed",
		Short: "Record the handoffs already in each inbox's processed/ as ingested before",
		Long: `import processed lists, on every host (or those named with --host), the
processed/ directory of each inbox a sync would pull, hashes every plain *.md
regular file in it (at most max_file_size bytes), and records each in the
ledger as ingested before, result legacy. A copy of the same bytes that turns
up in an inbox later (a sync tool's conflict copy, a restore from backup) is
then a duplicate and is not applied again. A handoff another workspace applied
is never recorded as this one's: a host whose mirror (MIRROR.json) belongs to
another workspace is refused, and a file whose bytes the ledger of a workspace
near this one (a typo of its name, one below it) knows is skipped as
applied-elsewhere. Nothing on the hosts changes and no
memory is written; files the ledger already knows are left as they are. It
writes a receipt of mode import (.handoff/receipts/<run-id>.json, not
latest.json) listing every file recorded. --dry-run counts and writes nothing.
It holds the workspace lock like sync.`,
		Example: "  handoff import processed --dry-run\n  handoff import processed --host laptop",
		Args:    cobra.NoArgs,
		RunE:    c.run,
	}
	f := processed.Flags()
	f.StringArrayVar(&c.hosts, "host", nil, "only this host (repeatable)")
	f.BoolVar(&c.dryRun, "dry-run", false, "count what would be recorded; write nothing")
	f.BoolVar(&c.json, "json", false, "print the report as JSON on stdout")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest)")
	cmd.AddCommand(processed)
	return cmd
}

func (c *importCmd) run(cmd *cobra.Command, _ []string) error {
	m, ws, err := loadWiring(c.manifestPath, c.workspace)
	if err != nil {
		return err
	}
	r, err := legacy.Import(cmd.Context(), legacy.Options{
		Manifest: m, Workspace: ws, Hosts: c.hosts, DryRun: c.dryRun, Log: c.g.logger(),
	})
	if errors.Is(err, handoff.ErrLocked) {
		return &exitError{code: exitLocked, err: err, hint: "another handoff run is using the workspace; import again when it is done"}
	}
	if r == nil {
		return err
	}
	for _, h := range r.Hosts {
		switch {
		case h.ForeignMirror != "":
			fmt.Fprintf(c.g.stderr, "handoff: host %s: %s\nhint: the manifest may name the wrong workspace: if workspace: has a typo, fix it and import into the workspace that syncs %s; "+
				"only if this workspace is to take %s over, run `handoff sync --adopt-mirror %s` first, then import again\n",
				h.Name, printable(h.Error), h.Name, h.Name, h.Name)
		case h.Error != "":
			fmt.Fprintf(c.g.stderr, "handoff: host %s: %s\nhint: nothing was recorded for %s; fix the host (`handoff doctor` checks it) and import again: what is recorded already stays as it is\n",
				h.Name, printable(h.Error), h.Name)
		}
	}
	if c.json {
		b, jerr := json.MarshalIndent(r, "", "  ")
		if jerr != nil {
			return jerr
		}
		c.g.stdout.Write(append(b, '\n'))
	} else {
		prefix, verb := "", "recorded"
		if r.DryRun {
			prefix, verb = "[dry-run] ", "would record"
		}
		for _, h := range r.Hosts {
			if h.Error != "" {
				continue
			}
			fmt.Fprintf(c.g.stdout, "%s%s: %s %d legacy %s from %d %s (%s), %d already in the ledger%s\n", prefix, h.Name, verb,
				h.Recorded, plural(h.Recorded, "handoff", "handoffs"), h.Inboxes, plural(h.Inboxes, "inbox", "inboxes"),
				formatBytes(h.Bytes), h.Known, skipped(h.Skipped))
			if n := h.Skipped[legacy.SkipElsewhere]; n > 0 {
				fmt.Fprintf(c.g.stdout, "%s%s: %d %s in processed/ %s applied by another workspace (its ledger has %s: %s), not recorded here\n", prefix, h.Name,
					n, plural(n, "handoff", "handoffs"), plural(n, "was", "were"), plural(n, "it", "them"), strings.Join(h.Elsewhere, ", "))
			}
		}
		if r.Receipt != "" {
			fmt.Fprintf(c.g.stdout, "Receipt: %s\n", r.Receipt)
		}
	}
	if err != nil {
		return err
	}
	if r.Outcome != "ok" {
		return silent(exitFailed)
	}
	return nil
}

// skipped renders skip counts: ", skipped 3 (2 not-regular, 1 oversize)".
func skipped(by map[string]int) string {
	var reasons []string
	for reason := range by {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	n := 0
	var parts []string
	for _, reason := range reasons {
		n += by[reason]
		parts = append(parts, fmt.Sprintf("%d %s", by[reason], reason))
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", skipped %d (%s)", n, strings.Join(parts, ", "))
}
