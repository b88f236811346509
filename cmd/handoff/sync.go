package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/gctune"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/notify"
	"github.com/handoff-sync/handoff/receipts"
)

type syncCmd struct {
	g            *globals
	hosts        []string
	dryRun       bool
	json         bool
	quiet        bool
	table        bool
	manifestPath string
	workspace    string
	parallel     int
	ping         string
	pingTimeout  time.Duration
	adopt        []string
	listInboxes  bool
}

func newSyncCmd(g *globals) *cobra.Command {
	c := &syncCmd{g: g}
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Pull every host, ingest, and write a receipt (the timer's job)",
		Args:  cobra.NoArgs,
		RunE:  c.run,
	}
	f := cmd.Flags()
	f.StringArrayVar(&c.hosts, "host", nil, "pull only this host (repeatable); handoffs already stored are still ingested")
	f.BoolVar(&c.dryRun, "dry-run", false, "show what would happen; write nothing anywhere")
	f.BoolVar(&c.json, "json", false, "print the receipt as JSON on stdout")
	f.BoolVarP(&c.quiet, "quiet", "q", false, "print nothing but errors (no progress, no summary); the exit code tells how it went")
	f.BoolVar(&c.table, "table", false, "after the summary, say why handoffs were deferred, list what this run decided and name the receipt (default: on when stdout is a terminal; --table=false turns it off)")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest)")
	f.IntVar(&c.parallel, "parallel", 0, "hosts pulled at once (default: every host, up to half the available memory at 64 MiB a worker, at most 64, at least 8)")
	f.StringVar(&c.ping, "ping", "", "heartbeat URL, healthchecks.io style (overrides the manifest's notify.ping_url)")
	f.DurationVar(&c.pingTimeout, "ping-timeout", notify.DefaultTotal, "most time one heartbeat ping may take, retries included")
	f.BoolVar(&c.listInboxes, "list-inboxes", false, "this run's receipt lists every inbox, not only those with something to say (see docs/receipts.md)")
	f.StringArrayVar(&c.adopt, "adopt-mirror", nil, "take over HOST's mirror from the workspace its MIRROR.json names (repeatable; see docs/mirror.md)")
	return cmd
}

// checkAdopt checks that every --adopt-mirror host is in the manifest and
// has a mirror.
func checkAdopt(m *manifest.Manifest, adopt []string) error {
	for _, name := range adopt {
		h, ok := m.Host(name)
		switch {
		case !ok:
			return &exitError{code: exitUsage, err: fmt.Errorf("--adopt-mirror %s: no host %q in the manifest", name, name),
				hint: "name a host of the manifest that has a mirror: " + strings.Join(m.HostNames(), ", ")}
		case h.Mirror == nil:
			return &exitError{code: exitUsage, err: fmt.Errorf("--adopt-mirror %s: host %s has no mirror", name, name),
				hint: "give it one in the manifest (hosts[].mirror), or leave the flag out"}
		}
	}
	return nil
}

