package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/worker"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// maxRunLog bounds latest.log: a host with a flood of files must not make
// the run's own log grow without bound.
const maxRunLog = 8 << 20

// ErrLocked means another run holds the workspace lock.
var ErrLocked = setup.ErrLocked

// UsageError is a mistake in how Sync was called (an unknown host name);
// the CLI exits 2 for it.
type UsageError = setup.UsageError

// Dialer opens the transport for one host. The caller closes it.
type Dialer = setup.Dialer

// Options configure Sync.
type Options struct {
	Manifest  *manifest.Manifest
	Workspace string   // absolute; overrides the manifest's
	Hosts     []string // pull only these hosts; empty means all
	DryRun    bool
	Parallel  int          // hosts pulled at once; 0 means 8
	Log       *slog.Logger // progress and diagnostics; nil discards
	Dial      Dialer       // in-process pulls only; nil: DialHost
	// Worker is the handoff binary to run each host's pull in, isolated in
	// its own process; "" pulls in this process (tests, library use).
	Worker string
	Now    func() time.Time

	// Notifier, when set, is told when the run starts and how it ended (the
	// heartbeat ping). Its failures are recorded in the receipt and never
	// fail the run. Dry runs do not notify.
	Notifier Notifier
	// Progress, when set, receives per-host progress as it happens. It is
	// called from several goroutines, one at a time per host.
	Progress func(HostProgress)
	// AdoptMirrors names hosts whose mirror this run takes over from
	// another workspace (sync --adopt-mirror; docs/mirror.md).
	AdoptMirrors []string
}

// Notifier is the heartbeat: Start when a run begins (Sync calls it while
// the run works), Finish when it ends, only once Start has returned.
type Notifier interface {
	Start(ctx context.Context) error
	Finish(ctx context.Context, ok bool, summary string) error
}

// HostProgress is one host's state during a run.
type HostProgress struct {
	Host    string
	State   string // connecting | pulling | done | partial | error
	Inboxes int    // inboxes scanned so far
	Pulled  int    // handoffs stored so far
	Err     string // with State "partial" or "error"
}

