package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/transport"
)

// Archive directories inside an inbox.
const (
	ProcessedDir = "processed"
	MalformedDir = "malformed"
)

// Pipeline bounds for one host's pull. Files are read, stored and archived
// concurrently; these bound what is held at once.
const (
	// maxInflightFiles bounds the files being read, waiting to be stored
	// or being archived at once.
	maxInflightFiles = 1024
	// maxOpenReads bounds the files open for reading at once by
	// discovery, and by the claims; maxPipelineReads those open at once
	// during the pipeline, the claims' and those of the reads beside them
	// (an archived file read back, repositories' identities). A host's
	// SFTP server, commonly limited to 1,024 descriptors, never runs out:
	// 448 at most, and up to the transport's 512 whose CLOSE is still on
	// its way. The reads beside the claims queue for the same slots as
	// the next claims, in turn, and the claims never hold the last 64:
	// an archive's read-back no longer waits for every claim to start
	// (as it did with one bound for all), which held its batch's files
	// and their slots until then.
	maxOpenReads     = 384
	maxPipelineReads = 448
	// maxInflightBytes bounds their listed sizes together; a file is read
	// with its listed size as the limit, so this bounds their data too.
	maxInflightBytes = 32 << 20
	// A batch is stored with one ledger commit, its bytes and its records
	// together.
	batchFiles = 256
	batchBytes = 16 << 20
	// maxRecording bounds the batches sent to a QueueRecorder and not
	// yet committed: the next ones wait in the recorder's queue while
	// one commits, instead of in this pull.
	maxRecording = 4
)

// Pull runs discovery, claim, store and acknowledgement for one host and
// reports what happened. It never returns an error: a transport failure ends
// the host's pull and is recorded in the report as outcome "error"; files
// stored but not archived put their inbox in state "error" and make the
// outcome "partial".
//
// Ordering guarantee: a file is renamed on its host only after rec has
// made its exact bytes and its source durable (StoreSources). A crash
// at any point leaves every handoff either still in its inbox or stored (and
// then acknowledged by the next run); none is lost.
func Pull(ctx context.Context, fsys transport.FS, cfg Config, rec Recorder, runID string, parses func([]byte) bool) HostReport {
	reads, opened := semaphore.NewWeighted(maxOpenReads), semaphore.NewWeighted(maxPipelineReads)
	p := &puller{raw: fsys, reads: reads, fsys: &openLimit{FS: fsys, sem: reads}, opened: opened, checks: &openLimit{FS: fsys, sem: opened},
		cfg: cfg, rec: rec, runID: runID, parses: parses, log: cfg.Log}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.cfg.Now == nil {
		p.cfg.Now = time.Now
	}
	p.report = HostReport{Name: cfg.Host, Transport: cfg.Transport, Outcome: OutcomeOK}
	if err := p.run(ctx); err != nil {
		p.report.Outcome = OutcomeError
		p.report.Error = err.Error()
		p.log.Warn("pull failed", "host", cfg.Host, "err", err)
	}
	return p.report
}

type puller struct {
	fsys   transport.FS        // the transport, each read taking a slot of reads
	raw    transport.FS        // the transport itself, for reads whose slot the caller took
	reads  *semaphore.Weighted // files open for reading at once
	opened *semaphore.Weighted // files open for reading at once during the pipeline
	checks transport.FS        // the transport, each read taking a slot of opened
	cfg    Config
	rec    Recorder
	runID  string
	parses func([]byte) bool
	log    *slog.Logger

	mu          sync.Mutex // guards what follows; the pipeline's goroutines share it
	report      HostReport
	deferred    map[string]map[string]int // inbox -> reason -> deferrals
	archiveErrs map[string]*archiveErrs
	roots       map[string]*transport.Root    // each inbox's: every move in it goes through it
	dirs        map[string]bool               // archive directories known to exist, proved
	listedDirs  map[string]transport.FileInfo // archive directories the inbox's listing showed, not yet proved
	absent      map[string]bool               // archive directories the inbox's listing did not hold
	notDirs     map[string]bool               // archive names the inbox's listing showed as something else
	making      singleflight.Group            // one ensureDir per directory at a time
	scanned     int                           // inboxes discovered and listed, set before the pipeline starts
}

// openLimit bounds the ReadFile calls in flight on an FS.
type openLimit struct {
	transport.FS
	sem *semaphore.Weighted
}

func (o *openLimit) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	if err := o.sem.Acquire(ctx, 1); err != nil {
		return nil, transport.FileInfo{}, err
	}
	defer o.sem.Release(1)
	return o.FS.ReadFile(ctx, name, limit)
}

// LstatNoFollow is the underlying transport's (transport.LinkSafe).
func (o *openLimit) LstatNoFollow() bool { return transport.IsLinkSafe(o.FS) }

