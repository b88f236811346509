package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	gohash "hash"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/openclaw"
)

// Entry is what became of one stored source in a run: a receipt line.
type Entry struct {
	Host         string
	Inbox        string
	Name         string
	SHA256       string
	Size         int64
	Result       string
	Reason       string
	Action       string
	Target       string
	BeforeSHA256 string
	AfterSHA256  string
	ArchivedAs   string
	// StoredRun is the run that stored the source: another than this one
	// when an earlier run was stopped or crashed before it was ingested.
	StoredRun string
}

// Options configure one ingest.
type Options struct {
	Workspace string // absolute path of the workspace root
	RunID     string
	DryRun    bool // decide everything, write nothing to the workspace
	Log       *slog.Logger
	// OpenClaw says how the workspace's reader is treated; the zero
	// value detects the layout, finds OpenClaw's config where OpenClaw
	// does, and keeps the card index in MEMORY.md.
	OpenClaw OpenClawOptions
	// HoldPrivate reports whether a handoff of host's inbox writing to
	// target (a workspace path; exists: the card or document is there)
	// must wait in review (ReasonPrivateCard, ReasonPrivateAppend): the
	// handoff is private to its host and the target is one the other
	// hosts' mirrors show
	// (continuity.PrivateAppends). Nil holds nothing.
	HoldPrivate func(host, inbox, target string, exists bool) bool
}

// Ingester applies stored handoffs to the workspace. Only one may run at a
// time per workspace; the caller holds the workspace lock.
type Ingester struct {
	opts  Options
	led   *ledger.Ledger
	spool spool.Store
	ws    *workspace
	log   *slog.Logger

	// Batch limits (see batch.go); tests lower them.
	batchMax   int
	batchBytes int

	// Replaced target files kept until Close (see retire).
	retired      []*durable.Swapped
	retiredBytes int64
	// tempsRemoved: the first Run has removed a crashed run's temporary
	// files (removeLeftTemps).
	tempsRemoved bool
	// oc is what the ingester knows of the OpenClaw that reads the
	// workspace (openclaw.go).
	oc readerView
	// cardsChanged: a plan of this ingester wrote a card, so the card
	// index in MEMORY.md is brought up to date (updateCardIndex).
	cardsChanged bool
	// cardIndex is what updateCardIndex wrote, nil when nothing.
	cardIndex *IndexResult
	// movedDrafts counts the review drafts of an earlier version moved
	// out of OpenClaw's memory (moveLegacyDrafts).
	movedDrafts int
	// unclean: this Ingester may leave temporary files behind (a call
	// failed, a replaced file could not be removed), so Close keeps
	// layout.IngestingFile for the next one.
	unclean bool
	// draftsChecked: the first Run (or Recover) has removed the drafts of
	// decided handoffs that a crashed review left (see Recover).
	draftsChecked bool

	// beforeReplace, when set (by tests), runs after a batch's new files
	// are durable and before its targets are replaced.
	beforeReplace func()

	// threads are the thread keys (ThreadKey) of the handoffs planned so
	// far, by hash, for Thread.
	threadsMu sync.Mutex
	threads   map[string]string
}

// Thread returns the thread key (ThreadKey) of a handoff this Ingester
// has planned, and whether it has: what it parsed already, so that the
// run's continuity step need not read and parse the handoff again.
func (in *Ingester) Thread(sha string) (key string, known bool) {
	in.threadsMu.Lock()
	defer in.threadsMu.Unlock()
	key, known = in.threads[sha]
	return key, known
}