// Sync pulls the selected hosts, ingests everything stored, and (unless a
// dry run) writes the receipt. It returns the receipt, with an error only
// when the run could not start (lock held, workspace unusable) or its
// bookkeeping failed; host failures are in the receipt.
func Sync(ctx context.Context, opts Options) (*receipts.Receipt, error) {
	m := opts.Manifest
	if m == nil {
		return nil, &UsageError{Msg: "no manifest"}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 8
	}
	hosts, wsDir, err := setup.Select(m, opts.Hosts, opts.Workspace)
	if err != nil {
		return nil, err
	}

	runLog := &limitedBuffer{max: maxRunLog}
	handlers := []slog.Handler{slog.NewTextHandler(runLog, &slog.HandlerOptions{Level: slog.LevelInfo})}
	if opts.Log != nil {
		handlers = append(handlers, opts.Log.Handler())
	}
	log := slog.New(slog.NewMultiHandler(handlers...))

	ident, unlock, err := setup.Lock(wsDir, opts.DryRun, lockWhat(opts.Hosts))
	if err != nil {
		return nil, err
	}
	defer unlock()

	started := opts.Now().UTC()
	mode := receipts.ModeApply
	if opts.DryRun {
		mode = receipts.ModeDryRun
	}
	b := receipts.NewBuilder(newRunID(started), mode, started, receipts.Manifest{Path: m.Path, SHA256: m.SHA256}, wsDir, ident.ID)
	r := b.Receipt()
	log.Info("run started", "run", r.RunID, "mode", r.Mode, "workspace", wsDir, "hosts", len(hosts))
	notify := func(err error) {
		if b.NotifyFailed(err) {
			log.Warn("heartbeat ping failed", "err", err)
		}
	}
	// The start ping goes out while the run works: it is an HTTPS request
	// (a TLS handshake, on a laptop's slow link several round trips) that
	// would otherwise come before every pull. The finish ping waits for
	// it, so the monitor sees the two in order, and a run that ends early
	// still lets it finish.
	startPing := func() error { return nil }
	if opts.Notifier != nil && !opts.DryRun {
		sent := make(chan error, 1)
		go func() { sent <- opts.Notifier.Start(ctx) }()
		var once sync.Once
		var startErr error
		startPing = func() error {
			once.Do(func() { startErr = <-sent })
			return startErr
		}
		defer startPing()
	}

	st, err := openState(wsDir, opts.DryRun)
	if err != nil {
		return nil, err
	}
	defer st.close()
	if !opts.DryRun {
		claim.ForgetWalkHints(st.walksDir, hostNames(m.Hosts), log)
	}
	if err := st.led.StartRun(ctx, r.RunID, r.Mode); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}

	ing, err := ingest.New(ingest.Options{Workspace: wsDir, RunID: r.RunID, DryRun: opts.DryRun, Log: log}, st.led, st.spool)
	if err != nil {
		return nil, err
	}
	defer ing.Close()

	// Ingest while the pulls run: whatever a host has stored is applied
	// while the others are still pulling, and one last pass after the
	// pulls applies the rest. Only the ingester writes the workspace.
	stored := make(chan struct{}, 1)
	pullOpts := opts
	pullOpts.Progress = func(p HostProgress) {
		if p.Pulled > 0 {
			select {
			case stored <- struct{}{}:
			default:
			}
		}
		if opts.Progress != nil {
			opts.Progress(p)
		}
	}
	var reports []claim.HostReport
	var sessions []*worker.Session
	pulled := make(chan struct{})
	st.records = worker.StartRecordQueue(st.led, r.RunID, log)
	go func() {
		defer close(pulled)
		reports, sessions = pullAll(ctx, hosts, pullOpts, st.puller(pullOpts, r.RunID, log))
		st.records.Stop()
	}()
	entries, ingErr := ingestWhilePulling(ctx, ing, stored, pulled)
	<-pulled
	for _, rep := range reports {
		// The run's own account of what each pull recorded, not the
		// worker's report: a worker killed part way (the run interrupted,
		// its deadline passed) reports nothing it stored.
		h := hostEntry(rep)
		h.Stored, h.Archived = st.records.RecordedFor(rep.Name)
		b.AddHost(h, h.Stored)
	}
	if ingErr == nil {
		// Sources stored after the last pass began (or by a host whose
		// last progress came with its end) are applied now.
		var more []ingest.Entry
		more, ingErr = ing.Run(ctx)
		entries = append(entries, more...)
	}
	b.AddHandoffs(appliedEntries(entries, reports, r.RunID)...)
	b.AddHandoffs(claimedEntries(reports)...)
	// A run that is stopped (SIGINT, SIGTERM) still records what it did,
	// and says that it was stopped.
	var stopped error
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		stopped = context.Cause(ctx)
		log.Warn("run interrupted", "cause", stopped)
	}
	books := context.WithoutCancel(ctx)
	if !opts.DryRun {
		recordRejects(books, st.led, r.RunID, reports, log)
	}
	publishAll(ctx, hosts, reports, sessions, opts, wsDir, r.RunID, ingErr, b)
	b.Judge(ingErr)
	if stopped != nil {
		b.Interrupted(stopped)
	}
	if ingErr != nil {
		log.Error("ingest failed", "err", ingErr)
	}
	if opts.Notifier != nil && !opts.DryRun {
		notify(startPing())
		notify(opts.Notifier.Finish(ctx, r.Outcome == receipts.OutcomeOK, r.Summary()))
	}
	b.Finish(opts.Now())
	log.Info("run finished", "run", r.RunID, "outcome", r.Outcome, "status", r.Status)
	if opts.DryRun {
		return r, nil
	}
	logBytes := runLog.buf.Bytes()
	if runLog.over {
		logBytes = append(logBytes, fmt.Sprintf("… log truncated at %d bytes\n", maxRunLog)...)
	}
	path, err := receipts.Write(filepath.Join(wsDir, layout.ReceiptsDir), r, logBytes)
	if err != nil {
		return r, err
	}
	if err := st.led.FinishRun(books, r.RunID, r.Outcome, r.Status, path); err != nil {
		return r, fmt.Errorf("ledger: %w", err)
	}
	return r, nil
}