// LstatAll is the underlying transport's, if it has one
// (transport.Batcher), else one Lstat each.
func (o *openLimit) LstatAll(ctx context.Context, names []string) ([]transport.FileInfo, []error) {
	return lstatEach(ctx, o.FS, names)
}

// RealPath is the underlying transport's, if it has one.
func (o *openLimit) RealPath(ctx context.Context, name string) (string, error) {
	if r, ok := o.FS.(transport.Resolver); ok {
		return r.RealPath(ctx, name)
	}
	return "", errors.ErrUnsupported
}

// ReadContent is the underlying transport's, if it has one, else ReadFile;
// either counts against the same bound.
func (o *openLimit) ReadContent(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := o.sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer o.sem.Release(1)
	return transport.ReadContent(ctx, o.FS, name, limit)
}

// ReadTail is the underlying transport's (transport.ReadTail), counted
// against the same bound.
func (o *openLimit) ReadTail(ctx context.Context, name string, listed transport.FileInfo, n int64) ([]byte, error) {
	if err := o.sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer o.sem.Release(1)
	return transport.ReadTail(ctx, o.FS, name, listed, n)
}

type claimed struct {
	src    Source
	data   []byte
	weight int64 // bytes of the in-flight budget this file holds
}

func (p *puller) run(ctx context.Context) error {
	began := time.Now()
	inboxes, err := Discover(ctx, p.fsys, p.cfg)
	if err != nil {
		return err
	}
	p.log.Debug("discovered", "host", p.cfg.Host, "inboxes", len(inboxes), "took", time.Since(began))
	p.deferred = map[string]map[string]int{}
	p.dirs, p.absent, p.notDirs = map[string]bool{}, map[string]bool{}, map[string]bool{}
	p.roots, p.listedDirs = map[string]*transport.Root{}, map[string]transport.FileInfo{}
	p.archiveErrs = map[string]*archiveErrs{}
	var work []*Inbox
	for _, in := range inboxes {
		// Discovery proved the inbox a real directory; its moves are
		// confined to it.
		p.roots[in.Path] = transport.NewRoot(p.fsys, in.Path, "")
		if in.FollowsSymlinks {
			p.quirk(QuirkFollowsSymlinks)
		}
		// What the inbox's listing said of its archive directories
		// spares asking again (one round trip per inbox).
		if in.ArchiveDirs != nil {
			for _, name := range []string{ProcessedDir, MalformedDir} {
				fi, ok := in.ArchiveDirs[name]
				switch d := path.Join(in.Path, name); {
				case !ok:
					p.absent[d] = true
				case fi.IsDir():
					p.listedDirs[d] = fi
				default:
					p.notDirs[d] = true
				}
			}
		}
		ir := InboxReport{Path: in.Path, State: in.State, Tracked: in.Tracked, Ignored: in.Ignored, IgnoredCount: in.IgnoredN, Pending: len(in.Candidates)}
		if in.Err != nil {
			ir.Error = in.Err.Error()
		}
		p.report.Inboxes = append(p.report.Inboxes, ir)
		for _, q := range in.Ignored {
			p.log.Warn("ignored a name that is not a plain *.md name", "host", p.cfg.Host, "inbox", in.Path, "name", q)
		}
		if in.State != StateOK {
			p.log.Info("inbox skipped", "host", p.cfg.Host, "inbox", in.Path, "state", in.State)
			continue
		}
		work = append(work, in)
	}
	p.scanned = len(inboxes)
	p.progress()
	if !p.cfg.DryRun {
		if err := p.confirmArchived(ctx, work); err != nil {
			return err
		}
	}
	repos := p.startRepoReads(ctx, work)
	err = p.pipeline(ctx, work)
	repos.finish(p, work)
	for _, in := range work {
		if d := p.deferred[in.Path]; d[ReasonTooYoung]+d[ReasonChanging] > 0 {
			p.log.Info("deferred to a later run", "host", p.cfg.Host, "inbox", in.Path, "too_young", d[ReasonTooYoung], "changing", d[ReasonChanging])
		}
	}
	p.progress()
	p.sortItems()
	if err != nil {
		return err
	}
	p.unarchived()
	return nil
}

// archiveErrs are one inbox's failed archives (puller.archiveErrs holds
// them by inbox): how many, the first error, and whether one failed for
// want of permission.
type archiveErrs struct {
	n      int
	first  error
	denied bool
}

