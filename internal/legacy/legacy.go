// Package legacy records handoffs that another tool (the guarded script,
// Brigade) or an earlier setup already archived in an inbox's processed/
// directory, so that a copy of the same bytes that reappears in an inbox
// (a sync tool's conflict copy, a restore from backup) is a duplicate and
// is not applied twice. `handoff import processed` runs it.
//
// Guarantees: on the hosts it only lists and reads: nothing is renamed,
// removed or created there. It reads processed/ directories of the inboxes
// a sync would pull (the same discovery), never follows a symlink, reads
// only regular files with plain *.md names, at most max_file_size bytes
// each however large the host says they are (and at most 16 files and
// 32 MiB of listed sizes at once), and skips a file that changed while
// read. It never records as this workspace's a handoff another workspace
// applied, as far as it can know: a host whose mirror's MIRROR.json names
// another workspace (which syncs that host) is refused whole, and a file
// whose bytes the ledger of a workspace near this one (workspace.Near: a
// typo of its name, one below it) has a result for is skipped
// (applied-elsewhere); those ledgers are only read. In the workspace it
// writes only ledger rows (one
// transaction per host) and its own receipt; it never writes memory. A dry
// run writes nothing anywhere.
package legacy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
)

// readParallel bounds the files read at once on one host, and
// readBytes their listed sizes together (a file is read with its listed
// size as the limit, so this bounds the data held).
const (
	readParallel = 16
	readBytes    = 32 << 20
)

// Options configure Import.
type Options struct {
	Manifest  *manifest.Manifest
	Workspace string   // overrides the manifest's
	Hosts     []string // only these hosts; empty means all
	DryRun    bool     // count what would be recorded; write nothing
	Parallel  int      // hosts at once; 0 means 8
	Log       *slog.Logger
	Dial      setup.Dialer // nil: setup.Dial
	Now       func() time.Time
}

// Skip reasons: why a file in processed/ was not recorded.
const (
	SkipName     = "not-plain-md" // not a plain *.md name
	SkipKind     = "not-regular"  // a symlink, directory or other non-regular file
	SkipOversize = "oversize"     // over the host's max_file_size
	SkipChanging = "changing"     // changed while it was read
	SkipUnread   = "unreadable"   // the host refused to read it
	SkipGone     = "gone"         // vanished between listing and reading
	// SkipElsewhere: another workspace's ledger (one near this one, see
	// workspace.Near) has a result for these bytes: that workspace
	// applied them, and this one must not count them as its own.
	SkipElsewhere = "applied-elsewhere"
)

// Report is what Import recorded, or would record in a dry run.
type Report struct {
	DryRun   bool               `json:"dry_run"`
	RunID    string             `json:"run_id"`
	Outcome  string             `json:"outcome"` // ok | partial | failed
	Hosts    []Host             `json:"hosts"`
	Recorded []receipts.Handoff `json:"recorded"`
	// Receipt is the receipt file written; "" in a dry run.
	Receipt string `json:"receipt"`
}

// Host is one host's part.
type Host struct {
	Name      string         `json:"name"`
	Transport string         `json:"transport"`
	Inboxes   int            `json:"inboxes"`  // inboxes whose processed/ was read
	Files     int            `json:"files"`    // files hashed
	Recorded  int            `json:"recorded"` // newly recorded as legacy
	Known     int            `json:"known"`    // already in the ledger
	Bytes     int64          `json:"bytes"`    // of the files recorded
	Skipped   map[string]int `json:"skipped"`  // by Skip* reason
	// Elsewhere names the workspaces whose ledgers hold files of this
	// host's processed/ (SkipElsewhere), as "path (id …)".
	Elsewhere []string `json:"elsewhere,omitempty"`
	// ForeignMirror is the workspace id the host's mirror's MIRROR.json
	// names when it is not this workspace's: that workspace syncs the
	// host, and nothing of the host is recorded here (Error says so).
	ForeignMirror string `json:"foreign_mirror,omitempty"`
	Error         string `json:"error,omitempty"`

	inboxes []receipts.Inbox
}