// ingestWhilePulling applies stored handoffs each time a host reports
// newly stored ones (at most one pass at a time; reports that arrive
// during a pass start one more), until the pulls are done. It stops at the
// first ingest error; the pulls go on.
func ingestWhilePulling(ctx context.Context, ing *ingest.Ingester, stored <-chan struct{}, pulled <-chan struct{}) ([]ingest.Entry, error) {
	var all []ingest.Entry
	for {
		select {
		case <-pulled:
			return all, nil
		case <-stored:
		}
		entries, err := ing.Run(ctx)
		all = append(all, entries...)
		if err != nil {
			return all, err
		}
	}
}

// appliedEntries are the receipt entries of what the ingester decided,
// each with its archive error if its host could not archive it.
// An entry stored by an earlier run names that run.
func appliedEntries(entries []ingest.Entry, reports []claim.HostReport, runID string) []receipts.Handoff {
	unarchived := map[[4]string]string{} // host, inbox, name, hash -> error
	for _, rep := range reports {
		for _, it := range rep.Unarchived {
			unarchived[[4]string{rep.Name, it.Inbox, it.Name, it.SHA256}] = it.Error
		}
	}
	out := make([]receipts.Handoff, 0, len(entries))
	for _, e := range entries {
		out = append(out, receipts.Handoff{
			Host: e.Host, Inbox: e.Inbox, Name: e.Name, SHA256: e.SHA256, Size: e.Size,
			Result: e.Result, Reason: e.Reason, Action: e.Action, Target: e.Target,
			BeforeSHA256: e.BeforeSHA256, AfterSHA256: e.AfterSHA256, ArchivedAs: e.ArchivedAs,
			Error: unarchived[[4]string{e.Host, e.Inbox, e.Name, e.SHA256}],
		})
		if e.StoredRun != runID {
			out[len(out)-1].StoredRun = e.StoredRun
		}
	}
	return out
}

// claimedEntries are the receipt entries of the files the pulls rejected
// or deferred.
func claimedEntries(reports []claim.HostReport) []receipts.Handoff {
	var out []receipts.Handoff
	for _, rep := range reports {
		for _, it := range rep.Items {
			out = append(out, receipts.Handoff{
				Host: rep.Name, Inbox: it.Inbox, Name: it.Name, SHA256: it.SHA256, Size: it.Size,
				Result: it.Result, Reason: it.Reason, ArchivedAs: it.ArchivedAs, Error: it.Error,
			})
		}
	}
	return out
}

// recordRejects records the rejected files in the ledger, for where.
func recordRejects(ctx context.Context, led *ledger.Ledger, runID string, reports []claim.HostReport, log *slog.Logger) {
	for _, rep := range reports {
		for _, it := range rep.Items {
			if it.Result != claim.ResultRejected {
				continue
			}
			if err := led.RecordReject(ctx, runID, it, rep.Name); err != nil {
				log.Warn("could not record a rejected file", "err", err)
			}
		}
	}
}

func hostEntry(rep claim.HostReport) receipts.Host {
	h := receipts.Host{Name: rep.Name, Transport: rep.Transport, Outcome: rep.Outcome, Error: rep.Error, Inboxes: []receipts.Inbox{}, ItemsDropped: rep.ItemsDropped, Quirks: rep.Quirks}
	for _, in := range rep.Inboxes {
		h.Inboxes = append(h.Inboxes, receipts.Inbox{Path: in.Path, State: in.State, Pending: in.Pending, Tracked: in.Tracked, Error: in.Error, Ignored: in.Ignored, IgnoredCount: in.IgnoredCount})
	}
	return h
}