// unarchived puts each inbox some stored files could not be archived in
// into state error, saying why (with the hint when permission was
// missing), and makes the pull partial: the host answered, everything
// stored is applied, and the next run archives what is left. The host's
// error sums them up, with the first inbox's error.
func (p *puller) unarchived() {
	if len(p.archiveErrs) == 0 {
		return
	}
	n, first := 0, ""
	for _, e := range p.archiveErrs {
		n += e.n
		first = e.first.Error() // unless an inbox below has one
	}
	named := false
	for i := range p.report.Inboxes {
		in := &p.report.Inboxes[i]
		e := p.archiveErrs[in.Path]
		if e == nil {
			continue
		}
		why := e.first.Error()
		if e.denied {
			why += "\nhint: " + ArchiveDeniedHint(in.Path)
		}
		in.State, in.Error = StateError, notArchived(e.n, why)
		if !named {
			first, named = why, true
		}
	}
	p.report.Outcome = OutcomePartial
	p.report.Error = notArchived(n, first)
}

func notArchived(n int, why string) string {
	return fmt.Sprintf("%d file(s) stored but not archived (the next run retries): %s", n, why)
}

// ArchiveDeniedHint is the advice for an inbox the account can read but
// not archive in (create processed/ or malformed/, rename into them).
func ArchiveDeniedHint(inbox string) string {
	return fmt.Sprintf("the account can read %s but may not create or rename entries in it, and each handoff is archived by a rename into %s/ there: "+
		"give the account write access to the inbox and to its %s/ and %s/ directories (check their owner and mode); "+
		"what was read is stored and applied, and the next run after the fix archives it", Quote(inbox), ProcessedDir, ProcessedDir, MalformedDir)
}