func (c *syncCmd) run(cmd *cobra.Command, _ []string) error {
	if c.quiet && c.json {
		return usageError{errors.New("--quiet and --json exclude each other")}
	}
	if !cmd.Flags().Changed("table") {
		c.table = isTerminal(c.g.stdout)
	} else if c.table && (c.json || c.quiet) {
		return usageError{errors.New("--table prints after the summary: it goes with neither --json nor --quiet")}
	}
	gctune.Start()
	stop, err := startProfile("sync")
	if err != nil {
		return err
	}
	defer stop()
	m, ws, err := loadWiring(c.manifestPath, c.workspace)
	if err != nil {
		return err
	}
	if err := checkKeys(m, c.hosts); err != nil {
		return err
	}
	if err := checkAdopt(m, c.adopt); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for pull workers: %w", err)
	}
	notifier, err := c.notifier(m)
	if err != nil {
		return err
	}
	live := c.g.startProgress(m, c.hosts, c.json || c.quiet) // nil unless on a terminal
	r, err := handoff.Sync(cmd.Context(), handoff.Options{
		Manifest: m, Workspace: ws, Hosts: c.hosts, DryRun: c.dryRun,
		Parallel: c.parallel, Log: c.g.logger(), Worker: self, Notifier: notifier,
		Progress: live.Func(), AdoptMirrors: c.adopt, ListInboxes: c.listInboxes,
	})
	live.Finish(r)
	if err != nil {
		return err
	}
	if c.json {
		b, err := receiptJSON(r, c.dryRun)
		if err != nil {
			return err
		}
		c.g.stdout.Write(b)
	} else {
		for _, h := range r.Hosts {
			if h.Outcome != receipts.HostOK {
				fmt.Fprintf(c.g.stderr, "handoff: host %s: %s\n", h.Name, printable(h.Error))
			}
			if h.Mirror != nil && h.Mirror.Outcome == mirror.OutcomeError {
				fmt.Fprintf(c.g.stderr, "handoff: host %s: mirror: %s\n", h.Name, printable(h.Mirror.Error))
			}
		}
		switch {
		case r.Interrupted:
			stored, archived := 0, 0
			for _, h := range r.Hosts {
				stored, archived = stored+h.Stored, archived+h.Archived
			}
			fmt.Fprintf(c.g.stderr, "handoff: %s: before it stopped, the run stored %d and archived %d %s on their hosts, and ingested %d; its receipt counts them\nhint: nothing stored is lost: the next `handoff sync` (the timer's too) ingests and archives the rest and lists them\n",
				printable(r.Error), stored, archived, plural(archived, "handoff", "handoffs"), ingestedCount(r))
		case r.Error != "":
			fmt.Fprintf(c.g.stderr, "handoff: ingest: %s\nhint: nothing was lost: what could not be applied stays stored and the next sync retries it; `handoff doctor` checks the workspace\n", printable(r.Error))
		}
		if !c.quiet {
			if n, runs := finishedForEarlier(r); n > 0 {
				fmt.Fprintf(c.g.stdout, "Finished %d %s stored by an earlier run that did not finish (%s)\n", n, plural(n, "handoff", "handoffs"), strings.Join(runs, ", "))
			}
			fmt.Fprint(c.g.stdout, r.Summary())
			if c.table {
				printRunTable(c.g.stdout, m, ws, r)
			}
		}
	}
	if cmd.Context().Err() != nil && r.Outcome != receipts.OutcomeOK && !r.Interrupted {
		fmt.Fprintf(c.g.stderr, "handoff: interrupted: the run was stopped before it was done; the receipt says what it did, and the next sync finishes the rest\n")
	}
	if r.Outcome != receipts.OutcomeOK {
		return silent(exitFailed)
	}
	return nil
}

// ingestedCount counts the handoffs that got a result of their own in r
// (rejected and deferred files aside, which are never stored).
func ingestedCount(r *receipts.Receipt) int {
	n := 0
	for _, h := range r.Handoffs {
		if h.Result != receipts.ResultRejected && h.Result != receipts.ResultDeferred {
			n++
		}
	}
	return n
}

// finishedForEarlier counts the handoffs r ingested that an earlier run
// stored, and names those runs.
func finishedForEarlier(r *receipts.Receipt) (int, []string) {
	n := 0
	var runs []string
	for _, h := range r.Handoffs {
		if h.StoredRun == "" {
			continue
		}
		n++
		if !slices.Contains(runs, h.StoredRun) {
			runs = append(runs, h.StoredRun)
		}
	}
	return n, runs
}

// notifier is the heartbeat from --ping or the manifest's notify.ping_url;
// nil when neither is set.
func (c *syncCmd) notifier(m *manifest.Manifest) (handoff.Notifier, error) {
	if c.pingTimeout <= 0 {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("--ping-timeout %v: must be more than 0", c.pingTimeout)}
	}
	u := c.ping
	if u == "" {
		u = m.Notify.PingURL
	}
	if u == "" {
		return nil, nil
	}
	p, err := notify.New(u, notify.Options{Total: c.pingTimeout, Log: c.g.logger()})
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err, hint: "use the full ping URL, such as https://hc-ping.com/<uuid>"}
	}
	return p, nil
}

// checkKeys refuses the run, before anything is written or dialled, when a
// selected host's identity file is readable by group or others. An unknown
// host name is left to Sync, which reports it.
func checkKeys(m *manifest.Manifest, names []string) error {
	hosts, err := setup.Hosts(m, names)
	if err != nil {
		return nil
	}
	var ke *setup.KeyError
	if err := setup.CheckKeys(hosts); errors.As(err, &ke) {
		return &exitError{code: exitUsage, err: ke, hint: ke.Hint()}
	}
	return nil
}

// loadWiring loads the manifest at path (or the default one) and resolves
// the workspace: dir when set (--workspace), else the manifest's, absolute.
// sync, doctor and prune start from here.
// receiptJSON returns the receipt as its file holds it, byte for byte, so
// that what --json prints and the file agree; reading the file back costs
// less than encoding a big run's receipt again (about 90 ms of CPU for
// 8,000 handoffs). A dry run writes no file: its receipt is encoded here.
func receiptJSON(r *receipts.Receipt, dryRun bool) ([]byte, error) {
	if !dryRun {
		b, err := os.ReadFile(filepath.Join(r.Workspace, filepath.FromSlash(layout.ReceiptsDir), r.RunID+".json"))
		if err == nil {
			return b, nil
		}
	}
	return receipts.Marshal(r)
}
