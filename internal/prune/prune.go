package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// Options configure Prune.
type Options struct {
	Manifest  *manifest.Manifest
	Workspace string   // overrides the manifest's
	Hosts     []string // prune only these hosts; empty means all
	// OlderThan: archived handoffs and spool files older than this go. It
	// must be positive.
	OlderThan time.Duration
	DryRun    bool // count what would go; change nothing
	// Parallel is how many hosts are pruned at once; 0: as many as sync
	// pulls at once (fanout.HostsAtOnce).
	Parallel int
	Log      *slog.Logger // nil discards
	Dial     setup.Dialer // nil: DialHost
	Now      func() time.Time
}

// Report is what Prune removed, or would remove in a dry run.
type Report struct {
	DryRun   bool           `json:"dry_run"`
	Cutoff   time.Time      `json:"cutoff"`
	Hosts    []Host         `json:"hosts"`
	Spool    SpoolResult    `json:"spool"`
	Receipts ReceiptsResult `json:"receipts"`
	// Backups are the backups the manifest's backups.keep no longer
	// keeps (none when it is 0).
	Backups BackupsResult `json:"backups"`
}

// Host is one host's part of a prune.
type Host struct {
	Name    string `json:"name"`
	Removed int    `json:"removed"` // files removed from processed/ directories
	Bytes   int64  `json:"bytes"`   // their sizes as the host reported them
	Kept    int    `json:"kept"`    // archived handoffs not old enough yet
	Skipped int    `json:"skipped"` // entries left alone: not a regular file with a plain *.md name
	// Unknown counts archived files the ledger has no record of (archived
	// by another tool, or before the ledger): they have no archive time and
	// are left alone until `handoff import processed` records them.
	Unknown int `json:"unknown"`
	// Names are the removed files (would be removed, in a dry run), as
	// paths on the host.
	Names []string `json:"names"`
	Error string   `json:"error,omitempty"`
}

// Failed reports whether any host failed.
func (r *Report) Failed() bool {
	for _, h := range r.Hosts {
		if h.Error != "" {
			return true
		}
	}
	return false
}

// Prune deletes old acknowledged handoffs: on each selected host, the
// regular files in every inbox's processed/ directory that the ledger
// says were archived before now-OlderThan (the writer's modification time
// plays no part; a file the ledger does not know stays); in the
// workspace, the spool files of handoffs ingested before then (see Spool)
// and the per-run receipts of runs finished before then (see Receipts);
// and the backups the manifest's backups.keep no longer keeps, as sync
// removes them (see Backups; --older-than plays no part there).
// It never touches malformed/, the inboxes themselves, review drafts,
// latest.json and latest.log, or the ledger's rows, never follows a
// symlink and never descends below processed/.
//
// Like Sync, it holds the workspace lock (ErrLocked when another run has
// it); a dry run locks only an existing lock file and writes nothing. A host
// that fails is recorded in the report and the others are pruned; the
// error is for the run as a whole (lock, ledger, spool).
func Run(ctx context.Context, opts Options) (*Report, error) {
	m := opts.Manifest
	if m == nil {
		return nil, &setup.UsageError{Msg: "no manifest"}
	}
	if opts.OlderThan <= 0 {
		return nil, &setup.UsageError{Msg: "--older-than must be a positive duration, such as 30d"}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	hosts, wsDir, err := setup.Select(m, opts.Hosts, opts.Workspace)
	if err != nil {
		return nil, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = fanout.HostsAtOnce(len(hosts), fanout.Available())
	}
	_, unlock, err := setup.Lock(wsDir, opts.DryRun, "prune")
	if err != nil {
		return nil, err
	}
	defer unlock()

	led, closeLedger, err := openLedger(wsDir, opts.DryRun)
	if err != nil {
		return nil, err
	}
	defer closeLedger()

	r := &Report{DryRun: opts.DryRun, Cutoff: opts.Now().Add(-opts.OlderThan), Hosts: make([]Host, len(hosts)),
		Backups: BackupsResult{Names: []string{}}}
	log.Info("prune started", "workspace", wsDir, "cutoff", r.Cutoff, "dry_run", opts.DryRun, "hosts", len(hosts))
	setup.ForEachHost(hosts, opts.Parallel, func(i int, h manifest.HostConfig) {
		r.Hosts[i] = pruneHost(ctx, h, opts, r.Cutoff, led, log)
	})

	var selected []string
	if len(opts.Hosts) > 0 {
		for _, h := range hosts {
			selected = append(selected, h.Name)
		}
	}
	if led == nil {
		// No ledger: no run has stored anything here, so nothing in the
		// workspace can be old.
		log.Info("prune finished", "failed", r.Failed())
		return r, nil
	}
	sp, err := Spool(ctx, led, SpoolOptions{Dir: filepath.Join(wsDir, layout.SpoolDir), Before: r.Cutoff, Hosts: selected, DryRun: opts.DryRun})
	r.Spool = sp
	if err != nil {
		return r, fmt.Errorf("prune spool: %w", err)
	}
	rc, err := Receipts(ctx, led, ReceiptsOptions{Dir: filepath.Join(wsDir, layout.ReceiptsDir), Before: r.Cutoff, DryRun: opts.DryRun})
	r.Receipts = rc
	if err != nil {
		return r, fmt.Errorf("prune receipts: %w", err)
	}
	if keep := m.Backups.Retention(); keep > 0 {
		bk, err := Backups(ctx, led, BackupsOptions{Workspace: wsDir, Keep: keep, Now: opts.Now(), DryRun: opts.DryRun})
		r.Backups = bk
		if err != nil {
			return r, fmt.Errorf("prune: %w", err)
		}
	}
	log.Info("prune finished", "spool_files", sp.Files, "receipts", rc.Files, "backups", r.Backups.Files, "failed", r.Failed())
	return r, nil
}

// openLedger opens the workspace's ledger (a scratch copy in a dry run, so
// that not even SQLite's side files appear). A workspace without a ledger
// gets nil: nothing there has an archive time.
func openLedger(ws string, dryRun bool) (*ledger.Ledger, func(), error) {
	p := filepath.Join(ws, layout.LedgerFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil, func() {}, nil
	}
	return ledger.OpenFor(p, dryRun, "handoff-prune-dry-run-")
}

// pruneHost prunes one host under its deadline.
func pruneHost(ctx context.Context, h manifest.HostConfig, opts Options, cutoff time.Time, led *ledger.Ledger, log *slog.Logger) Host {
	hp := Host{Name: h.Name, Names: []string{}}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	fsys, err := opts.Dial.Or(log)(ctx, h)
	if err == nil {
		defer fsys.Close()
		err = pruneInboxes(ctx, fsys, h, opts.DryRun, cutoff, led, &hp, log)
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("deadline of %s exceeded: %w", h.Timeout, err)
		}
		hp.Error = err.Error()
		log.Warn("host failed", "host", h.Name, "err", err)
	}
	return hp
}