// sortItems puts the report's items in discovery order (inbox, then name),
// whatever order the concurrent claims finished in.
func (p *puller) sortItems() {
	order := make(map[string]int, len(p.report.Inboxes))
	for i, in := range p.report.Inboxes {
		order[in.Path] = i
	}
	slices.SortStableFunc(p.report.Items, func(a, b Item) int {
		if c := cmp.Compare(order[a.Inbox], order[b.Inbox]); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// progress tells cfg.Progress how far the pull is.
func (p *puller) progress() {
	if p.cfg.Progress == nil {
		return
	}
	p.mu.Lock()
	stored := p.report.Stored
	p.mu.Unlock()
	p.cfg.Progress(p.scanned, stored)
}

// pipeline claims, stores and archives the candidates of the inboxes with
// many requests in flight, in four stages, each a method of pipeline:
//
//   - read: claim each candidate (check, read, hash), concurrently, as the
//     bounds on files and bytes in flight allow;
//   - store: take the claims in discovery order (so that what is recorded,
//     and later applied, does not depend on timing) and gather whatever
//     has arrived into one batch;
//   - record: send each batch, its bytes and its sources, to the recorder,
//     in order, up to maxRecording at once when it is a QueueRecorder
//     (one at a time otherwise), and start its archive once it is
//     committed;
//   - archive: rename a recorded batch's files on the host, concurrently,
//     and record which were archived.
//
// A file is renamed only in archive, so only after the batch holding it is
// durable and recorded. The first transport or storage failure cancels
// everything in flight; what was stored and not yet archived is finished
// by the next run.
func (p *puller) pipeline(ctx context.Context, inboxes []*Inbox) error {
	total := 0
	for _, in := range inboxes {
		total += len(in.Candidates)
	}
	if total == 0 {
		return nil
	}
	ctx, first := withFirstError(ctx)
	defer first.cancel(nil)
	pl := &pipeline{
		p: p, ctx: ctx, fail: first.fail,
		files:    semaphore.NewWeighted(maxInflightFiles),
		budget:   semaphore.NewWeighted(maxInflightBytes),
		claims:   make(chan claimResult, maxInflightFiles),
		toRecord: make(chan []claimed, 1),
	}
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		pl.read(inboxes)
	}()
	var recorder sync.WaitGroup
	recorder.Go(pl.record)
	pl.store(total)
	close(pl.toRecord)
	recorder.Wait()
	<-fed
	pl.work.Wait()
	if err := first.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// pipeline is one pull's claim, store, record and archive stages.
//
// Each candidate holds a slot (one of files, and its size in budget) from
// read until it is done with. One stage owns a slot at a time, and the
// stage that drops the file gives the slot back (release): read, for a
// file it does not store (rejected, deferred, vanished) or cannot hand on;
// store and record, for a batch they cannot pass on; archive, for each
// file once its rename is done or failed.
type pipeline struct {
	p    *puller
	ctx  context.Context
	fail func(error) // records the first failure and cancels ctx

	files  *semaphore.Weighted // files in flight
	budget *semaphore.Weighted // their listed sizes

	claims   chan claimResult // read → store
	toRecord chan []claimed   // store → record
	work     sync.WaitGroup   // reads and archive batches in flight
}

// claimResult is the claim of the seq-th candidate: nil when it is not to
// be stored.
type claimResult struct {
	seq int
	c   *claimed
}

// release gives back the slot of a file of weight.
func (pl *pipeline) release(weight int64) {
	pl.budget.Release(weight)
	pl.files.Release(1)
}

// releaseAll gives back a batch's slots.
func (pl *pipeline) releaseAll(b []claimed) {
	for _, c := range b {
		pl.release(c.weight)
	}
}

// read starts a claim for each candidate in order, as the bounds allow. The
// read slots are taken here, in discovery order, so that the files the
// store stage waits for are read first.
func (pl *pipeline) read(inboxes []*Inbox) {
	ctx, p := pl.ctx, pl.p
	seq := 0
	for _, in := range inboxes {
		for _, fi := range in.Candidates {
			weight := min(max(fi.Size, 0), p.cfg.MaxFileSize, maxInflightBytes-1) + 1
			if pl.files.Acquire(ctx, 1) != nil {
				return
			}
			if pl.budget.Acquire(ctx, weight) != nil {
				pl.files.Release(1)
				return
			}
			if p.reads.Acquire(ctx, 1) != nil {
				pl.release(weight)
				return
			}
			if p.opened.Acquire(ctx, 1) != nil {
				p.reads.Release(1)
				pl.release(weight)
				return
			}
			pl.work.Add(1)
			go pl.readOne(seq, in.Path, fi, weight)
			seq++
		}
	}
}

// readOne claims one candidate, holding a read slot, and hands the claim
// to store.
func (pl *pipeline) readOne(seq int, inbox string, fi transport.FileInfo, weight int64) {
	defer pl.work.Done()
	c, err := pl.p.claim(pl.ctx, inbox, fi)
	pl.p.opened.Release(1)
	pl.p.reads.Release(1)
	if err != nil {
		pl.fail(err)
	}
	if c == nil {
		pl.release(weight)
	} else {
		c.weight = weight
	}
	select {
	case pl.claims <- claimResult{seq, c}:
	case <-pl.ctx.Done():
		if c != nil {
			pl.release(weight)
		}
	}
}

// store takes the total claims in discovery order and gathers whatever
// has arrived into batches, batchFiles or batchBytes at a time, handing
// each to record.
func (pl *pipeline) store(total int) {
	pending := map[int]*claimed{}
	next := 0
	var batch []claimed
	var size int64
	flush := func() bool {
		b := batch
		batch, size = nil, 0
		return pl.flush(b)
	}
	for next < total {
		select {
		case r := <-pl.claims:
			pending[r.seq] = r.c
		case <-pl.ctx.Done():
			pl.releaseAll(batch)
			return
		}
	drain:
		for {
			select {
			case r := <-pl.claims:
				pending[r.seq] = r.c
			default:
				break drain
			}
		}
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if c == nil {
				continue
			}
			batch = append(batch, *c)
			size += int64(len(c.data))
			if (len(batch) >= batchFiles || size >= batchBytes) && !flush() {
				return
			}
		}
		if !flush() {
			return
		}
	}
}

// flush hands a batch to record; false when the pipeline is ending.
func (pl *pipeline) flush(b []claimed) bool {
	if len(b) == 0 {
		return true
	}
	select {
	case pl.toRecord <- b:
		return true
	case <-pl.ctx.Done():
		pl.releaseAll(b)
		return false
	}
}

// record sends each batch to the recorder in order, several in flight,
// and archives each once its commit is confirmed. A batch sent after one
// that failed fails too (QueueRecorder), so nothing of it is archived.
func (pl *pipeline) record() {
	p := pl.p
	inflight := make(chan struct{}, maxRecording)
	for b := range pl.toRecord {
		if pl.ctx.Err() != nil {
			pl.releaseAll(b)
			continue
		}
		inflight <- struct{}{}
		wait, err := p.send(pl.ctx, b)
		if err != nil {
			<-inflight
			pl.releaseAll(b)
			pl.fail(err)
			continue
		}
		pl.work.Go(func() {
			err := wait()
			<-inflight
			if err != nil {
				pl.releaseAll(b)
				pl.fail(err)
				return
			}
			p.progress()
			if p.cfg.DryRun {
				pl.releaseAll(b)
				return
			}
			pl.archive(b)
		})
	}
}

// claim checks one listed entry and reads it. It returns nil when the entry
// is not to be stored now (rejected, deferred or vanished); an error only
// when the transport failed.
func (p *puller) claim(ctx context.Context, inbox string, fi transport.FileInfo) (*claimed, error) {
	name := path.Join(inbox, fi.Name)
	switch {
	case fi.IsSymlink():
		return nil, p.reject(ctx, inbox, fi, ReasonSymlink)
	case !fi.IsRegular():
		return nil, p.reject(ctx, inbox, fi, ReasonNotRegular)
	case fi.Size > p.cfg.MaxFileSize || fi.Size < 0:
		return nil, p.reject(ctx, inbox, fi, ReasonOversize)
	}
	if age := p.cfg.Now().Sub(fi.ModTime); age < p.cfg.Settle {
		p.deferItem(inbox, fi, ReasonTooYoung)
		return nil, nil
	}
	// The caller holds a read slot, and the listing answered the lstat.
	// The listed size is the limit: a file that grew since it was listed is
	// changing, and the in-flight budget holds.
	data, after, err := transport.ReadListed(ctx, p.raw, name, fi, fi.Size)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		p.log.Info("handoff vanished before it could be read", "host", p.cfg.Host, "name", Quote(name))
		return nil, nil
	case errors.Is(err, transport.ErrNotRegular):
		return nil, p.reject(ctx, inbox, fi, ReasonNotRegular)
	case errors.Is(err, transport.ErrTooLarge), errors.Is(err, transport.ErrChanged):
		p.deferItem(inbox, fi, ReasonChanging) // it changed since it was listed
		return nil, nil
	case err != nil && (ctx.Err() != nil || errors.Is(err, transport.ErrBroken)):
		return nil, fmt.Errorf("read %s: %w", Quote(name), err)
	case err != nil:
		// The host answered, and refused this one file: the others go on.
		p.log.Warn("handoff could not be read; the next run tries again", "host", p.cfg.Host, "name", Quote(name), "err", err)
		p.deferErr(inbox, fi, ReasonReadFailed, err)
		return nil, nil
	}
	if after.Size != fi.Size || !after.ModTime.Equal(fi.ModTime) || int64(len(data)) != after.Size {
		p.deferItem(inbox, fi, ReasonChanging)
		return nil, nil
	}
	if p.cfg.Unfilled != nil && p.cfg.Now().Sub(fi.ModTime) < TemplateSettle(p.cfg.Settle) && p.cfg.Unfilled(data) {
		// A skeleton saved into the inbox and being filled in: it stays
		// with its writer.
		p.deferErr(inbox, fi, ReasonUnfilledTemplate, fmt.Errorf("it still holds <FILL: …> placeholders; left for its writer until it changed %s ago (hint: write a handoff outside the inbox, or as a .dotfile in it, and move it in when it is done)", TemplateSettle(p.cfg.Settle)))
		return nil, nil
	}
	sha := spool.Hash(data)
	src := Source{Host: p.cfg.Host, Inbox: inbox, Name: fi.Name, SHA256: sha, Size: int64(len(data)), Parses: p.parses(data)}
	dir := ProcessedDir
	if !src.Parses {
		dir = MalformedDir
	}
	src.ArchivedAs = path.Join(dir, ArchiveName(fi.Name, sha))
	return &claimed{src: src, data: data}, nil
}

// confirmArchived settles sources whose archive an earlier run did not see
// confirmed: if the source is gone from the inbox and its archive name holds
// the stored bytes, the rename happened and is recorded now. A source still
// in the inbox is claimed again as usual and acknowledged then. The archives
// are read back concurrently.
func (p *puller) confirmArchived(ctx context.Context, inboxes []*Inbox) error {
	all, err := p.rec.Unarchived(ctx, p.cfg.Host)
	if err != nil {
		return err
	}
	byInbox := map[string][]Source{}
	for _, s := range all {
		byInbox[s.Inbox] = append(byInbox[s.Inbox], s)
	}
	var check []Source
	for _, in := range inboxes {
		srcs := byInbox[in.Path]
		if len(srcs) == 0 {
			continue
		}
		present := map[string]bool{}
		for _, c := range in.Candidates {
			present[c.Name] = true
		}
		for _, s := range srcs {
			if !present[s.Name] && s.ArchivedAs != "" {
				check = append(check, s)
			}
		}
	}
	same := make([]bool, len(check))
	err = inParallel(ctx, len(check), walkParallel, func(ctx context.Context, i int) error {
		s := check[i]
		ok, err := sameContent(ctx, p.fsys, path.Join(s.Inbox, s.ArchivedAs), s.SHA256, s.Size)
		if err != nil && !errors.Is(err, transport.ErrNotExist) && (ctx.Err() != nil || errors.Is(err, transport.ErrBroken)) {
			return err
		}
		same[i] = ok && err == nil
		return nil
	})
	if err != nil {
		return err
	}
	var done []Source
	for i, s := range check {
		if same[i] {
			done = append(done, s)
		}
	}
	if len(done) > 0 {
		p.log.Info("confirmed archives an earlier run could not", "host", p.cfg.Host, "count", len(done))
		return p.rec.MarkArchived(ctx, done)
	}
	return nil
}

// ArchiveName is the name a stored handoff gets in processed/ or malformed/
// (and its review draft): <stem>.<sha12>.md, the stem shortened on a UTF-8
// boundary when the whole would not fit in MaxNameBytes.
func ArchiveName(name, sha string) string {
	return fitName(strings.TrimSuffix(name, ".md"), "."+sha[:12]+".md")
}

// fitName joins stem and suffix, cutting the stem so that the result is at
// most MaxNameBytes long.
func fitName(stem, suffix string) string {
	if room := MaxNameBytes - len(suffix); len(stem) > room {
		stem = strings.ToValidUTF8(stem[:room], "")
		for !utf8.ValidString(stem) || len(stem) > room {
			stem = stem[:len(stem)-1]
		}
	}
	return stem + suffix
}

// send hands a batch's exact bytes and its sources to the recorder, to be
// made durable in one commit (Recorder.StoreSources), and returns once the
// batch holds its place in the recorder's order, or with the error that
// kept it from one. wait returns when that commit is done: from then on
// the batch's sources may be archived.
func (p *puller) send(ctx context.Context, batch []claimed) (wait func() error, err error) {
	srcs := make([]Source, len(batch))
	contents := make(map[string][]byte, len(batch))
	for i, c := range batch {
		srcs[i] = c.src
		contents[c.src.SHA256] = c.data
	}
	began := time.Now()
	var stored func() (int, error)
	if q, ok := p.rec.(QueueRecorder); ok {
		if stored, err = q.QueueSources(ctx, p.runID, srcs, contents); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	} else {
		n, err := p.rec.StoreSources(ctx, p.runID, srcs, contents)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		stored = func() (int, error) { return n, nil }
	}
	return func() error {
		n, err := stored()
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		p.log.Debug("stored a batch", "host", p.cfg.Host, "files", len(batch), "took", time.Since(began))
		p.mu.Lock()
		p.report.Stored += n
		p.mu.Unlock()
		if !p.cfg.DryRun {
			failpoint.Inject("store.recorded")
		}
		return nil
	}, nil
}

// archive renames a recorded batch's files on the host, in flight
// together, gives back each file's slot, and records which were archived.
// A file that cannot be archived stays in its inbox and is retried by the
// next run; a broken connection fails the pull.
func (pl *pipeline) archive(batch []claimed) {
	p, ctx := pl.p, pl.ctx
	began := time.Now()
	defer func() {
		p.log.Debug("archived a batch", "host", p.cfg.Host, "files", len(batch), "took", time.Since(began))
	}()
	ok := make([]bool, len(batch))
	var wg sync.WaitGroup
	for i := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &batch[i]
			defer pl.release(c.weight)
			err := p.archive(ctx, c)
			if err == nil {
				ok[i] = true
				failpoint.Inject("ack.renamed")
				return
			}
			if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
				pl.fail(fmt.Errorf("%w (stored but not yet archived; the next run finishes them)", err))
				return
			}
			p.log.Warn("archive failed", "host", p.cfg.Host, "name", Quote(path.Join(c.src.Inbox, c.src.Name)), "err", err)
			p.mu.Lock()
			e := p.archiveErrs[c.src.Inbox]
			if e == nil {
				e = &archiveErrs{first: err}
				p.archiveErrs[c.src.Inbox] = e
			}
			e.n++
			e.denied = e.denied || errors.Is(err, fs.ErrPermission)
			if len(p.report.Unarchived) < MaxItems {
				p.report.Unarchived = append(p.report.Unarchived, Item{Inbox: c.src.Inbox, Name: c.src.Name, SHA256: c.src.SHA256, Error: clip(err.Error(), maxErrText)})
			}
			p.mu.Unlock()
		}()
	}
	wg.Wait()
	var done []Source
	for i, c := range batch {
		if ok[i] {
			done = append(done, c.src)
		}
	}
	if len(done) == 0 {
		return
	}
	// Record what was renamed even when the pull is failing: the next run
	// then has less to confirm.
	if err := p.rec.MarkArchived(context.WithoutCancel(ctx), done); err != nil {
		pl.fail(fmt.Errorf("record archive: %w", err))
	}
}

