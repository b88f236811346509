package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/prune"
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
	Parallel  int          // hosts pulled at once; 0: fanout.HostsAtOnce
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
	// ListInboxes makes this run's own receipt list every inbox, those
	// with nothing to say too (the manifest's receipts.list_quiet_inboxes
	// does so for every run).
	ListInboxes bool
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
	ru, err := newRun(opts)
	if err != nil {
		return nil, err
	}
	// One run at a time, and only in a workspace with an identity.
	ident, unlock, err := setup.Lock(ru.wsDir, opts.DryRun, lockWhat(opts.Hosts))
	if err != nil {
		return nil, err
	}
	defer unlock()
	ru.start(ctx, ident.ID)
	defer ru.startPing() // a run that ends early still lets it finish
	defer ru.close()
	if err := ru.open(ctx); err != nil {
		return nil, err
	}
	stored, pulled := ru.startPulls(ctx)
	ru.ingest(ctx, stored, pulled)
	ru.noteInterruption(ctx)
	ru.recordRejects(ctx)
	ru.continuity(ctx)
	ru.publish(ctx)
	ru.noteInterruption(ctx) // a stop during the publish counts too
	ru.judge()
	ru.notify(ctx)
	return ru.writeReceipt(ctx)
}

// run is one sync as it goes: Sync calls its methods in the pipeline's
// order, each one step, and each leaves here what the later ones need.
type run struct {
	opts   Options
	hosts  []manifest.HostConfig
	wsDir  string
	runLog *limitedBuffer // the receipt's log
	log    *slog.Logger

	b         *receipts.Builder
	r         *receipts.Receipt
	startPing func() error // waits for the start ping, once, and says how it went
	st        *state
	ing       *ingest.Ingester

	reports  []claim.HostReport
	sessions []*worker.Session // by host: kept for publishing its mirror
	entries  []ingest.Entry
	ingErr   error
	stopped  error // the cause, when the run was interrupted
	// repoFiles are each host's repos/ files (internal/continuity);
	// reposErr why they could not be built.
	repoFiles map[string][]mirror.File
	reposErr  error
	// withhold are, per host, the cards and documents a private handoff
	// of another host wrote (continuity.PrivateTargets); withholdErr why
	// they could not be told.
	withhold    map[string][]string
	withholdErr error
}

