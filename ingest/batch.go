package ingest

// Group commit: the guarantee is per handoff, the cost need not be. Pending
// sources are decided in batches as if one by one (each plan made on the
// target as the batch's earlier plans leave it), recorded in one
// transaction, their backups and drafts put in place, each target
// replaced once by compare-and-swap with what its chain of plans leaves,
// and every result recorded in one transaction. Per plan the order of the
// guarantees is unchanged. See docs/design.md, "Group commit".

import (
	"context"
	"errors"
	"fmt"
	gohash "hash"
	"path"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
)

const (
	// batchMax is the most sources decided and applied together.
	batchMax = 1024
	// batchMaxBytes bounds the new file content a batch holds (backups,
	// drafts, new target contents); a batch closes once it is reached, so
	// memory stays bounded whatever the sizes of documents and handoffs.
	// Two batches are in flight at a time.
	batchMaxBytes = 16 << 20
	// stageWorkers write and fsync a batch's new files concurrently.
	stageWorkers = 32
	// swapWorkers replace a batch's targets concurrently, one chain of
	// plans each.
	swapWorkers = 16
	// retireMaxBytes and retireMaxFiles bound the replaced target files
	// kept (under temporary names) until the end of a run.
	retireMaxBytes = 64 << 20
	retireMaxFiles = 8192
)

// staged is a new file of a batch, written under a temporary name by the
// ingester's durable.Writer.
type staged struct {
	name    string
	pending *durable.Pending
	tmp     *durable.Temp // set once written and fsynced; nil when used up
	err     error
	// unused: a later plan of the batch on the same target replaced this
	// content before it was put in place; the file is removed.
	unused bool
}

// item is one source of a batch and what became of it.
type item struct {
	src sourceRow
	o   outcome
	p   *plan // a plan to apply, or nil

	draft, backup, temp *staged

	swapped  *durable.Swapped
	late     []byte // another writer's bytes appended to the replaced file
	lateName string
	slow     bool // left to apply, one plan at a time
	// norm is the hash of the content's normal text when it is not in
	// normal form (sametext.go), else "".
	norm string
	// again: the source is a return (revision.go).
	again bool
}

// viewed is a target as the planner reads it: from disk, or as a batch's
// plans leave it.
type viewed struct {
	data   []byte
	exists bool
	sum    string // SHA-256 of data, "" when absent
	// tail, when not nil, is the SHA-256 state of data without its
	// trailing newlines, where an append continues (appendDocument).
	tail gohash.Cloner
}

// batch is the state of one batch.
type batch struct {
	in    *Ingester
	st    *durable.Writer // writes the batch's new files
	items []*item
	known map[string]bool // hashes with a result in the ledger
	prev  *batch          // the batch before, being applied meanwhile, or nil
	seen  map[string]bool // hashes given a result in this batch
	// texts are the normal texts' hashes of the contents not in normal
	// form given a result in this batch; knownText those the ledger
	// holds for the batch's hashes (sametext.go).
	texts, knownText map[string]bool
	// view holds the targets this batch plans changes to, as its plans
	// leave them; prev's view stands for what prev is about to write.
	view map[string]viewed
	// targets are the targets planned on, in the order of their first
	// plan; last is each one's last plan, the one that writes it.
	targets []string
	last    map[string]*item
	dirs    map[string]bool // directories made sure of
	// opened holds the directories the batch's new files go into, open
	// from the first file to the batch's end (nil in a dry run).
	opened *durable.Dirs
	files  []*staged
	bytes  int
	// sums memoizes the hashes of targets read from disk for review
	// entries (reviewBefore).
	sums map[string]string
	// earlier is the ledger's newest earlier version of each source's
	// name, by source id; names the item this batch decided last for
	// each name (revision.go).
	earlier map[int64]ledger.Version
	names   map[ledger.NameKey]*item
	// returns are the sources whose bytes an earlier version of their
	// name had, as the ledger knows; had is every name and content this
	// batch decided.
	returns map[int64]bool
	had     map[nameContent]bool
}