// archive renames a stored source to its archive name. A destination that
// already holds the same bytes means an earlier run got this far: the source
// copy is then removed. Every move goes through the inbox's root.
func (p *puller) archive(ctx context.Context, c *claimed) error {
	inbox := c.src.Inbox
	if err := p.ensureDir(ctx, inbox, path.Dir(c.src.ArchivedAs)); err != nil {
		return err
	}
	root := p.root(inbox)
	src := path.Join(inbox, c.src.Name)
	dst := path.Join(inbox, c.src.ArchivedAs)
	regular := transport.FileInfo{Name: c.src.Name, Size: int64(len(c.data))}
	err := root.Rename(ctx, c.src.Name, regular, c.src.ArchivedAs)
	switch {
	case err == nil:
		// The name was claimed, not the bytes: a writer may have replaced
		// the file since it was read. Check what was archived; if it is
		// not what was stored, put it back for the next run to claim.
		same, err := sameContent(ctx, p.checks, dst, c.src.SHA256, int64(len(c.data)))
		if err != nil {
			return fmt.Errorf("archive %s: verify: %w", Quote(src), err)
		}
		if !same {
			if err := root.Rename(ctx, c.src.ArchivedAs, regular, c.src.Name); err != nil {
				return fmt.Errorf("archive %s: it changed after it was read, and putting it back failed: %w", Quote(src), err)
			}
			return fmt.Errorf("archive %s: it changed after it was read; left in place for the next run", Quote(src))
		}
		return nil
	case errors.Is(err, transport.ErrExist):
		same, err := sameContent(ctx, p.checks, dst, c.src.SHA256, int64(len(c.data)))
		if err != nil {
			return fmt.Errorf("archive %s: %w", Quote(src), err)
		}
		if !same {
			return fmt.Errorf("archive %s: %s already holds different content; move it aside", Quote(src), Quote(dst))
		}
		// Remove the inbox copy only if it still holds the stored bytes.
		if same, err := sameContent(ctx, p.checks, src, c.src.SHA256, int64(len(c.data))); err != nil || !same {
			if errors.Is(err, transport.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("archive %s: it changed after it was read; left in place for the next run", Quote(src))
		}
		if err := root.Remove(ctx, c.src.Name, regular); err != nil && !errors.Is(err, transport.ErrNotExist) {
			return fmt.Errorf("archive %s: remove copy already archived: %w", Quote(src), err)
		}
		return nil
	case errors.Is(err, transport.ErrNotExist):
		p.log.Info("handoff vanished before it could be archived", "host", p.cfg.Host, "name", Quote(src))
		return nil
	case errors.Is(err, transport.ErrNotProven):
		p.quirk(QuirkFollowsSymlinks)
		return fmt.Errorf("archive %s: left in place: %w", Quote(src), err)
	default:
		return fmt.Errorf("archive %s: %w", Quote(src), err)
	}
}

// root returns an inbox's confined root.
func (p *puller) root(inbox string) *transport.Root {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.roots[inbox]
	if r == nil {
		r = transport.NewRoot(p.fsys, inbox, "")
		p.roots[inbox] = r
	}
	return r
}

// ensureDir makes sure an inbox's archive directory sub exists and is
// proved inside the inbox's root, once per pull: after the first success
// it is taken as there (a rename into a directory that has since gone
// fails and is retried by the next run).
func (p *puller) ensureDir(ctx context.Context, inbox, sub string) error {
	dir := path.Join(inbox, sub)
	p.mu.Lock()
	known, absent, notDir := p.dirs[dir], p.absent[dir], p.notDirs[dir]
	listed, isListed := p.listedDirs[dir]
	p.mu.Unlock()
	if known {
		return nil
	}
	if notDir {
		// The listing says what it is; an LSTAT that follows symlinks
		// could call a symlink a directory. Nothing is written through it.
		if fi, err := p.fsys.Lstat(ctx, dir); err == nil && fi.IsDir() {
			p.quirk(QuirkFollowsSymlinks)
		}
		return fmt.Errorf("%s is not a directory (a symlink or file is in the way; remove it)", Quote(dir))
	}
	// The files of an inbox are archived at once: the first to get here
	// makes the directory and the others wait for its answer, rather than
	// each sending a MKDIR that fails and an LSTAT. A failure is not
	// remembered; the next caller tries again.
	_, err, _ := p.making.Do(dir, func() (any, error) {
		p.mu.Lock()
		known := p.dirs[dir]
		p.mu.Unlock()
		if known {
			return nil, nil
		}
		root := p.root(inbox)
		var err error
		if isListed {
			err = root.Prove(ctx, sub, listed)
		} else {
			err = ensureDir(ctx, root, sub, absent)
		}
		if errors.Is(err, transport.ErrNotProven) {
			p.quirk(QuirkFollowsSymlinks)
			return nil, fmt.Errorf("%s is not a directory of the inbox's own (%v); nothing is written through it", Quote(dir), err)
		}
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.dirs[dir] = true
		p.mu.Unlock()
		return nil, nil
	})
	return err
}

func sameContent(ctx context.Context, fsys transport.FS, name, sha string, size int64) (bool, error) {
	data, err := transport.ReadContent(ctx, fsys, name, size)
	if errors.Is(err, transport.ErrTooLarge) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return spool.Hash(data) == sha, nil
}

// ensureDir makes sure sub is a real directory of root (never a
// symlink): made by this client, or proved (transport.Root.Prove).
//
// absent: a listing just now did not hold sub, so it is made without
// asking first (an lstat follows only if it turns out to exist).
func ensureDir(ctx context.Context, root *transport.Root, sub string, absent bool) error {
	dir := root.Path(sub)
	var fi transport.FileInfo
	err := transport.ErrNotExist
	if !absent {
		fi, err = root.Lstat(ctx, sub)
	}
	if errors.Is(err, transport.ErrNotExist) {
		err = root.Mkdir(ctx, sub)
		if err == nil {
			return nil
		}
		if !errors.Is(err, transport.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", Quote(dir), err)
		}
		fi, err = root.Lstat(ctx, sub)
	}
	if err != nil {
		return fmt.Errorf("lstat %s: %w", Quote(dir), err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink or file is in the way; remove it)", Quote(dir))
	}
	return root.Prove(ctx, sub, fi)
}

// reject records a file that must not be read and moves it, unread, into
// malformed/ under its own name (with .1, .2, … if taken).
func (p *puller) reject(ctx context.Context, inbox string, fi transport.FileInfo, reason string) error {
	item := Item{Inbox: inbox, Name: fi.Name, Size: fi.Size, Result: ResultRejected, Reason: reason}
	p.log.Warn("rejected", "host", p.cfg.Host, "name", Quote(path.Join(inbox, fi.Name)), "reason", reason)
	if p.cfg.DryRun {
		item.ArchivedAs = path.Join(MalformedDir, fi.Name)
		p.addItem(item)
		return nil
	}
	// Moved only where the inbox's root proves the entry is what the
	// listing says: a server whose LSTAT follows symlinks renames what a
	// symlink points to.
	if err := p.root(inbox).Prove(ctx, fi.Name, fi); err != nil {
		if ctx.Err() != nil || errors.Is(err, transport.ErrBroken) {
			return err
		}
		if errors.Is(err, transport.ErrNotProven) {
			p.quirk(QuirkFollowsSymlinks)
			err = fmt.Errorf("%w; moving the name could move what it points to", err)
		}
		item.Error = "left in place: " + err.Error()
		p.log.Warn("rejected file left in place", "host", p.cfg.Host, "name", Quote(path.Join(inbox, fi.Name)), "err", item.Error)
		p.addItem(item)
		return nil
	}
	as, err := p.moveRejected(ctx, inbox, fi)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		p.log.Warn("rejected file left in place", "host", p.cfg.Host, "name", Quote(path.Join(inbox, fi.Name)), "err", err)
		item.Error = err.Error()
	}
	item.ArchivedAs = as
	p.addItem(item)
	return nil
}