// newRun checks the options and fills in their defaults, selects the
// hosts and the workspace, and makes the run's log: latest.log's, and
// opts.Log's when set.
func newRun(opts Options) (*run, error) {
	m := opts.Manifest
	if m == nil {
		return nil, &UsageError{Msg: "no manifest"}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	hosts, wsDir, err := setup.Select(m, opts.Hosts, opts.Workspace)
	if err != nil {
		return nil, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = fanout.HostsAtOnce(len(hosts), fanout.Available())
	}
	runLog := &limitedBuffer{max: maxRunLog}
	handlers := []slog.Handler{slog.NewTextHandler(runLog, &slog.HandlerOptions{Level: slog.LevelInfo})}
	if opts.Log != nil {
		handlers = append(handlers, opts.Log.Handler())
	}
	return &run{opts: opts, hosts: hosts, wsDir: wsDir, runLog: runLog, log: slog.New(slog.NewMultiHandler(handlers...)),
		startPing: func() error { return nil }}, nil
}

// start begins the receipt and sends the heartbeat's start ping.
func (ru *run) start(ctx context.Context, workspaceID string) {
	m, opts := ru.opts.Manifest, ru.opts
	started := opts.Now().UTC()
	mode := receipts.ModeApply
	if opts.DryRun {
		mode = receipts.ModeDryRun
	}
	ru.b = receipts.NewBuilder(newRunID(started), mode, started, receipts.Manifest{Path: m.Path, SHA256: m.SHA256}, ru.wsDir, workspaceID)
	ru.r = ru.b.Receipt()
	ru.log.Info("run started", "run", ru.r.RunID, "mode", ru.r.Mode, "workspace", ru.wsDir, "hosts", len(ru.hosts))
	// The start ping goes out while the run works: it is an HTTPS request
	// (a TLS handshake, on a laptop's slow link several round trips) that
	// would otherwise come before every pull. The finish ping waits for
	// it, so the monitor sees the two in order, and a run that ends early
	// still lets it finish.
	if opts.Notifier != nil && !opts.DryRun {
		sent := make(chan error, 1)
		go func() { sent <- opts.Notifier.Start(ctx) }()
		var once sync.Once
		var startErr error
		ru.startPing = func() error {
			once.Do(func() { startErr = <-sent })
			return startErr
		}
	}
}

// open opens the ledger, the spool and the ingester, forgets the walk
// hints of hosts gone from the manifest, and records the run's start.
func (ru *run) open(ctx context.Context) error {
	st, err := openState(ru.wsDir, ru.opts.DryRun)
	if err != nil {
		return err
	}
	ru.st = st
	if !ru.opts.DryRun {
		claim.ForgetWalkHints(st.walksDir, hostNames(ru.opts.Manifest.Hosts), ru.log)
	}
	if err := st.led.StartRun(ctx, ru.r.RunID, ru.r.Mode); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	oc := ru.opts.Manifest.OpenClaw
	// A private handoff's append to a shared document waits in review;
	// when the rule cannot be read, the documents it would write are
	// still withheld from the other hosts at publish (PrivateTargets).
	hold := continuity.PrivateAppends(ctx, st.led, ru.opts.Manifest)
	ing, err := ingest.New(ingest.Options{Workspace: ru.wsDir, RunID: ru.r.RunID, DryRun: ru.opts.DryRun, Log: ru.log,
		OpenClaw:    ingest.OpenClawOptions{Layout: oc.Layout, Config: oc.Config, CardIndex: oc.CardIndexOn()},
		HoldPrivate: hold}, st.led, st.spool)
	if err != nil {
		return err
	}
	ru.ing = ing
	st.closers = append(st.closers, ing.Close) // closed first
	return nil
}

// close closes what open opened: the ingester, then the state.
func (ru *run) close() {
	if ru.st != nil {
		ru.st.close()
	}
}

// startPulls starts every host's pull, in workers, at most opts.Parallel
// at once, recording through the run's one writer. stored has a value
// when a host has stored something since the last look; pulled is
// closed once every pull is done and the writer stopped.
func (ru *run) startPulls(ctx context.Context) (stored <-chan struct{}, pulled <-chan struct{}) {
	storedc := make(chan struct{}, 1)
	pullOpts := ru.opts
	pullOpts.Progress = func(p HostProgress) {
		if p.Pulled > 0 {
			select {
			case storedc <- struct{}{}:
			default:
			}
		}
		if ru.opts.Progress != nil {
			ru.opts.Progress(p)
		}
	}
	done := make(chan struct{})
	ru.st.records = worker.StartRecordQueue(ru.st.led, ru.r.RunID, ru.log)
	go func() {
		defer close(done)
		ru.reports, ru.sessions = pullAll(ctx, ru.hosts, pullOpts, ru.st.puller(pullOpts, len(ru.hosts), ru.r.RunID, ru.log))
		ru.st.records.Stop()
	}()
	return storedc, done
}

// ingest applies what the hosts store while they pull: whatever a host
// has stored is applied while the others are still pulling, and one last
// pass after the pulls applies the rest. Only the ingester writes the
// workspace. The receipt gets every host and every handoff.
func (ru *run) ingest(ctx context.Context, stored, pulled <-chan struct{}) {
	ru.entries, ru.ingErr = ingestWhilePulling(ctx, ru.ing, stored, pulled)
	<-pulled
	for _, rep := range ru.reports {
		// The run's own account of what each pull recorded, not the
		// worker's report: a worker killed part way (the run interrupted,
		// its deadline passed) reports nothing it stored.
		h := hostEntry(rep)
		h.Stored, h.Archived = ru.st.records.RecordedFor(rep.Name)
		ru.b.AddHost(h, h.Stored)
	}
	if ru.ingErr == nil {
		// Sources stored after the last pass began (or by a host whose
		// last progress came with its end) are applied now.
		var more []ingest.Entry
		more, ru.ingErr = ru.ing.Run(ctx)
		ru.entries = append(ru.entries, more...)
	}
	if ru.ingErr == nil {
		ru.ing.UpdateCardIndex()
	}
	ru.b.SetOpenClaw(ru.ing.Reader())
	ru.b.AddHandoffs(appliedEntries(ru.entries, ru.reports, ru.r.RunID)...)
	ru.b.AddHandoffs(claimedEntries(ru.reports)...)
}

// noteInterruption: a run that is stopped (SIGINT, SIGTERM) still
// records what it did, and says that it was stopped.
func (ru *run) noteInterruption(ctx context.Context) {
	if ru.stopped == nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		ru.stopped = context.Cause(ctx)
		ru.log.Warn("run interrupted", "cause", ru.stopped)
	}
}