// srcQueue hands out pending sources in storage order, a page at a time.
type srcQueue struct {
	led   *ledger.Ledger
	after int64
	buf   []sourceRow
	done  bool
}

// peek returns up to max of the next pending sources.
func (q *srcQueue) peek(ctx context.Context, max int) ([]sourceRow, error) {
	for len(q.buf) < max && !q.done {
		rows, err := q.led.PendingSourcesAfter(ctx, q.after, max)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		if len(rows) < max {
			q.done = true
		}
		if len(rows) > 0 {
			q.after = rows[len(rows)-1].ID
			q.buf = append(q.buf, rows...)
		}
	}
	return q.buf[:min(max, len(q.buf))], nil
}

func (q *srcQueue) consume(n int) { q.buf = q.buf[n:] }

// runBatches decides and applies every pending source, batch by batch, the
// next batch decided while the current one is applied. It returns the
// entries in storage order.
func (in *Ingester) runBatches(ctx context.Context) (out []Entry, err error) {
	var st *durable.Writer
	if !in.opts.DryRun {
		st = durable.NewWriter(in.ws.root, stageWorkers)
		defer st.Close()
	}
	q := &srcQueue{led: in.led}
	srcs, err := q.peek(ctx, in.batchMax)
	if err != nil || len(srcs) == 0 {
		return nil, err
	}
	cur, err := in.decideBatch(ctx, st, srcs, nil)
	if err != nil {
		return nil, err
	}
	q.consume(len(cur.items))
	for cur != nil {
		next, nextSrcs, nextErr := (*batch)(nil), []sourceRow(nil), error(nil)
		done := make(chan struct{})
		if err := ctx.Err(); err != nil {
			cur.cleanup()
			return out, err
		}
		if nextSrcs, err = q.peek(ctx, in.batchMax); err != nil {
			cur.cleanup()
			return out, err
		}
		if len(nextSrcs) > 0 && !in.opts.DryRun {
			go func() {
				defer close(done)
				next, nextErr = in.decideBatch(ctx, st, nextSrcs, cur)
			}()
		} else {
			close(done)
		}
		entries, moved, err := cur.apply(ctx)
		out = append(out, entries...)
		<-done
		if err != nil {
			if next != nil {
				next.cleanup()
			}
			return out, err
		}
		if nextErr != nil {
			return out, nextErr
		}
		if next != nil && moved {
			// The next batch was planned on what this one was to
			// leave, and another writer changed that: plan it again.
			next.cleanup()
			next = nil
		}
		if next == nil && len(nextSrcs) > 0 {
			if next, err = in.decideBatch(ctx, st, nextSrcs, nil); err != nil {
				return out, err
			}
		}
		if next != nil {
			q.consume(len(next.items))
		}
		cur = next
	}
	return out, nil
}