func (p *puller) moveRejected(ctx context.Context, inbox string, fi transport.FileInfo) (string, error) {
	name := fi.Name
	if err := p.ensureDir(ctx, inbox, MalformedDir); err != nil {
		return "", err
	}
	root := p.root(inbox)
	stem := strings.TrimSuffix(name, ".md")
	for i := 0; i < 100; i++ {
		as := name
		if i > 0 {
			as = fitName(stem, "."+strconv.Itoa(i)+".md")
		}
		err := root.Rename(ctx, name, fi, path.Join(MalformedDir, as))
		if err == nil {
			return path.Join(MalformedDir, as), nil
		}
		if !errors.Is(err, transport.ErrExist) {
			return "", fmt.Errorf("move %s into malformed/: %w", Quote(name), err)
		}
	}
	return "", fmt.Errorf("move %s into malformed/: 100 names taken", Quote(name))
}

// quirk records that the host's server was seen to have q.
func (p *puller) quirk(q string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.report.Quirks, q) {
		p.report.Quirks = append(p.report.Quirks, q)
	}
}

// deferItem leaves a file for a later run. Deferrals are logged once per
// inbox (see run), not per file: an inbox of fresh files is common, and a
// host must not flood the log.
func (p *puller) deferItem(inbox string, fi transport.FileInfo, reason string) {
	p.deferErr(inbox, fi, reason, nil)
}

// deferErr is deferItem with the error that made the file wait, if any.
func (p *puller) deferErr(inbox string, fi transport.FileInfo, reason string, err error) {
	p.mu.Lock()
	if p.deferred[inbox] == nil {
		p.deferred[inbox] = map[string]int{}
	}
	p.deferred[inbox][reason]++
	p.mu.Unlock()
	it := Item{Inbox: inbox, Name: fi.Name, Size: fi.Size, Result: ResultDeferred, Reason: reason}
	if err != nil {
		it.Error = err.Error()
	}
	p.addItem(it)
}

// addItem keeps at most MaxItems items in the report and counts the rest,
// so that a host with a flood of unusable files cannot grow it without
// bound.
func (p *puller) addItem(it Item) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.report.Items) >= MaxItems {
		p.report.ItemsDropped++
		return
	}
	it.Error = clip(it.Error, maxErrText)
	p.report.Items = append(p.report.Items, it)
}