// recordRejects records the rejected files in the ledger, for where
// (not in a dry run), whether or not the run was interrupted.
func (ru *run) recordRejects(ctx context.Context) {
	if ru.opts.DryRun {
		return
	}
	books := context.WithoutCancel(ctx)
	for _, rep := range ru.reports {
		for _, it := range rep.Items {
			if it.Result != claim.ResultRejected {
				continue
			}
			if err := ru.st.led.RecordReject(books, ru.r.RunID, it, rep.Name); err != nil {
				ru.log.Warn("could not record a rejected file", "err", err)
			}
		}
	}
}

// continuity records the repositories the pulls found and the threads
// the run decided, and builds each host's repos/ files (internal/
// continuity). A failure never touches ingest.
func (ru *run) continuity(ctx context.Context) {
	ru.repoFiles, ru.reposErr = continuity.Run(context.WithoutCancel(ctx), ru.st.led, ru.st.spool, ru.opts.Manifest, ru.hosts, ru.reports,
		continuity.EntrySHAs(ru.entries), ru.ing.Thread, ru.r.RunID, ru.opts.Now(), ru.ingErr == nil, ru.log)
	if ru.st.led == nil {
		return
	}
	ru.withhold, ru.withholdErr = continuity.PrivateTargets(context.WithoutCancel(ctx), ru.st.led, ru.opts.Manifest)
	if ru.withholdErr != nil {
		ru.log.Warn("could not tell which cards and documents private handoffs wrote", "err", ru.withholdErr)
	}
}