// decideBatch decides a prefix of srcs as one batch (step 1). prev, when
// not nil, is the batch being applied meanwhile: srcs are planned on what
// it is about to write.
func (in *Ingester) decideBatch(ctx context.Context, st *durable.Writer, srcs []sourceRow, prev *batch) (_ *batch, err error) {
	b := &batch{in: in, st: st, prev: prev, seen: map[string]bool{}, view: map[string]viewed{}, last: map[string]*item{}, dirs: map[string]bool{}, sums: map[string]string{},
		names: map[ledger.NameKey]*item{}, texts: map[string]bool{}, had: map[nameContent]bool{}}
	if st != nil {
		b.opened = durable.NewDirs(in.ws.root)
	}
	defer func() {
		if err != nil {
			b.cleanup()
		}
	}()
	shas := make([]string, len(srcs))
	for i, s := range srcs {
		shas[i] = s.SHA256
	}
	if b.known, err = in.led.KnownHandoffs(ctx, shas); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if b.knownText, err = in.led.KnownTexts(ctx, shas); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if b.earlier, b.returns, err = in.led.Earlier(ctx, srcs); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if b.returnsWithin(src) {
			// Its content's earlier version is decided in this batch or
			// the one being applied: it is decided once that is done.
			if len(b.items) == 0 {
				return nil, nil
			}
			break
		}
		it, err := b.decide(ctx, src)
		if err != nil {
			return nil, err
		}
		b.items = append(b.items, it)
		b.had[nameContent{src.Key(), src.SHA256}] = true
		if it.o.Result != ResultDuplicate {
			b.names[src.Key()] = it
		}
		if len(b.items) >= in.batchMax || b.bytes >= in.batchBytes {
			break
		}
	}
	b.prev = nil // only needed while deciding
	if !in.opts.DryRun {
		if err := b.stageTargets(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decide gives one source its outcome, or a plan and the files to write.
func (b *batch) decide(ctx context.Context, src sourceRow) (*item, error) {
	in := b.in
	it := &item{src: src, again: b.returns[src.ID]}
	if !it.again && (b.known[src.SHA256] || b.seen[src.SHA256] || b.prev != nil && b.prev.seen[src.SHA256]) {
		it.o = outcome{Result: ResultDuplicate}
		return it, nil
	}
	b.seen[src.SHA256] = true
	// A return's content, and its text, are known: it is decided as the
	// revision it is, not as a copy.
	if !it.again && (b.knownText[src.SHA256] || b.texts[src.SHA256] || b.prev != nil && b.prev.texts[src.SHA256]) {
		// A content in normal form whose text a copy with CRLF line
		// ends (or trailing whitespace) had first.
		it.o = outcome{Result: ResultDuplicate, Reason: ReasonSameText}
		return it, nil
	}
	data, err := in.spool.Get(src.SHA256)
	if err != nil {
		return nil, fmt.Errorf("ingest: %s from %s: %w", claim.Quote(src.Name), src.Host, err)
	}
	if it.norm = normalHash(data); it.norm != "" && !it.again {
		same, err := b.sameText(ctx, it.norm)
		if err != nil {
			return nil, err
		}
		b.texts[it.norm] = true
		if same {
			it.o = outcome{Result: ResultDuplicate, Reason: ReasonSameText}
			return it, nil
		}
	}
	h, err := Parse(data)
	if err != nil {
		reason := ReasonParseError
		if pe, ok := errors.AsType[*ParseError](err); ok {
			reason = pe.Reason
		}
		it.o = outcome{Result: ResultMalformed, Reason: reason}
		return it, nil
	}
	if probs := h.Validate(); len(probs) > 0 {
		return it, b.review(it, data, outcome{Reason: probs[0].Reason, Action: h.Action, Before: b.reviewBefore(h)})
	}
	p, reason, err := in.plan(src, h, b.read)
	if err != nil {
		return nil, err
	}
	revised := false
	if v, ok := b.revises(src); ok {
		replan := func() (*plan, string, error) { return in.planWith(src, h, b.read, Override{Workspace: true}) }
		var review bool
		if p, reason, review, err = revision(v, h, p, reason, replan); err != nil {
			return nil, err
		}
		if review {
			return it, b.review(it, data, outcome{Reason: ReasonRevised, Action: h.Action, Before: b.reviewBefore(h)})
		}
		revised = v.Changed()
	}
	if reason != "" {
		return it, b.unplanned(it, data, h, p, reason)
	}
	it.o = p.outcome()
	if revised {
		it.o.Reason = ReasonRevised
	}
	if in.opts.DryRun {
		return it, nil
	}
	it.p = p
	if it.again {
		if err := b.retake(ctx, p); err != nil {
			return nil, err
		}
	}
	// A backup keeps what the target holds before the batch replaces it:
	// the first plan of a chain backs it up; the later ones were made on
	// content that is never on disk (the batch writes the target once).
	if _, chained := b.last[p.Target]; p.Before != "" && !chained {
		p.Backup = BackupName(p.SHA256, p.Replans, p.Target)
		if it.backup, err = b.stage(layout.BackupsDir+"/"+p.Backup, p.cur); err != nil {
			return nil, fmt.Errorf("ingest: backup %s: %w", p.Target, err)
		}
	}
	// A target is written once a batch, with what its last plan in the
	// batch leaves. A card, seldom planned twice in a batch, is written
	// now; a document, which a batch often appends to many times, once the
	// batch is decided (stageTargets).
	if last, ok := b.last[p.Target]; !ok {
		b.targets = append(b.targets, p.Target)
	} else if last.temp != nil {
		last.temp.unused = true // the earlier plan's file is not put in place
		last.temp = nil
	} else {
		b.bytes -= len(b.view[p.Target].data)
	}
	b.last[p.Target] = it
	b.view[p.Target] = viewed{data: p.next, exists: true, sum: p.After, tail: p.tail}
	if p.Kind == kindCard {
		if it.temp, err = b.stage(p.Target, p.next); err != nil {
			return nil, fmt.Errorf("ingest: write %s: %w", p.Target, err)
		}
	} else {
		b.bytes += len(p.next)
	}
	p.cur, p.next, p.tail = nil, nil, nil
	return it, nil
}

// sameText reports whether a content with the normal text norm was given
// a result before: in this batch, the batch being applied, or the ledger.
func (b *batch) sameText(ctx context.Context, norm string) (bool, error) {
	for _, bb := range []*batch{b, b.prev} {
		if bb != nil && (bb.seen[norm] || bb.texts[norm]) {
			return true, nil
		}
	}
	same, err := b.in.led.SameText(ctx, norm)
	if err != nil {
		return false, fmt.Errorf("ingest: %w", err)
	}
	return same, nil
}

// stageTargets hands the workers each target's new content as the batch's
// last plan on it leaves it: a chain of plans on one target (appends to a
// document) is written, fsynced and put in place once, not once per plan.
func (b *batch) stageTargets() error {
	for _, t := range b.targets {
		it := b.last[t]
		if it.temp != nil {
			continue // written already
		}
		f, err := b.stageFile(t, b.view[t].data)
		if err != nil {
			return fmt.Errorf("ingest: write %s: %w", t, err)
		}
		it.temp = f
	}
	return nil
}

// read is the planner's view of a target: as the batch's plans leave it,
// as the batch being applied is about to leave it, or as it is on disk. A
// dry run plans every handoff on the disk's content.
func (b *batch) read(target string) (viewed, error) {
	if v, ok := b.view[target]; ok {
		return v, nil
	}
	if b.prev != nil {
		if v, ok := b.prev.view[target]; ok {
			return v, nil
		}
	}
	return b.in.readDisk(target)
}

// reviewBefore is the hash of the target a handoff that goes to review
// names (see namedTargetHash), as the batch sees it; a target read from
// disk is read once a batch, however many review items name it.
func (b *batch) reviewBefore(h *Handoff) string {
	t := NamedTarget(h)
	if t == "" {
		return ""
	}
	if s, ok := b.sums[t]; ok {
		if _, planned := b.view[t]; !planned {
			return s
		}
	}
	s := namedTargetHash(h, b.read)
	b.sums[t] = s
	return s
}

// review routes a source to review with a draft of its bytes.
func (b *batch) review(it *item, data []byte, o outcome) error {
	o.Result = ResultReview
	o.Target = layout.ReviewDir + "/" + claim.ArchiveName(it.src.Name, it.src.SHA256)
	it.o = o
	if _, _, err := b.in.ws.read(o.Target); err != nil {
		return fmt.Errorf("ingest: review draft %s: %w", o.Target, err)
	}
	if b.in.opts.DryRun {
		return nil
	}
	var err error
	if it.draft, err = b.stage(o.Target, data); err != nil {
		return fmt.Errorf("ingest: review draft %s: %w", o.Target, err)
	}
	return nil
}

// stage hands a new file to the workers.
func (b *batch) stage(name string, data []byte) (*staged, error) {
	b.bytes += len(data)
	return b.stageFile(name, data)
}

// stageFile hands a new file to the workers; its bytes are already counted.
func (b *batch) stageFile(name string, data []byte) (*staged, error) {
	dir := path.Dir(name)
	if !b.dirs[dir] {
		if err := b.in.ws.mkdirs(dir); err != nil {
			return nil, err
		}
		b.dirs[dir] = true
	}
	if err := b.in.ws.markWriting(); err != nil {
		return nil, err
	}
	f := &staged{name: name, pending: b.st.WriteIn(b.opened, name, data, layout.FileMode(name))}
	b.files = append(b.files, f)
	return f, nil
}

// syncDirs fsyncs the directories the batch put files in place in.
func (b *batch) syncDirs(dirs []string) error {
	if b.opened != nil {
		return b.opened.Sync(dirs, stageWorkers)
	}
	return durable.SyncDirs(b.in.ws.root, dirs, stageWorkers)
}

// waitFiles waits until the workers have written every new file of the
// batch (or failed to).
func (b *batch) waitFiles() {
	for _, f := range b.files {
		if f.pending != nil {
			f.tmp, f.err = f.pending.Wait()
			f.pending = nil
		}
	}
}

// cleanup removes what a batch that failed, or is dropped, leaves:
// temporary files not put in place, replaced files kept open.
func (b *batch) cleanup() {
	b.waitFiles()
	for _, f := range b.files {
		if f.tmp != nil {
			f.tmp.Remove()
			f.tmp = nil
		}
	}
	for _, it := range b.items {
		if it.swapped != nil {
			it.swapped.Close()
			b.in.retire(it.swapped)
			it.swapped = nil
		}
	}
	b.closeDirs()
}

// closeDirs closes the batch's open directories once its files are used
// up.
func (b *batch) closeDirs() {
	if b.opened != nil {
		b.opened.Close()
	}
}

// apply carries a decided batch to its end, steps 2 to 5 above, and
// returns its entries in order. moved reports that a target was found
// changed by another writer (a later batch planned on this one's view
// must be planned again).
func (b *batch) apply(ctx context.Context) (entries []Entry, moved bool, err error) {
	in := b.in
	defer func() {
		if err != nil {
			b.cleanup()
		}
		b.closeDirs()
	}()
	began := time.Now()
	var planned, placed, replaced time.Duration
	defer func() {
		if err == nil {
			in.log.Debug("applied a batch", "handoffs", len(b.items), "files", len(b.files), "plans", planned, "files_synced", placed-planned, "targets_replaced", replaced-placed, "bookkeeping", time.Since(began)-replaced)
		}
	}()
	var plans []*plan
	for _, it := range b.items {
		if it.p != nil {
			plans = append(plans, it.p)
		}
	}
	if len(plans) > 0 {
		if err := in.led.InsertPlans(ctx, in.opts.RunID, ledgerPlans(plans)); err != nil {
			return nil, false, fmt.Errorf("ingest: record plans: %w", err)
		}
		failpoint.Inject("plan.recorded")
	}
	planned = time.Since(began)
	if err := b.placeFiles(); err != nil {
		return nil, false, err
	}
	placed = time.Since(began)
	if in.beforeReplace != nil {
		in.beforeReplace()
	}
	if moved, err = b.replaceTargets(); err != nil {
		return nil, moved, err
	}
	replaced = time.Since(began)

	var done []finished
	for _, it := range b.items {
		if !it.slow {
			id := int64(0)
			if it.p != nil {
				id = it.p.ID
			}
			done = append(done, finished{Src: it.src, O: it.o, PlanID: id, Norm: it.norm, Again: it.again})
		}
	}
	if err := in.led.FinishAll(ctx, in.opts.RunID, done); err != nil {
		return nil, moved, fmt.Errorf("ingest: record results: %w", err)
	}
	failpoint.Inject("bookkeeping.done")
	for _, it := range b.items {
		if !it.slow {
			in.log.Info("handoff", "name", claim.Quote(it.src.Name), "host", it.src.Host, "result", it.o.Result, "reason", it.o.Reason, "target", it.o.Target)
		}
		if it.lateName != "" {
			in.keepLate(it.p.Target, it.late, it.lateName)
		}
	}

	entries = make([]Entry, 0, len(b.items))
	for i, it := range b.items {
		if !it.slow {
			entries = append(entries, entryFor(it.src, it.o))
			continue
		}
		// Another writer changed the target: one plan at a time, as
		// an interrupted plan is finished.
		var earlier, later []*plan
		for j, jt := range b.items {
			if j != i && jt.slow && jt.p.Target == it.p.Target {
				if j < i {
					earlier = append(earlier, jt.p)
				} else {
					later = append(later, jt.p)
				}
			}
		}
		e, err := in.apply(ctx, it.src, it.p, earlier, later)
		if err != nil {
			return entries, moved, err
		}
		entries = append(entries, e)
	}
	return entries, moved, nil
}

// placeFiles waits for the batch's new files, puts backups and review
// drafts in place and makes them durable, directories included.
func (b *batch) placeFiles() error {
	b.waitFiles()
	for _, f := range b.files {
		if f.err != nil {
			return fmt.Errorf("ingest: %w", f.err)
		}
		if f.unused {
			f.tmp.Remove()
			f.tmp = nil
		}
	}
	var dirs []string
	for _, kind := range []struct {
		dir string
		get func(*item) *staged
	}{
		{layout.BackupsDir, func(it *item) *staged { return it.backup }},
		{layout.ReviewDir, func(it *item) *staged { return it.draft }},
	} {
		n := 0
		for _, it := range b.items {
			if f := kind.get(it); f != nil {
				err := f.tmp.Rename()
				f.tmp = nil
				if err != nil {
					return fmt.Errorf("ingest: %w", err)
				}
				n++
			}
		}
		if n > 0 {
			dirs = append(dirs, kind.dir)
		}
	}
	if err := b.syncDirs(dirs); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	for _, d := range dirs {
		switch d {
		case layout.BackupsDir:
			failpoint.Inject("backup.written")
		case layout.ReviewDir:
			failpoint.Inject("review.written")
		}
	}
	if len(b.files) > 0 {
		failpoint.Inject("batch.files-synced")
	}
	return nil
}

// replaceTargets puts each target's new content in place by
// compare-and-swap, the targets concurrently, and makes the replacements
// durable. A target is replaced once, with the content its chain of plans
// leaves (the batch's plans on it, in order), only while it still holds the
// first plan's before-hash. A chain whose target another writer changed is
// left to apply, one plan at a time (slow). moved reports such a change, or
// another writer's bytes appended to a replaced file.
func (b *batch) replaceTargets() (moved bool, err error) {
	in := b.in
	chains := make([][]*item, len(b.targets))
	index := make(map[string]int, len(b.targets))
	for i, t := range b.targets {
		index[t] = i
	}
	for _, it := range b.items {
		if it.p != nil {
			i := index[it.p.Target]
			chains[i] = append(chains[i], it)
		}
	}
	type swapResult struct {
		conflict bool
		late     []byte
		err      error
	}
	results := make([]swapResult, len(chains))
	sem := make(chan struct{}, swapWorkers)
	var wg sync.WaitGroup
	for i, chain := range chains {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &results[i]
			first, last := chain[0], chain[len(chain)-1]
			tmp := last.temp.tmp
			last.temp.tmp = nil
			wantExists, want := first.p.Before != "", first.p.Before
			sw, late, err := tmp.Swap(func(old []byte, existed bool) bool {
				if !existed {
					return !wantExists
				}
				return wantExists && hash(old) == want
			})
			switch {
			case errors.Is(err, durable.ErrConflict):
				r.conflict, r.late = true, late
			case err != nil:
				r.err = fmt.Errorf("ingest: write %s: %w", last.p.Target, err)
			default:
				last.swapped = sw
				failpoint.Inject("commit.written")
			}
		})
	}
	wg.Wait()
	var dirs []string
	seenDir := map[string]bool{}
	for i, chain := range chains {
		r, target := results[i], b.targets[i]
		if r.err != nil {
			return moved, r.err
		}
		if !r.conflict {
			if d := path.Dir(target); !seenDir[d] {
				seenDir[d] = true
				dirs = append(dirs, d)
			}
			continue
		}
		in.log.Info("target changed while being written; looking again", "target", target)
		moved = true
		for _, it := range chain {
			it.slow = true
		}
		if len(r.late) > 0 {
			name, err := in.saveLate(target, r.late)
			if err != nil {
				return moved, err
			}
			in.keepLate(target, r.late, name)
		}
	}
	if len(dirs) == 0 {
		return moved, nil
	}
	if err := b.syncDirs(dirs); err != nil {
		return moved, fmt.Errorf("ingest: %w", err)
	}
	failpoint.Inject("batch.targets-synced")
	// Bytes another writer appended to a replaced file after the check:
	// durable in backups before the result is recorded, put back after.
	for _, it := range b.items {
		if it.swapped == nil {
			continue
		}
		late, err := it.swapped.Late()
		if it.swapped.WriterOpen() {
			in.log.Warn("another writer kept a replaced file open; what it writes from now on is not kept",
				"target", it.p.Target, "waited", durable.WritersWait)
		}
		in.retire(it.swapped)
		it.swapped = nil
		if err != nil {
			return moved, fmt.Errorf("ingest: %w", err)
		}
		if len(late) > 0 {
			moved = true
			name, err := in.saveLate(it.p.Target, late)
			if err != nil {
				return moved, err
			}
			it.late, it.lateName = late, name
		}
	}
	return moved, nil
}