func pruneInboxes(ctx context.Context, fsys transport.FS, h manifest.HostConfig, dryRun bool, cutoff time.Time, led *ledger.Ledger, hp *Host, log *slog.Logger) error {
	cfg := setup.ClaimConfig(h, log)
	inboxes, err := claim.Discover(ctx, fsys, cfg)
	if err != nil {
		return err
	}
	for _, in := range inboxes {
		// Only inboxes a pull would use: not missing, symlinked, opted out,
		// unlisted or with an unreadable git index.
		if in.State != claim.StateOK {
			log.Info("inbox skipped", "host", h.Name, "inbox", in.Path, "state", in.State)
			continue
		}
		archived := map[string]time.Time{}
		if led != nil {
			if archived, err = led.ArchivedTimes(ctx, h.Name, in.Path); err != nil {
				return err
			}
		}
		if err := pruneProcessed(ctx, fsys, h.Name, path.Join(in.Path, claim.ProcessedDir), dryRun, cutoff, archived, hp, log); err != nil {
			return err
		}
	}
	return nil
}

// pruneProcessed removes the old regular files directly in dir, a
// processed/ directory: those whose archive time (archived, keyed by
// processed/<name>) is before cutoff. Anything that is not a regular file
// with a plain *.md name is left alone, and so is dir itself when it is
// not a real directory.
func pruneProcessed(ctx context.Context, fsys transport.FS, host, dir string, dryRun bool, cutoff time.Time, archived map[string]time.Time, hp *Host, log *slog.Logger) error {
	fi, err := fsys.Lstat(ctx, dir)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("lstat %s: %w", dir, err)
	case !fi.IsDir():
		log.Warn("not a directory, left alone", "host", host, "path", dir)
		return nil
	}
	ents, err := fsys.ReadDir(ctx, dir, 0)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if claim.CheckName(e.Name) != "" || !e.IsRegular() {
			hp.Skipped++
			log.Debug("left alone", "host", host, "dir", dir, "name", claim.Quote(e.Name), "mode", e.Mode.String())
			continue
		}
		at, known := archived[path.Join(claim.ProcessedDir, e.Name)]
		if !known {
			hp.Unknown++
			continue
		}
		if !at.Before(cutoff) {
			hp.Kept++
			continue
		}
		name := path.Join(dir, e.Name)
		if !dryRun {
			// Look again right before removing: the listing may be old,
			// and only a regular file is ever removed.
			cur, err := fsys.Lstat(ctx, name)
			if errors.Is(err, transport.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("lstat %s: %w", claim.Quote(name), err)
			}
			if !cur.IsRegular() {
				hp.Skipped++
				continue
			}
			if err := fsys.Remove(ctx, name); err != nil {
				if errors.Is(err, transport.ErrNotExist) {
					continue
				}
				return fmt.Errorf("remove %s: %w", claim.Quote(name), err)
			}
		}
		hp.Removed++
		hp.Bytes = addSize(hp.Bytes, e.Size)
		hp.Names = append(hp.Names, name)
		log.Debug("pruned", "host", host, "name", claim.Quote(name), "size", e.Size, "archived", at, "dry_run", dryRun)
	}
	return nil
}

// addSize adds a host-reported size, which may be anything, without
// overflowing.
func addSize(total, n int64) int64 {
	if n <= 0 {
		return total
	}
	if total > math.MaxInt64-n {
		return math.MaxInt64
	}
	return total + n
}