// pullAll pulls hosts concurrently, at most opts.Parallel at once, each
// under its own deadline. Reports come back in manifest order.
func pullAll(ctx context.Context, hosts []manifest.HostConfig, opts Options, pl *worker.Puller) ([]claim.HostReport, []*worker.Session) {
	out := make([]claim.HostReport, len(hosts))
	sessions := make([]*worker.Session, len(hosts))
	setup.ForEachHost(hosts, opts.Parallel, func(i int, h manifest.HostConfig) {
		out[i], sessions[i] = pullHost(ctx, h, opts, pl)
	})
	return out, sessions
}

func pullHost(ctx context.Context, h manifest.HostConfig, opts Options, pl *worker.Puller) (claim.HostReport, *worker.Session) {
	progress := func(p HostProgress) {
		if opts.Progress != nil {
			p.Host = h.Name
			opts.Progress(p)
		}
	}
	progress(HostProgress{State: "connecting"})
	rep, sess := pl.Pull(ctx, h)
	switch rep.Outcome {
	case claim.OutcomeOK:
		progress(HostProgress{State: "done", Inboxes: len(rep.Inboxes), Pulled: rep.Stored})
	case claim.OutcomePartial:
		progress(HostProgress{State: "partial", Inboxes: len(rep.Inboxes), Pulled: rep.Stored, Err: rep.Error})
	default:
		progress(HostProgress{State: "error", Inboxes: len(rep.Inboxes), Pulled: rep.Stored, Err: rep.Error})
	}
	return rep, sess
}

// publishAll publishes the mirror of every host that kept its session,
// once the run's ingest is done; when ingest failed, the mirrors are left
// as they are. A partial host (an inbox it could not archive in) keeps
// its session and is published; hosts whose pull failed are skipped.
func publishAll(ctx context.Context, hosts []manifest.HostConfig, reports []claim.HostReport, sessions []*worker.Session, opts Options, wsDir, runID string, ingErr error, b *receipts.Builder) {
	job := mirror.Job{Workspace: wsDir, WorkspaceID: b.Receipt().WorkspaceID, Canonical: mirror.CanonicalName(), RunID: runID, Now: opts.Now().UTC(), DryRun: opts.DryRun}
	adopt := func(host string) bool { return slices.Contains(opts.AdoptMirrors, host) }
	results := make([]*mirror.Result, len(hosts))
	interrupted := make([]bool, len(hosts))
	setup.ForEachHost(hosts, opts.Parallel, func(i int, h manifest.HostConfig) {
		sess := sessions[i]
		switch {
		case h.Mirror == nil:
			return
		case sess == nil:
			results[i] = &mirror.Result{Outcome: mirror.OutcomeSkipped, Error: "the pull failed: " + reports[i].Error}
		case ingErr != nil:
			sess.Close()
			results[i] = &mirror.Result{Outcome: mirror.OutcomeSkipped, Error: "ingest failed; the mirror keeps what it had"}
		default:
			j := job
			j.StateFile = mirror.StateFile(filepath.Join(wsDir, layout.MirrorsDir), h.Name)
			j.Adopt = adopt(h.Name)
			res := sess.Publish(ctx, j)
			if ctx.Err() != nil && res.Outcome != mirror.OutcomeOK {
				interrupted[i] = true
				res = interruptedPublish(res, j.StateFile)
			}
			results[i] = &res
		}
	})
	for i, res := range results {
		if res == nil {
			continue
		}
		b.SetMirror(hosts[i].Name, receipts.Mirror{Outcome: res.Outcome, Dir: res.Dir, Sent: nonNil(res.Sent), Removed: nonNil(res.Removed),
			Bytes: res.Bytes, Generation: res.Generation, Error: res.Error, Interrupted: interrupted[i]})
	}
}