// saveLate keeps bytes another writer appended to target's replaced
// file durable under .handoff/backups, and returns the backup's name.
func (in *Ingester) saveLate(target string, late []byte) (string, error) {
	name := lateName(target, late)
	if err := in.ws.write(layout.BackupsDir+"/"+name, late); err != nil {
		return "", fmt.Errorf("ingest: keep another writer's late edit of %s: %w", target, err)
	}
	return name, nil
}

// lateName names the backup that keeps bytes another writer appended to a
// target's replaced file.
func lateName(target string, late []byte) string {
	return "late." + hash(late)[:12] + "." + hash([]byte(target))[:16]
}

// retire keeps a replaced target file, under its temporary name, to be
// removed when the Ingester is closed (removeRetired), within bounds. On
// ext4 without a journal every inode freed makes each later file creation
// in its group look at it again for 60 s (6 min while its inode table
// block is dirty), which made removing thousands of replaced files during
// a run cost more than the rest of their batch, and slowed the spool
// writes of pulls still running: a sync runs Run several times while it
// pulls.
func (in *Ingester) retire(s *durable.Swapped) {
	if !s.Replaced() {
		return
	}
	in.retired = append(in.retired, s)
	in.retiredBytes += s.Size()
	if len(in.retired) >= retireMaxFiles || in.retiredBytes >= retireMaxBytes {
		in.removeRetired()
	}
}

// removeRetired removes the replaced target files kept so far. A failure
// is only logged: the files have temporary names, which the next run
// removes.
func (in *Ingester) removeRetired() {
	for _, s := range in.retired {
		if err := s.Remove(); err != nil {
			in.unclean = true // the next ingester removes it (removeLeftTemps)
			in.log.Warn("could not remove a replaced file; the next run will", "err", err)
		}
	}
	in.retired, in.retiredBytes = nil, 0
}