// Import hashes the files in every selected host's processed/ directories
// and records each in the ledger as ingested before (result legacy); see
// the package guarantees. Like sync it holds the workspace lock
// (setup.ErrLocked when another run has it). A host that fails is in the
// report and the others go on; the error is for the run as a whole (lock,
// ledger, receipt).
func Import(ctx context.Context, opts Options) (*Report, error) {
	m := opts.Manifest
	if m == nil {
		return nil, &setup.UsageError{Msg: "no manifest"}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	hosts, ws, err := setup.Select(m, opts.Hosts, opts.Workspace)
	if err != nil {
		return nil, err
	}
	ident, unlock, err := setup.Lock(ws, opts.DryRun, "import processed")
	if err != nil {
		return nil, err
	}
	defer unlock()
	led, closeLedger, err := ledger.OpenFor(filepath.Join(ws, layout.LedgerFile), opts.DryRun, "handoff-import-dry-run-")
	if err != nil {
		return nil, err
	}
	defer closeLedger()

	started := opts.Now().UTC()
	r := &Report{DryRun: opts.DryRun, RunID: newRunID(started), Hosts: make([]Host, len(hosts)), Recorded: []receipts.Handoff{}}
	if err := led.StartRun(ctx, r.RunID, receipts.ModeImport); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	others := otherLedgers(ws, log)
	defer others.close()
	recorded := make([][]receipts.Handoff, len(hosts))
	setup.ForEachHost(hosts, opts.Parallel, func(i int, h manifest.HostConfig) {
		r.Hosts[i], recorded[i] = importHost(ctx, h, opts, led, r.RunID, ident.ID, others, log)
	})
	failed := 0
	for i, h := range r.Hosts {
		r.Recorded = append(r.Recorded, recorded[i]...)
		if h.Error != "" {
			failed++
		}
	}
	switch {
	case failed == 0:
		r.Outcome = receipts.OutcomeOK
	case failed == len(r.Hosts):
		r.Outcome = receipts.OutcomeFailed
	default:
		r.Outcome = receipts.OutcomePartial
	}
	if opts.DryRun {
		return r, nil
	}
	rc := receiptOf(r, m, ws, ident.ID, started, opts.Now().UTC())
	p, err := receipts.WriteRun(filepath.Join(ws, layout.ReceiptsDir), rc)
	if err != nil {
		return r, err
	}
	r.Receipt = p
	if err := led.FinishRun(ctx, r.RunID, rc.Outcome, rc.Status, p); err != nil {
		return r, fmt.Errorf("ledger: %w", err)
	}
	return r, nil
}

// importHost reads and records one host under its deadline.
func importHost(ctx context.Context, h manifest.HostConfig, opts Options, led *ledger.Ledger, runID, workspaceID string, others otherWorkspaces, log *slog.Logger) (Host, []receipts.Handoff) {
	hr := Host{Name: h.Name, Transport: h.Transport, Skipped: map[string]int{}, inboxes: []receipts.Inbox{}}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	var srcs []claim.Source
	fsys, err := opts.Dial.Or(log)(ctx, h)
	if err == nil {
		defer fsys.Close()
		err = checkMirror(ctx, fsys, h, workspaceID, &hr)
	}
	if err == nil {
		srcs, err = readHost(ctx, fsys, h, &hr, log)
	}
	if err == nil {
		srcs, err = others.drop(ctx, led, srcs, &hr)
	}
	var out []receipts.Handoff
	if err == nil && len(srcs) > 0 {
		var rec []bool
		rec, err = led.RecordLegacy(ctx, runID, srcs)
		for i, s := range srcs {
			if err != nil {
				break
			}
			if !rec[i] {
				hr.Known++
				continue
			}
			hr.Recorded++
			hr.Bytes += s.Size
			out = append(out, receipts.Handoff{Host: s.Host, Inbox: s.Inbox, Name: s.Name, SHA256: s.SHA256, Size: s.Size,
				Result: receipts.ResultLegacy, ArchivedAs: s.ArchivedAs})
		}
	}
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("deadline of %s exceeded: %w", h.Timeout, err)
		}
		hr.Error = err.Error()
		log.Warn("host failed", "host", h.Name, "err", err)
		return hr, nil // nothing of a failed host is recorded
	}
	return hr, out
}