// publish publishes the mirror of every host that kept its session,
// once the run's ingest is done; when ingest failed, the mirrors are left
// as they are. A partial host (an inbox it could not archive in) keeps
// its session and is published; hosts whose pull failed are skipped.
func (ru *run) publish(ctx context.Context) {
	opts := ru.opts
	job := mirror.Job{Workspace: ru.wsDir, WorkspaceID: ru.r.WorkspaceID, Canonical: mirror.CanonicalName(), RunID: ru.r.RunID, Now: opts.Now().UTC(), DryRun: opts.DryRun}
	adopt := func(host string) bool { return slices.Contains(opts.AdoptMirrors, host) }
	results := make([]*mirror.Result, len(ru.hosts))
	interrupted := make([]bool, len(ru.hosts))
	setup.ForEachHost(ru.hosts, opts.Parallel, func(i int, h manifest.HostConfig) {
		sess := ru.sessions[i]
		switch {
		case h.Mirror == nil:
			return
		case sess == nil:
			results[i] = &mirror.Result{Outcome: mirror.OutcomeSkipped, Error: "the pull failed: " + ru.reports[i].Error}
		case ru.ingErr != nil && ru.stopped != nil && errors.Is(ru.ingErr, context.Canceled):
			// The interruption stopped the ingest; nothing failed.
			sess.Close()
			results[i] = &mirror.Result{Outcome: mirror.OutcomeSkipped, Error: "the run was interrupted before its ingest was done; the mirror keeps what it had, and the next sync publishes it"}
		case ru.ingErr != nil:
			sess.Close()
			results[i] = &mirror.Result{Outcome: mirror.OutcomeSkipped, Error: "ingest failed; the mirror keeps what it had"}
		case ru.reposErr != nil && h.Mirror.Includes(manifest.MirrorRepos):
			sess.Close()
			results[i] = &mirror.Result{Outcome: mirror.OutcomeError, Sent: []string{}, Removed: []string{}, Error: ru.reposErr.Error()}
		case ru.withholdErr != nil && (h.Mirror.Includes(manifest.MirrorCards) || h.Mirror.Includes(manifest.MirrorDocuments)):
			// Which cards are private is unknown: publish none.
			sess.Close()
			results[i] = &mirror.Result{Outcome: mirror.OutcomeError, Sent: []string{}, Removed: []string{},
				Error: "could not tell which cards and documents private handoffs wrote; the mirror keeps what it had: " + ru.withholdErr.Error()}
		default:
			j := job
			j.StateFile = mirror.StateFile(filepath.Join(ru.wsDir, layout.MirrorsDir), h.Name)
			j.Adopt = adopt(h.Name)
			j.Files = ru.repoFiles[h.Name]
			j.Withhold = ru.withhold[h.Name]
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
		ru.b.SetMirror(ru.hosts[i].Name, receipts.Mirror{Outcome: res.Outcome, Dir: res.Dir, Sent: nonNil(res.Sent), Removed: nonNil(res.Removed),
			Bytes: res.Bytes, Generation: res.Generation, Error: res.Error, Interrupted: interrupted[i]})
	}
}

// judge gives the run its outcome.
func (ru *run) judge() {
	ru.b.Judge(ru.ingErr)
	if ru.stopped != nil {
		ru.b.Interrupted(ru.stopped)
	}
	if ru.ingErr != nil {
		ru.log.Error("ingest failed", "err", ru.ingErr)
	}
}

// notify sends the heartbeat's finish ping, after the start ping; the
// receipt records a ping that failed, so this comes before it is written.
func (ru *run) notify(ctx context.Context) {
	if ru.opts.Notifier == nil || ru.opts.DryRun {
		return
	}
	failed := func(err error) {
		if ru.b.NotifyFailed(err) {
			ru.log.Warn("heartbeat ping failed", "err", err)
		}
	}
	failed(ru.startPing())
	failed(ru.opts.Notifier.Finish(ctx, ru.r.Outcome == receipts.OutcomeOK, ru.r.Summary()))
}

// writeReceipt ends the receipt and, unless a dry run, writes it with
// the run's log and records the run's end in the ledger.
func (ru *run) writeReceipt(ctx context.Context) (*receipts.Receipt, error) {
	r := ru.r
	ru.b.Finish(ru.opts.Now())
	ru.log.Info("run finished", "run", r.RunID, "outcome", r.Outcome, "status", r.Status)
	if ru.opts.DryRun {
		return r, nil
	}
	logBytes := ru.runLog.buf.Bytes()
	if ru.runLog.over {
		logBytes = append(logBytes, fmt.Sprintf("… log truncated at %d bytes\n", maxRunLog)...)
	}
	dir := filepath.Join(ru.wsDir, layout.ReceiptsDir)
	rc := ru.opts.Manifest.Receipts
	path, err := receipts.Write(dir, r, logBytes, ru.opts.ListInboxes || rc.ListQuietInboxes)
	if err != nil {
		return r, err
	}
	if err := ru.st.led.FinishRun(context.WithoutCancel(ctx), r.RunID, r.Outcome, r.Status, path); err != nil {
		return r, fmt.Errorf("ledger: %w", err)
	}
	// Retention: the timer keeps the receipts directory bounded with no
	// person running prune. It never fails the run, whose receipt is
	// written: what it could not remove, the next run tries again.
	keep, keepIdle := rc.Retention()
	gone, err := prune.Retain(context.WithoutCancel(ctx), ru.st.led, dir, prune.Policy{Keep: keep, KeepIdle: keepIdle}, ru.opts.Now())
	if err != nil {
		ru.log.Warn("old receipts not removed", "err", err)
	} else if gone.Files > 0 {
		ru.log.Info("old receipts removed", "files", gone.Files, "bytes", gone.Bytes)
	}
	// Backups of plans done more than backups.keep ago go the same way,
	// once a day (docs/receipts.md#retention).
	old, looked, err := prune.RetainBackups(context.WithoutCancel(ctx), ru.st.led, ru.wsDir, ru.opts.Manifest.Backups.Retention(), ru.opts.Now())
	if err != nil {
		ru.log.Warn("old backups not removed", "err", err)
	} else if looked {
		ru.log.Info("old backups removed", "files", old.Files, "bytes", old.Bytes, "kept_open", old.Open, "kept_newest", old.Newest)
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

func hostEntry(rep claim.HostReport) receipts.Host {
	h := receipts.Host{Name: rep.Name, Transport: rep.Transport, Outcome: rep.Outcome, Error: rep.Error, Inboxes: []receipts.Inbox{}, ItemsDropped: rep.ItemsDropped, Quirks: rep.Quirks}
	for _, in := range rep.Inboxes {
		h.Inboxes = append(h.Inboxes, receipts.Inbox{Path: in.Path, State: in.State, Pending: in.Pending, Tracked: in.Tracked, Error: in.Error, Ignored: in.Ignored, IgnoredCount: in.IgnoredCount,
			Repo: continuity.ReceiptRepo(in.Repo)})
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