// interruptedPublish is the result of a publish the run's interruption
// (SIGINT, SIGTERM) stopped: what the publisher says it did, kept as it
// is so that the receipt agrees with the host, and an error that says
// so. A publisher that said nothing leaves the generation of the last
// publish known to have finished.
func interruptedPublish(res mirror.Result, stateFile string) mirror.Result {
	res.Outcome = mirror.OutcomeError
	res.Error = "interrupted: the run was stopped while publishing; the next sync finishes the job (" + res.Error + ")"
	if res.Generation == 0 {
		if st, err := mirror.LoadState(stateFile); err == nil {
			res.Generation = st.Generation
		}
	}
	return res
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// state is the workspace's .handoff directory as a run uses it. The paths
// let a worker process open the same spool and walk hints; it records
// through records.
type state struct {
	led        *ledger.Ledger
	records    *worker.RecordQueue // the run's one writer of its pulls' records
	spool      spool.Store
	ledgerPath string
	spoolDir   string
	baseSpool  string // dry run: the real spool, read-only
	walksDir   string // the hosts' walk hints (read-only in a dry run)
	closers    []func() error
}

// puller is how the run's pulls are made: in workers (opts.Worker) or in
// this process, recording through the run's queue, and telling
// opts.Progress of a worker's progress as a "pulling" update.
func (s *state) puller(opts Options, runID string, log *slog.Logger) *worker.Puller {
	return &worker.Puller{Binary: opts.Worker, Dial: opts.Dial, Spool: s.spool, SpoolDir: s.spoolDir, BaseSpool: s.baseSpool,
		WalksDir: s.walksDir, Records: s.records, RunID: runID, DryRun: opts.DryRun, Now: opts.Now, Log: log,
		Progress: func(host string, inboxes, pulled int) {
			opts.Progress(HostProgress{Host: host, State: "pulling", Inboxes: inboxes, Pulled: pulled})
		}}
}

func (s *state) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// openState opens the ledger and spool. A dry run works on a scratch copy of
// the ledger and a scratch spool layered over the real one, all in a
// temporary directory, so that nothing under the workspace changes.
func openState(ws string, dryRun bool) (*state, error) {
	st := &state{ledgerPath: filepath.Join(ws, layout.LedgerFile), spoolDir: filepath.Join(ws, layout.SpoolDir), walksDir: filepath.Join(ws, layout.WalksDir)}
	if dryRun {
		tmp, err := os.MkdirTemp("", "handoff-dry-run-")
		if err != nil {
			return nil, err
		}
		st.closers = append(st.closers, func() error { return os.RemoveAll(tmp) })
		if err := ledger.Copy(st.ledgerPath, filepath.Join(tmp, "ledger.db")); err != nil {
			st.close()
			return nil, fmt.Errorf("dry run: %w", err)
		}
		st.baseSpool = st.spoolDir
		st.ledgerPath, st.spoolDir = filepath.Join(tmp, "ledger.db"), filepath.Join(tmp, "spool")
	}
	if !dryRun {
		// Under the lock and before any worker starts: the only moment a
		// temporary file in the spool is surely a crashed writer's.
		sp, err := spool.Open(st.spoolDir)
		if err != nil {
			return nil, err
		}
		_, err = sp.RemoveTemps()
		sp.Close()
		if err != nil {
			return nil, err
		}
	}
	sp, closeSpool, err := spool.OpenLayered(st.spoolDir, st.baseSpool)
	if err != nil {
		st.close()
		return nil, err
	}
	st.spool = sp
	st.closers = append(st.closers, closeSpool)
	led, err := ledger.Open(st.ledgerPath)
	if err != nil {
		st.close()
		return nil, err
	}
	st.led = led
	st.closers = append(st.closers, led.Close)
	return st, nil
}

// hostNames are the names of the manifest's hosts.
func hostNames(hosts []manifest.Host) []string {
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return names
}

// lockWhat is what a sync writes into the lock file (setup.Holder).
func lockWhat(hosts []string) string {
	what := "sync"
	for _, h := range hosts {
		what += " --host " + h
	}
	return what
}

func newRunID(t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// limitedBuffer keeps at most max bytes and remembers if more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}