// checkMirror refuses a host whose mirror's MIRROR.json names another
// workspace: that workspace publishes to the host because it syncs it,
// so the handoffs in the host's processed/ may be that workspace's
// applied ones, and none of them is recorded here as this workspace's.
func checkMirror(ctx context.Context, fsys transport.FS, h manifest.HostConfig, workspaceID string, hr *Host) error {
	if h.Mirror == nil || workspaceID == "" {
		return nil
	}
	info, err := mirror.ReadHostInfo(ctx, fsys, h.Mirror.Path)
	if err != nil || info == nil || info.WorkspaceID == "" || info.WorkspaceID == workspaceID {
		return nil
	}
	hr.ForeignMirror = info.WorkspaceID
	return fmt.Errorf("its mirror at %s belongs to workspace %.8s, not this one (%.8s): that workspace syncs %s, so the handoffs in its processed/ may be ones it applied; nothing recorded from %s",
		h.Mirror.Path, info.WorkspaceID, workspaceID, h.Name, h.Name)
}

// otherWorkspaces are the ledgers of the workspaces near this one
// (workspace.Near: a typo of its name, one below it), read-only.
type otherWorkspaces []otherWorkspace

type otherWorkspace struct {
	name string // "path (id …)"
	view *ledger.View
}

// otherLedgers opens the ledgers of the workspaces near ws, read-only
// and without writing anything next to them. One that cannot be opened
// is left out, and logged.
func otherLedgers(ws string, log *slog.Logger) otherWorkspaces {
	var out otherWorkspaces
	for _, n := range workspace.Near(ws) {
		v, err := ledger.OpenReadOnly(filepath.Join(n, layout.LedgerFile), true)
		if err != nil {
			log.Warn("import: another workspace's ledger", "workspace", n, "err", err)
			continue
		}
		name := workspace.Tilde(n)
		if id, err := workspace.Read(n); err == nil {
			name += " (id " + id.Short() + ")"
		}
		out = append(out, otherWorkspace{name: name, view: v})
	}
	return out
}

func (o otherWorkspaces) close() {
	for _, w := range o {
		w.view.Close()
	}
}