// New prepares an ingester over an open ledger and spool.
func New(opts Options, led *ledger.Ledger, sp spool.Store) (*Ingester, error) {
	ws, err := openWorkspace(opts.Workspace, opts.DryRun)
	if err != nil {
		return nil, fmt.Errorf("ingest: workspace %s: %w", opts.Workspace, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	in := &Ingester{opts: opts, led: led, spool: sp, ws: ws, log: log, batchMax: batchMax, batchBytes: batchMaxBytes}
	in.oc = in.detectReader()
	return in, nil
}

// Close removes the target files the runs replaced (see retire) and
// releases the workspace handle. When nothing is left behind it also
// removes layout.IngestingFile, so that the next ingester need not look
// for temporary files (removeLeftTemps).
func (in *Ingester) Close() error {
	in.removeRetired()
	var err error
	if !in.unclean {
		err = in.ws.unmark()
	}
	return errors.Join(err, in.ws.Close())
}

// Run first finishes what a crashed run left behind (Recover: its plans,
// and the drafts of handoffs a person decided about), then decides and
// applies every stored source that has no result yet, in the order they
// were stored. It returns one Entry per source it gave a result to, in
// that order.
//
// Guarantees: a handoff's content is applied at most once (by hash, across
// runs); a target is only replaced while it still hashes to the plan's
// before-hash; a backup of its prior content is durable before it is
// replaced; a crash at any point is finished by the next Run without a
// second application.
//
// Sources are taken in batches (see batch.go): the guarantee is per
// handoff, the cost of the fsyncs and ledger commits is shared.
func (in *Ingester) Run(ctx context.Context) ([]Entry, error) {
	out, err := in.Recover(ctx)
	if err != nil {
		return out, err
	}
	entries, err := in.runBatches(ctx)
	if err != nil {
		in.unclean = true
	}
	out = append(out, entries...)
	in.noteCards(out)
	return out, err
}

// noteCards notes whether entries changed a card, for UpdateCardIndex.
func (in *Ingester) noteCards(entries []Entry) {
	for _, e := range entries {
		if e.Result == ResultPromoted {
			in.cardsChanged = true
		}
	}
}

// UpdateCardIndex brings the card index in MEMORY.md up to date once the
// runs of this ingester are done (see updateCardIndex). The index is
// derived from the cards, so a failure only leaves it stale until the
// next run: it is logged, never the run's failure.
func (in *Ingester) UpdateCardIndex() {
	if err := in.updateCardIndex(); err != nil {
		in.log.Warn("the card index in MEMORY.md is left as it was; the next run tries again", "err", err)
	}
}

func entryFor(src sourceRow, o outcome) Entry {
	return Entry{Host: src.Host, Inbox: src.Inbox, Name: src.Name, SHA256: src.SHA256, Size: src.Size,
		Result: o.Result, Reason: o.Reason, Action: o.Action, Target: o.Target,
		BeforeSHA256: o.Before, AfterSHA256: o.After, ArchivedAs: src.ArchivedAs, StoredRun: src.StoredRun}
}

// record finishes a source with an outcome that wrote nothing but maybe a
// review draft.
func (in *Ingester) record(ctx context.Context, src sourceRow, o outcome, planID int64) (Entry, error) {
	again, err := in.led.Returning(ctx, src)
	if err != nil {
		return Entry{}, fmt.Errorf("ingest: record %s: %w", src.SHA256[:12], err)
	}
	if o.Reason == "" && (o.Result == ResultPromoted || o.Result == ResultRouted) {
		// A plan finished here (after a crash, or one plan at a time)
		// says no more than what it wrote: a revision's reason is found
		// again as the batch found it.
		ev, _, err := in.led.Earlier(ctx, []sourceRow{src})
		if err != nil {
			return Entry{}, fmt.Errorf("ingest: record %s: %w", src.SHA256[:12], err)
		}
		if v, ok := ev[src.ID]; ok && v.Changed() {
			o.Reason = ReasonRevised
		}
	}
	if err := in.led.FinishAll(ctx, in.opts.RunID, []finished{{Src: src, O: o, PlanID: planID, Norm: in.normOf(src), Again: again}}); err != nil {
		return Entry{}, fmt.Errorf("ingest: record %s: %w", src.SHA256[:12], err)
	}
	failpoint.Inject("bookkeeping.done")
	in.log.Info("handoff", "name", claim.Quote(src.Name), "host", src.Host, "result", o.Result, "reason", o.Reason, "target", o.Target)
	return entryFor(src, o), nil
}

func (p *plan) outcome() outcome {
	r, reason := ResultPromoted, ""
	switch p.Kind {
	case kindDocument:
		r = ResultRouted
	case kindReplace:
		r, reason = ResultRouted, ReasonRevised
	}
	return outcome{Result: r, Reason: reason, Action: p.Action, Target: p.Target, Before: p.Before, After: p.After}
}

// maxApplyAttempts bounds how often apply looks again at a target that
// other writers keep changing.
const maxApplyAttempts = 8

const (
	kindCard     = "card"
	kindDocument = "document"
)

// readFunc reads a target for the planner: its content, whether it
// exists, and the content's SHA-256. It fails with *errUnsafe for a
// target that cannot be written safely.
type readFunc func(target string) (viewed, error)

// readDisk is the readFunc of the workspace as it is on disk.
func (in *Ingester) readDisk(target string) (viewed, error) {
	data, exists, err := in.ws.read(target)
	if err != nil || !exists {
		return viewed{}, err
	}
	sum, tail := sums(data)
	return viewed{data: data, exists: true, sum: sum, tail: tail}, nil
}

// plan decides the change a valid handoff makes to its target as read
// returns it. A non-empty reason means no change: unplanned tells what
// becomes of the handoff then. The plan's Before is the target's hash
// also then (a review entry carries it), except for an unsafe target.
func (in *Ingester) plan(src sourceRow, h *Handoff, read readFunc) (*plan, string, error) {
	in.threadsMu.Lock()
	if in.threads == nil {
		in.threads = map[string]string{}
	}
	in.threads[src.SHA256] = threadKeyOf(h)
	in.threadsMu.Unlock()
	return in.planWith(src, h, read, Override{})
}

// planWith is plan with a person's override (see Override): with
// ov.Workspace, the rules about the card's state (card-exists,
// card-missing, hash-conflict, card-identical) give a plan on the card as
// it is now instead of a reason.
func (in *Ingester) planWith(src sourceRow, h *Handoff, read readFunc, ov Override) (*plan, string, error) {
	p := &plan{Plan: ledger.Plan{SHA256: src.SHA256, SourceID: src.ID, Action: h.Action}}
	if h.Card != nil {
		p.Kind, p.Target = kindCard, layout.CardsDir+"/"+h.Card.Name
		v, err := read(p.Target)
		if reason, err := unsafeReason(err); reason != "" || err != nil {
			return p, reason, err
		}
		cur, exists, sum := v.data, v.exists, v.sum
		p.Before = sum
		reason := ""
		switch {
		case h.Action == ActionCreateCard && exists && bytes.Equal(cur, []byte(h.Card.Content)):
			// The card already holds what the create would write, byte
			// for byte (an agent saved it twice): nothing to write.
			reason = ReasonCardIdentical
		case h.Action == ActionCreateCard && exists:
			reason = ReasonCardExists
		case h.Action == ActionUpdateCard && !exists:
			reason = ReasonCardMissing
		case h.Action == ActionUpdateCard && sum != h.Card.ExpectedSHA256:
			reason = ReasonHashConflict
		}
		if reason != "" && !ov.Workspace {
			if reason == ReasonCardIdentical {
				p.After = sum
			}
			return p, reason, nil
		}
		if !ov.Workspace && in.opts.HoldPrivate != nil && in.opts.HoldPrivate(src.Host, src.Inbox, p.Target, exists) {
			return p, ReasonPrivateCard, nil
		}
		p.cur = cur
		p.Content = []byte(h.Card.Content)
		p.next = p.Content
		p.After = hash(p.Content)
		return p, "", nil
	}
	if h.Document == nil {
		return nil, ReasonNoTarget, nil // Validate catches this; be safe
	}
	p.Kind, p.Target = kindDocument, in.oc.target(h.Document.Target)
	p.Content = []byte(h.Document.Content)
	v, err := read(p.Target)
	if reason, err := unsafeReason(err); reason != "" || err != nil {
		return p, reason, err
	}
	p.Before, p.cur = v.sum, v.data
	if p.Target == openclaw.AgentsFile {
		p.next = openclaw.InsertTools(v.data, h.Document.Content)
		p.After, p.tail = sums(p.next)
	} else {
		p.next, p.After, p.tail = appendDocument(v, h.Document.Content)
	}
	if !ov.Workspace && in.opts.HoldPrivate != nil && in.opts.HoldPrivate(src.Host, src.Inbox, p.Target, v.exists) {
		return p, ReasonPrivateAppend, nil
	}
	if !ov.Workspace {
		if f, over := in.oc.overflow(p.Target, p.next, read); over {
			p.overflow = f
			return p, ReasonBootstrapCap, nil
		}
	}
	return p, "", nil
}

// editDocument is what a document plan writes: the note appended, or, in
// AGENTS.md (where a TOOLS.md note lands on OpenClaw 2026.9), put at the
// end of its "## Tools" section. The plan's target alone decides, so a
// crashed plan is finished the way it was made.
func editDocument(target string, cur []byte, content string) []byte {
	if target == openclaw.AgentsFile {
		return openclaw.InsertTools(cur, content)
	}
	return AppendDocument(cur, content)
}

// NamedTarget is the workspace file a handoff names, when it names exactly
// one that a handoff may write: memory/cards/<name> for a plain card name,
// or an allowed document. Otherwise "".
func NamedTarget(h *Handoff) string {
	switch {
	case h == nil:
	case h.Card != nil && h.Document == nil && isCardName(h.Card.Name):
		return layout.CardsDir + "/" + h.Card.Name
	case h.Document != nil && h.Card == nil && IsAllowedDocument(h.Document.Target):
		return h.Document.Target
	}
	return ""
}

// namedTargetHash is the SHA-256 of the target a handoff names (see
// NamedTarget) as read returns it, or "" when it names none, the target is
// absent, or it cannot be read safely: what a review entry carries as its
// before-hash.
func namedTargetHash(h *Handoff, read readFunc) string {
	t := NamedTarget(h)
	if t == "" {
		return ""
	}
	v, err := read(t)
	if err != nil {
		return ""
	}
	return v.sum
}

// unplanned gives its result to a valid source that the planner gave a
// reason instead of a plan. A create-card whose card already holds its
// content (card-identical) is a duplicate: nothing is written, not even a
// draft, and the entry names the card, with its hash as before and after.
// Every other reason sends the handoff to review. p may be nil.
func (b *batch) unplanned(it *item, data []byte, h *Handoff, p *plan, reason string) error {
	if reason == ReasonCardIdentical {
		it.o = outcome{Result: ResultDuplicate, Reason: reason, Action: h.Action, Target: p.Target, Before: p.Before, After: p.After}
		return nil
	}
	before := ""
	if p != nil {
		before = p.Before
	}
	return b.review(it, data, outcome{Reason: reason, Action: h.Action, Before: before})
}

// apply carries a recorded plan to its end: backup, guarded write,
// bookkeeping. It is also how an interrupted plan is finished, so every
// step checks what is already on disk. earlier and later are the plans
// recorded before and after p that were unfinished with it, in order: a
// batch may have planned several of them on top of each other on one
// target (see superseded and writtenBeforeEdit).
func (in *Ingester) apply(ctx context.Context, src sourceRow, p *plan, earlier, later []*plan) (Entry, error) {
	// Each pass either finishes or changes something (a re-plan, a lost
	// race); a target that keeps changing under us goes to review.
	lastHash := p.Before
	for attempt := 0; ; attempt++ {
		if attempt == maxApplyAttempts {
			return in.reviewPlan(ctx, src, p, ReasonHashConflict, lastHash)
		}
		cur, exists, err := in.ws.read(p.Target)
		if reason, err := unsafeReason(err); err != nil {
			return Entry{}, fmt.Errorf("ingest: plan %d: %w", p.ID, err)
		} else if reason != "" {
			return in.reviewPlan(ctx, src, p, reason, "")
		}
		curHash := ""
		if exists {
			curHash = hash(cur)
		}
		lastHash = curHash
		switch {
		case curHash == p.After:
			// The write happened before a crash (or the target already
			// holds exactly the new content): only bookkeeping is left.
			return in.record(ctx, src, p.outcome(), p.ID)
		case curHash == p.Before:
			if err := in.backup(p, cur, exists); err != nil {
				return Entry{}, err
			}
			next := p.Content
			if p.Kind == kindDocument {
				next = editDocument(p.Target, cur, string(p.Content))
			}
			if hash(next) != p.After {
				return Entry{}, fmt.Errorf("ingest: plan %d: computed content does not match its after-hash", p.ID)
			}
			// Compare-and-swap: the target is replaced only if it still
			// holds exactly what the plan was made on, so an edit another
			// process made meanwhile is never overwritten; the loop then
			// sees the new content and re-plans or routes to review.
			late, err := in.ws.replaceIf(p.Target, next, func(old []byte, existed bool) bool {
				if !existed {
					return !exists
				}
				return exists && hash(old) == curHash
			})
			if errors.Is(err, durable.ErrConflict) {
				in.log.Info("target changed while being written; looking again", "target", p.Target)
				if len(late) > 0 {
					// Another writer appended to our file in the instant
					// it stood at the target's name: keep that text.
					name, err := in.saveLate(p.Target, late)
					if err != nil {
						return Entry{}, err
					}
					in.keepLate(p.Target, late, name)
				}
				continue
			}
			if err != nil {
				return Entry{}, fmt.Errorf("ingest: write %s: %w", p.Target, err)
			}
			saved := ""
			if len(late) > 0 {
				// Durable first, so a crash cannot lose them; merged
				// into the target once this plan's bookkeeping is done.
				if saved, err = in.saveLate(p.Target, late); err != nil {
					return Entry{}, err
				}
			}
			failpoint.Inject("commit.written")
			e, err := in.record(ctx, src, p.outcome(), p.ID)
			if err == nil && saved != "" {
				in.keepLate(p.Target, late, saved)
			}
			return e, err
		case superseded(p, later, curHash):
			// The write happened, and so did the write of a plan made on
			// top of it in the same batch: only bookkeeping is left.
			// Re-planning here would append p's content a second time.
			in.log.Info("a later plan of the same batch already replaced this plan's write", "plan", p.ID, "target", p.Target)
			return in.record(ctx, src, p.outcome(), p.ID)
		case in.writtenBeforeEdit(p, earlier, later, cur):
			// The write happened (p's, or that of a plan made on top of
			// it), then another writer appended to the document before
			// a crash left the plan unfinished: only bookkeeping is left.
			in.log.Info("the document holds this plan's write followed by another writer's text", "plan", p.ID, "target", p.Target)
			return in.record(ctx, src, p.outcome(), p.ID)
		case p.Kind == kindDocument && p.Replans == 0:
			// Someone appended to the document since the plan was made.
			// Appending is safe to redo on the new content, once.
			in.log.Info("document changed since planned; re-planning", "target", p.Target)
			p.Before = curHash
			p.After = hash(editDocument(p.Target, cur, string(p.Content)))
			p.Backup = ""
			p.Replans++
			if err := in.led.UpdatePlan(ctx, &p.Plan); err != nil {
				return Entry{}, fmt.Errorf("ingest: plan %d: %w", p.ID, err)
			}
		default:
			return in.reviewPlan(ctx, src, p, ReasonHashConflict, curHash)
		}
	}
}

// superseded reports whether cur, the target's content hash, is the
// after-hash of a plan in later that was made on top of p: directly (its
// before-hash is p's after-hash) or through a chain of such plans on the
// same target. Such a plan can only have been written by compare-and-swap
// over p's result, so p's write happened before a crash; a batch plans
// several handoffs to one document this way and a crash can fall between
// their writes.
//
// It is asked only when cur is neither p's before-hash nor its after-hash.
// Documents grow with every append, so a chain of them never repeats a
// hash. A card chain can (A, then B, then A again): a card holding A then
// counts as not yet written, and the chain is written again from the
// start, which leaves the card as the chain leaves it and every plan with
// its backup.
func superseded(p *plan, later []*plan, cur string) bool {
	after := p.After
	for _, q := range later {
		if q.Target != p.Target || q.Before != after {
			continue
		}
		if q.After == cur {
			return true
		}
		after = q.After
	}
	return false
}

// writtenBeforeEdit reports whether cur, a document's content, begins with
// exactly what p, or a plan in later made on top of it (see superseded),
// wrote: the write happened, and another writer appended to the document
// after it, before a crash left p unfinished. What a plan wrote is rebuilt
// from its backup (the content it replaced, durable before the write) and
// its text. A batch backs up only the first plan of a chain on one target:
// a later plan's prior content is what the plan before it wrote, rebuilt
// the same way from the chain's first plan, found among earlier (the plans
// recorded before p). Without this the plan would be re-planned on the new
// content and its text appended a second time. (Text that someone else
// wrote to match a plan's write byte for byte counts as that write.)
func (in *Ingester) writtenBeforeEdit(p *plan, earlier, later []*plan, cur []byte) bool {
	if p.Kind != kindDocument {
		return false
	}
	chain := []*plan{p}
	for i := len(earlier) - 1; i >= 0; i-- {
		if q := earlier[i]; q.Target == p.Target && q.After == chain[0].Before {
			chain = append([]*plan{q}, chain...)
		}
	}
	from := len(chain) - 1 // p's place in the chain
	for _, q := range later {
		if last := chain[len(chain)-1]; q.Target == p.Target && q.Before == last.After {
			chain = append(chain, q)
		}
	}
	var prev []byte // what the plan before q wrote, when known
	for i, q := range chain {
		var before []byte
		switch {
		case q.Before == "":
		case prev != nil && hash(prev) == q.Before:
			before = prev
		default:
			b, ok, err := in.ws.read(layout.BackupsDir + "/" + BackupName(q.SHA256, q.Replans, q.Target))
			if err != nil || !ok || hash(b) != q.Before {
				prev = nil
				continue
			}
			before = b
		}
		written := editDocument(q.Target, before, string(q.Content))
		if hash(written) != q.After {
			prev = nil
			continue
		}
		if i >= from && len(cur) > len(written) && bytes.HasPrefix(cur, written) {
			return true
		}
		prev = written
	}
	return false
}

// keepLate puts back bytes another writer appended to the target's old file
// in the instant it was being replaced. They are already saved under
// .handoff/backups; here they are appended to the target in place, with
// O_APPEND like the writer's own appends, so that no other writer's
// append, then or now, can make them conflict or be lost. Should that
// fail (the target is gone or unsafe), they stay only in backups, and the
// log says so.
func (in *Ingester) keepLate(target string, late []byte, saved string) {
	in.log.Warn("another writer appended while the target was replaced; keeping its text", "target", target, "bytes", len(late))
	if err := in.ws.appendTo(target, late); err != nil {
		in.log.Warn("could not put another writer's late edit back; it is kept in backups", "target", target, "backup", layout.BackupsDir+"/"+saved, "err", err)
	}
}

// BackupName is the file under .handoff/backups that keeps a target's prior
// content for one plan: <sha12>.<replan>.<hash of target>.<readable tail>,
// unique per plan and target and always far below the file system's name
// limit.
func BackupName(sha string, replans int, target string) string {
	tail := strings.ReplaceAll(target, "/", "_")
	if len(tail) > 64 {
		tail = strings.ToValidUTF8(tail[len(tail)-64:], "")
	}
	return sha[:12] + "." + strconv.Itoa(replans) + "." + hash([]byte(target))[:16] + "." + tail
}

// backup keeps the target's current content under .handoff/backups before
// it is replaced. An absent target needs no backup. The backup's name is
// derived from the plan, so a rerun after a crash finds it without a ledger
// update: one fewer commit per handoff.
func (in *Ingester) backup(p *plan, cur []byte, exists bool) error {
	if !exists {
		return nil
	}
	name := BackupName(p.SHA256, p.Replans, p.Target)
	if err := in.ws.write(layout.BackupsDir+"/"+name, cur); err != nil {
		return fmt.Errorf("ingest: backup %s: %w", p.Target, err)
	}
	p.Backup = name
	failpoint.Inject("backup.written")
	return nil
}

// reviewPlan sends a recorded plan's handoff to review; before is the
// target's hash as last seen ("" when unknown or unsafe).
func (in *Ingester) reviewPlan(ctx context.Context, src sourceRow, p *plan, reason, before string) (Entry, error) {
	data, err := in.spool.Get(src.SHA256)
	if err != nil {
		return Entry{}, fmt.Errorf("ingest: %w", err)
	}
	return in.review(ctx, src, data, outcome{Reason: reason, Action: p.Action, Before: before}, p.ID)
}

// review writes the handoff's bytes as a draft for a human and records the
// result. The draft name holds the hash, so rewriting it is idempotent.
func (in *Ingester) review(ctx context.Context, src sourceRow, data []byte, o outcome, planID int64) (Entry, error) {
	o.Result = ResultReview
	o.Target = layout.ReviewDir + "/" + claim.ArchiveName(src.Name, src.SHA256)
	if _, _, err := in.ws.read(o.Target); err != nil {
		return Entry{}, fmt.Errorf("ingest: review draft %s: %w", o.Target, err)
	}
	if err := in.ws.write(o.Target, data); err != nil {
		return Entry{}, fmt.Errorf("ingest: review draft %s: %w", o.Target, err)
	}
	failpoint.Inject("review.written")
	return in.record(ctx, src, o, planID)
}

func unsafeReason(err error) (string, error) {
	var u *errUnsafe
	if errors.As(err, &u) {
		return u.Reason, nil
	}
	return "", err
}

func hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sums returns data's SHA-256 and the hash's state after data without its
// trailing newlines (viewed.tail), in one pass; the state is nil if it
// cannot be kept.
func sums(data []byte) (string, gohash.Cloner) {
	kept := len(bytes.TrimRight(data, "\n"))
	d := sha256.New()
	d.Write(data[:kept])
	tail, ok := d.(gohash.Cloner)
	if ok {
		var err error
		if tail, err = tail.Clone(); err != nil {
			tail = nil
		}
	}
	d.Write(data[kept:])
	return hex.EncodeToString(d.Sum(nil)), tail
}

// appendDocument is AppendDocument on the target v, with the new
// content's SHA-256 and tail state. The hash continues from v's tail, so
// an append costs the appended bytes, not the whole document: a batch
// appends to one document many times, and documents grow with the memory.
// Without a tail (or a copy of it) the whole content is hashed.
func appendDocument(v viewed, content string) (next []byte, sum string, tail gohash.Cloner) {
	next = AppendDocument(v.data, content)
	if v.tail != nil {
		if t, err := v.tail.Clone(); err == nil {
			// next begins with v.data without its trailing newlines,
			// which the tail has hashed.
			from, kept := len(bytes.TrimRight(v.data, "\n")), len(bytes.TrimRight(next, "\n"))
			t.Write(next[from:kept])
			if d, err := t.Clone(); err == nil {
				d.Write(next[kept:])
				return next, hex.EncodeToString(d.Sum(nil)), t
			}
		}
	}
	sum, tail = sums(next)
	return next, sum, tail
}