// drop takes out of srcs those another workspace has a result for and
// this one (led) has none, and counts them in hr as SkipElsewhere,
// naming the workspaces.
func (o otherWorkspaces) drop(ctx context.Context, led *ledger.Ledger, srcs []claim.Source, hr *Host) ([]claim.Source, error) {
	if len(o) == 0 || len(srcs) == 0 {
		return srcs, nil
	}
	all := make([]string, len(srcs))
	for i, s := range srcs {
		all[i] = s.SHA256
	}
	ours, err := led.KnownHandoffs(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var shas []string
	for _, sha := range all {
		if !ours[sha] {
			shas = append(shas, sha)
		}
	}
	elsewhere := map[string]bool{}
	for _, w := range o {
		known, err := w.view.KnownHandoffs(ctx, shas)
		if err != nil {
			return nil, fmt.Errorf("the ledger of %s: %w", w.name, err)
		}
		for sha := range known {
			if !elsewhere[sha] && !slices.Contains(hr.Elsewhere, w.name) {
				hr.Elsewhere = append(hr.Elsewhere, w.name)
			}
			elsewhere[sha] = true
		}
	}
	var keep []claim.Source
	for _, s := range srcs {
		if elsewhere[s.SHA256] {
			hr.Skipped[SkipElsewhere]++
			continue
		}
		keep = append(keep, s)
	}
	return keep, nil
}

// readHost hashes the files in the processed/ directory of every inbox a
// sync would pull.
func readHost(ctx context.Context, fsys transport.FS, h manifest.HostConfig, hr *Host, log *slog.Logger) ([]claim.Source, error) {
	inboxes, err := claim.Discover(ctx, fsys, setup.ClaimConfig(h, log))
	if err != nil {
		return nil, err
	}
	var srcs []claim.Source
	for _, in := range inboxes {
		hr.inboxes = append(hr.inboxes, receipts.Inbox{Path: in.Path, State: in.State, Pending: len(in.Candidates), Tracked: in.Tracked})
		if in.State != claim.StateOK {
			continue
		}
		got, err := readProcessed(ctx, fsys, h, in.Path, hr)
		if err != nil {
			return nil, err
		}
		hr.Inboxes++
		srcs = append(srcs, got...)
	}
	return srcs, nil
}

// readProcessed lists inbox/processed and reads its plain regular *.md
// files, at most readParallel at once, each bounded by max_file_size.
// A processed/ that is missing has nothing; one that is not a real
// directory is left alone.
func readProcessed(ctx context.Context, fsys transport.FS, h manifest.HostConfig, inbox string, hr *Host) ([]claim.Source, error) {
	dir := path.Join(inbox, claim.ProcessedDir)
	fi, err := fsys.Lstat(ctx, dir)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("lstat %s: %w", claim.Quote(dir), err)
	case !fi.IsDir():
		hr.Skipped[SkipKind]++
		return nil, nil
	}
	ents, err := fsys.ReadDir(ctx, dir, 0)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", claim.Quote(dir), err)
	}
	var todo []transport.FileInfo
	for _, e := range ents {
		switch {
		case claim.CheckName(e.Name) != "":
			hr.Skipped[SkipName]++
		case !e.IsRegular():
			hr.Skipped[SkipKind]++
		case e.Size < 0 || e.Size > h.MaxFileSize:
			hr.Skipped[SkipOversize]++
		default:
			todo = append(todo, e)
		}
	}
	slices.SortFunc(todo, func(a, b transport.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	got := make([]*claim.Source, len(todo))
	skip := make([]string, len(todo))
	budget := semaphore.NewWeighted(readBytes)
	err = fanout.Each(ctx, len(todo), readParallel, func(ctx context.Context, i int) error {
		e := todo[i]
		name := path.Join(dir, e.Name)
		w := min(max(e.Size, 1), readBytes)
		if err := budget.Acquire(ctx, w); err != nil {
			return err
		}
		defer budget.Release(w)
		data, after, err := transport.ReadListed(ctx, fsys, name, e, e.Size)
		switch {
		case errors.Is(err, transport.ErrNotExist):
			skip[i] = SkipGone
			return nil
		case errors.Is(err, transport.ErrNotRegular):
			skip[i] = SkipKind
			return nil
		case errors.Is(err, transport.ErrTooLarge), errors.Is(err, transport.ErrChanged):
			skip[i] = SkipChanging
			return nil
		case err != nil && (ctx.Err() != nil || errors.Is(err, transport.ErrBroken)):
			return fmt.Errorf("read %s: %w", claim.Quote(name), err)
		case err != nil:
			skip[i] = SkipUnread
			return nil
		}
		if after.Size != e.Size || !after.ModTime.Equal(e.ModTime) || int64(len(data)) != e.Size {
			skip[i] = SkipChanging
			return nil
		}
		got[i] = &claim.Source{Host: h.Name, Inbox: inbox, Name: e.Name, SHA256: spool.Hash(data), Size: int64(len(data)),
			ArchivedAs: path.Join(claim.ProcessedDir, e.Name)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []claim.Source
	for i := range todo {
		if got[i] != nil {
			hr.Files++
			out = append(out, *got[i])
		} else {
			hr.Skipped[skip[i]]++
		}
	}
	return out, nil
}

// receiptOf is the import's receipt: mode import, a handoff of result
// legacy for each file recorded.
func receiptOf(r *Report, m *manifest.Manifest, ws, workspaceID string, started, finished time.Time) *receipts.Receipt {
	rc := &receipts.Receipt{
		SchemaVersion: receipts.SchemaVersion, RunID: r.RunID, Mode: receipts.ModeImport, Outcome: r.Outcome,
		StartedAt: started, FinishedAt: finished, Manifest: receipts.Manifest{Path: m.Path, SHA256: m.SHA256},
		Workspace: ws, WorkspaceID: workspaceID, Hosts: []receipts.Host{}, Handoffs: r.Recorded, Notify: receipts.Notify{OK: true},
	}
	rc.Status = receipts.StatusEmpty
	if len(r.Recorded) > 0 {
		rc.Status = receipts.StatusIngested
	}
	for _, h := range r.Hosts {
		out := receipts.HostOK
		if h.Error != "" {
			out = receipts.HostError
		}
		rc.Hosts = append(rc.Hosts, receipts.Host{Name: h.Name, Transport: h.Transport, Outcome: out, Error: h.Error, Inboxes: h.inboxes})
	}
	rc.Tally()
	return rc
}

// newRunID names a run as sync does: its start time and 6 random hex
// digits.
func newRunID(t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
