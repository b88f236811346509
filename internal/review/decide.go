package review

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/receipts"
)

// Allow are the content screens a person lets through: --allow-secret,
// --allow-hidden, --allow-injection.
type Allow struct {
	Secret, Hidden, Injection bool
}

func (a Allow) override() ingest.Override {
	return ingest.Override{Workspace: true, Secret: a.Secret, Hidden: a.Hidden, Injection: a.Injection}
}

// Outcome is what a decision did.
type Outcome struct {
	Item Item
	// DryRun: nothing was written; Proposal says what accept would do.
	DryRun bool
	// Already: the same decision was made before (a rerun after a crash,
	// say); nothing more was done.
	Already bool
	// Entry is the applied handoff's receipt line (accept and edit): its
	// result (promoted, routed; review when the target changed while it
	// was written and the item waits again), target and hashes.
	Entry receipts.Handoff
	// Edited is the SHA-256 of the handoff an edit made.
	Edited string
	// Proposal is what was (or, in a dry run, would be) applied.
	Proposal *ingest.Proposal
	// Diff is, in a dry run, what the target would become.
	Diff string
	// Recovered are the entries of what a crashed run left, finished first.
	Recovered []receipts.Handoff
	// Superseded are the other versions of the item that waited and are
	// now recorded as superseded by this decision.
	Superseded []string
	// Receipt is the receipt written, if any.
	Receipt string
}

// session is one write command under the workspace lock.
type session struct {
	o       Options
	ws      string
	wsID    string // the workspace's identity
	unlock  func()
	led     *ledger.Ledger
	sp      *ledger.Store
	in      *ingest.Ingester
	runID   string
	started time.Time
	entries []receipts.Handoff
	closers []func()
}

// begin takes the workspace lock for what (the command, for the lock
// file: "review edit 3f2a9c81d0e4"), opens the ledger, spool and
// ingester, and finishes what a crashed run left.
func begin(ctx context.Context, o Options, what string) (*session, error) {
	o.fill()
	ws := o.Workspace
	if _, _, err := workspace.Check(ws); err != nil {
		return nil, err // before the ledger's absence: a path that is no workspace says so
	}
	if _, err := os.Stat(filepath.Join(ws, layout.LedgerFile)); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ledger %s: %w", filepath.Join(ws, layout.LedgerFile), ErrNoLedger)
	}
	id, unlock, err := setup.Lock(ws, false, what)
	if err != nil {
		return nil, err
	}
	s := &session{o: o, ws: ws, wsID: id.ID, unlock: unlock, started: o.Now().UTC()}
	s.runID = newRunID(s.started)
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if s.led, err = ledger.Open(filepath.Join(ws, layout.LedgerFile)); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.led.Close() })
	legacy, err := spool.OpenReadOnly(filepath.Join(ws, layout.SpoolDir))
	if err != nil {
		return nil, err
	}
	if legacy != nil {
		s.closers = append(s.closers, func() { legacy.Close() })
	}
	s.sp = s.led.Store(legacy)
	s.closers = append(s.closers, func() { s.sp.Close() })
	if s.in, err = ingest.New(ingest.Options{Workspace: ws, RunID: s.runID, Log: o.Log, OpenClaw: o.OpenClaw}, s.led, s.sp); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.in.Close() })
	if err := s.led.StartRun(ctx, s.runID, receipts.ModeReview); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	rec, err := s.in.Recover(ctx)
	for _, e := range rec {
		s.entries = append(s.entries, entryOf(e))
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
}

// item finds the item id names, as it is now.
func (s *session) item(ctx context.Context, id string) (Item, error) {
	its, err := items(ctx, s.led, s.ws, true)
	if err != nil {
		return Item{}, err
	}
	return resolve(its, id)
}

// bytes returns the item's exact bytes.
func (s *session) bytes(it Item) ([]byte, error) {
	b := openBytes(s.ws, s.led)
	defer b.close()
	data, _, err := b.get(it)
	return data, err
}

// decision prepares the ledger's record of a decision about it.
func (s *session) decision(it Item, kind, note string) *ledger.Decision {
	draft := ""
	if it.Result == receipts.ResultReview {
		draft = it.Draft
	}
	return &ledger.Decision{SHA256: it.SHA256, Decision: kind, By: s.o.By, Note: note, RunID: s.runID,
		FromResult: it.Result, FromReason: it.Reason, Draft: draft}
}

// finish takes the decided drafts out of the review inbox and writes the
// receipt of whatever was recorded.
func (s *session) finish(ctx context.Context, out *Outcome) error {
	failpoint.Inject("review.decided")
	if err := s.in.RemoveDecidedDrafts(ctx); err != nil {
		return err
	}
	return s.writeReceipt(ctx, out)
}

// writeReceipt writes the session's receipt, if it recorded anything, and
// closes its run in the ledger.
func (s *session) writeReceipt(ctx context.Context, out *Outcome) error {
	path := ""
	status := receipts.StatusEmpty
	if len(s.entries) > 0 {
		b := receipts.NewBuilder(s.runID, receipts.ModeReview, s.started, s.o.Manifest, s.ws, s.wsID)
		b.AddHandoffs(s.entries...)
		b.Judge(nil)
		r := b.Finish(s.o.Now())
		status = r.Status
		var err error
		if path, err = receipts.WriteRun(filepath.Join(s.ws, layout.ReceiptsDir), r); err != nil {
			return err
		}
		if out != nil {
			out.Receipt = path
		}
	}
	if err := s.led.FinishRun(ctx, s.runID, receipts.OutcomeOK, status, path); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// refuse ends a session that decided nothing (its recovery may have).
func (s *session) refuse(ctx context.Context, err error) error {
	if werr := s.writeReceipt(ctx, nil); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

func entryOf(e ingest.Entry) receipts.Handoff {
	return receipts.Handoff{Host: e.Host, Inbox: e.Inbox, Name: e.Name, SHA256: e.SHA256, Size: e.Size,
		Result: e.Result, Reason: e.Reason, Action: e.Action, Target: e.Target,
		BeforeSHA256: e.BeforeSHA256, AfterSHA256: e.AfterSHA256, ArchivedAs: e.ArchivedAs}
}

// itemEntry is the receipt line of an item that keeps its result (a
// reject, the original of an edit): target its draft, before_sha256 the
// hash of the card or document it names as it is now.
func itemEntry(it Item, before string) receipts.Handoff {
	target := it.Draft
	if it.Result == receipts.ResultMalformed {
		target = ""
	}
	return receipts.Handoff{Host: it.Host, Inbox: it.Inbox, Name: it.Name, SHA256: it.SHA256, Size: it.Size,
		Result: it.Result, Reason: it.Reason, Action: it.Action, Target: target,
		BeforeSHA256: before, ArchivedAs: it.src.ArchivedAs}
}

func (s *session) receiptDecision(d *ledger.Decision) *receipts.Decision {
	ov := []string{}
	if d.Overrides != "" {
		ov = strings.Split(d.Overrides, ",")
	}
	return &receipts.Decision{Decision: d.Decision, By: d.By, At: d.At.UTC(), Note: d.Note, WaitedAs: d.FromResult,
		Reason: d.FromReason, Overrides: ov, Draft: d.Draft}
}

// waitingOr returns nil when it waits, an Outcome when the same decision
// was made already, and a DecidedError otherwise.
func waitingOr(it Item, kind string) (*Outcome, error) {
	switch {
	case it.State == "waiting":
		return nil, nil
	case it.State == kind && kind != ledger.DecisionEdited:
		return &Outcome{Item: it, Already: true}, nil
	}
	return nil, &DecidedError{Item: it}
}

// waiting finds item id, which a decision of kind is about, and its
// bytes. done is set when there is nothing to do (the item was decided so
// already); an error has ended the session (refuse), as done has.
func (s *session) waiting(ctx context.Context, id, kind string) (it Item, data []byte, done *Outcome, err error) {
	if it, err = s.item(ctx, id); err != nil {
		return it, nil, nil, s.refuse(ctx, err)
	}
	if out, err := waitingOr(it, kind); out != nil || err != nil {
		return it, nil, out, s.refuse(ctx, err)
	}
	if data, err = s.bytes(it); err != nil {
		return it, nil, nil, s.refuse(ctx, err)
	}
	return it, data, nil, nil
}

// AcceptOptions are accept's flags.
type AcceptOptions struct {
	Note   string
	DryRun bool
	Allow  Allow
}

// Accept applies a waiting item now, through the ingester's plan and
// commit, the person's word relaxing the card's state and the screens a
// flag allows. What cannot be applied as it is comes back as a
// *BlockedError, nothing written. With DryRun it says what it would do and
// writes nothing at all.
func Accept(ctx context.Context, o Options, id string, a AcceptOptions) (*Outcome, error) {
	if a.DryRun {
		return acceptDryRun(ctx, o, id, a)
	}
	s, err := begin(ctx, o, "review accept "+id)
	if err != nil {
		return nil, err
	}
	defer s.close()
	it, data, done, err := s.waiting(ctx, id, ledger.DecisionAccepted)
	if done != nil || err != nil {
		return done, err
	}
	d := s.decision(it, ledger.DecisionAccepted, a.Note)
	b := openBytes(s.ws, s.led)
	earlier, err := revises(ctx, s.led, b, it)
	b.close()
	if err != nil {
		return nil, s.refuse(ctx, err)
	}
	e, pr, err := s.in.Decide(ctx, ingest.Decision{Source: it.src, Data: data, Override: a.Allow.override(), Record: d, Earlier: earlier})
	if errors.Is(err, ingest.ErrBlocked) {
		return &Outcome{Item: it, Proposal: pr}, s.refuse(ctx, &BlockedError{Item: it, Proposal: pr})
	}
	if err != nil {
		return nil, err
	}
	out := &Outcome{Item: it, Proposal: pr, Entry: entryOf(e)}
	out.Entry.Decision = s.receiptDecision(d)
	s.entries = append(s.entries, out.Entry)
	if out.Superseded, err = s.supersede(ctx, it, "accepted"); err != nil {
		return out, s.refuse(ctx, err)
	}
	if err := s.finish(ctx, out); err != nil {
		return out, err
	}
	return out, nil
}

// supersede records every other version of it that still waits as
// superseded by it (decided how), and returns their ids. It runs once
// it's decision is recorded; a crash in between leaves them waiting, to
// be decided on their own.
func (s *session) supersede(ctx context.Context, it Item, how string) ([]string, error) {
	var ids []string
	for _, v := range it.Versions {
		if v.State != "waiting" {
			continue
		}
		other, err := s.item(ctx, v.ID)
		if err != nil {
			return ids, err
		}
		if other.State != "waiting" {
			continue
		}
		data, err := s.bytes(other)
		if err != nil {
			return ids, err
		}
		if err := s.keep(other, data); err != nil {
			return ids, err
		}
		before, target := s.named(other, data)
		d := s.decision(other, ledger.DecisionSuperseded, fmt.Sprintf("superseded by %s (%s)", it.ID, how))
		d.Result, d.Reason, d.Target, d.Before = other.Result, other.Reason, target, before
		if err := s.led.StartDecision(ctx, d, nil, nil); err != nil {
			return ids, err
		}
		e := itemEntry(other, before)
		e.Decision = s.receiptDecision(d)
		s.entries = append(s.entries, e)
		ids = append(ids, other.ID)
	}
	return ids, nil
}

// acceptDryRun inspects what accept would do, under the lock taken as a
// dry-run sync takes it (an existing lock file only), writing nothing.
func acceptDryRun(ctx context.Context, o Options, id string, a AcceptOptions) (*Outcome, error) {
	o.fill()
	_, unlock, err := setup.Lock(o.Workspace, true, "review accept --dry-run")
	if err != nil {
		return nil, err
	}
	defer unlock()
	v, err := ledger.OpenReadOnly(filepath.Join(o.Workspace, layout.LedgerFile), true)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	its, err := items(ctx, v, o.Workspace, true)
	if err != nil {
		return nil, err
	}
	it, err := resolve(its, id)
	if err != nil {
		return nil, err
	}
	if out, err := waitingOr(it, ledger.DecisionAccepted); out != nil || err != nil {
		if out != nil {
			out.DryRun = true
		}
		return out, err
	}
	b := openBytes(o.Workspace, v)
	defer b.close()
	data, _, err := b.get(it)
	if err != nil {
		return nil, err
	}
	in, err := ingest.New(ingest.Options{Workspace: o.Workspace, DryRun: true, OpenClaw: o.OpenClaw}, nil, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	pr, _, err := propose(ctx, in, v, b, it, data, a.Allow.override())
	if err != nil {
		return nil, err
	}
	out := &Outcome{Item: it, DryRun: true, Proposal: pr}
	if !pr.OK() {
		return out, &BlockedError{Item: it, Proposal: pr}
	}
	out.Diff = UnifiedDiff(pr.Target+" (as it is now)", pr.Target+" (as it would be)", pr.Current, pr.Next)
	return out, nil
}

// Reject takes a waiting item out of the review inbox (its draft goes; its
// bytes stay in the spool) and records why. The note is required.
func Reject(ctx context.Context, o Options, id, note string) (*Outcome, error) {
	s, err := begin(ctx, o, "review reject "+id)
	if err != nil {
		return nil, err
	}
	defer s.close()
	it, data, done, err := s.waiting(ctx, id, ledger.DecisionRejected)
	if done != nil || err != nil {
		return done, err
	}
	if err := s.keep(it, data); err != nil {
		return nil, s.refuse(ctx, err)
	}
	before, target := s.named(it, data)
	d := s.decision(it, ledger.DecisionRejected, note)
	d.Result, d.Reason, d.Target, d.Before = it.Result, it.Reason, target, before
	if err := s.led.StartDecision(ctx, d, nil, nil); err != nil {
		return nil, s.refuse(ctx, err)
	}
	out := &Outcome{Item: it, Entry: itemEntry(it, before)}
	out.Entry.Decision = s.receiptDecision(d)
	s.entries = append(s.entries, out.Entry)
	return out, s.finish(ctx, out)
}

// keep makes sure the spool holds an item's bytes before its draft goes.
func (s *session) keep(it Item, data []byte) error {
	has, err := s.sp.Has(it.SHA256)
	if err != nil || has {
		return err
	}
	return s.sp.Put(map[string][]byte{it.SHA256: data})
}

// named returns the hash of the card or document the item names, as it is
// now, and its path ("" when it names none that may be read).
func (s *session) named(it Item, data []byte) (string, string) {
	pr, err := s.in.Inspect(it.src, data, ingest.Override{Workspace: true})
	if err != nil || pr.Target == "" {
		return "", ""
	}
	return pr.Before, pr.Target
}

// lintError is the LintError of an edited text kept at file, whose
// proposal pr (made with allow) has problems; its Flags are those of allow
// and those pr needs, when flags alone would let it through.
func lintError(it Item, pr *ingest.Proposal, file string, allow Allow) *LintError {
	e := &LintError{Item: it, Problems: pr.Blocking, Kept: file}
	if pr.NeedsEdit() {
		return e
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{allow.Secret, "allow-secret"}, {allow.Hidden, "allow-hidden"}, {allow.Injection, "allow-injection"}} {
		if f.on {
			e.Flags = append(e.Flags, f.name)
		}
	}
	for _, f := range pr.Flags() {
		if !slices.Contains(e.Flags, f) {
			e.Flags = append(e.Flags, f)
		}
	}
	return e
}

// EditOptions are edit's flags. Editor opens the file at path for the
// person and returns once they are done.
type EditOptions struct {
	Note   string
	Allow  Allow
	Editor func(path string) error
	// Resume starts from the text a failed edit of the item kept
	// (FindKept) instead of from the handoff; a *NoKeptError when there
	// is none.
	Resume bool
	// Offer, when set and Resume is not, is asked whether to start from
	// a kept text there is; true takes it.
	Offer func(k Kept) bool
}

// Edit opens the item (its draft when someone edited that by hand, else
// its exact bytes) in the person's editor, on a private copy, while it
// holds the workspace lock. Once saved, the edited text is linted (the
// checks of `handoff lint`, the screens the flags allow let through) and,
// when clean, applied as a new handoff through the ingester's plan and
// commit, the person's word relaxing the card's state as accept does. Its
// source names the original's host, inbox and name (`handoff where` shows
// both); the original is decided as edited. With problems, nothing is
// applied, the item still waits, and the edited text is kept (LintError).
// A later Edit may start from that kept text (Resume, or Offer), which
// goes once its text is applied or kept anew.
func Edit(ctx context.Context, o Options, id string, eo EditOptions) (*Outcome, error) {
	s, err := begin(ctx, o, "review edit "+id)
	if err != nil {
		return nil, err
	}
	defer s.close()
	it, data, done, err := s.waiting(ctx, id, ledger.DecisionEdited)
	if done != nil || err != nil {
		return done, err
	}
	start := data
	kept, hasKept := FindKept(it)
	switch {
	case hasKept && (eo.Resume || eo.Offer != nil && eo.Offer(kept)):
		if start, err = readKept(kept.Path); err != nil {
			return nil, s.refuse(ctx, fmt.Errorf("resume the kept edit: %w", err))
		}
	case eo.Resume:
		return nil, s.refuse(ctx, &NoKeptError{Item: it, Dir: os.TempDir()})
	default:
		hasKept = false
		b := openBytes(s.ws, s.led)
		if draft, ok := b.draft(it); ok {
			start = draft // a hand edit is not lost
		}
		b.close()
	}
	dir, err := os.MkdirTemp("", keptPrefix)
	if err != nil {
		return nil, s.refuse(ctx, err)
	}
	keep, applied := false, false
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
		// The text resumed lives on in this edit's copy, or was applied.
		if hasKept && (keep || applied) {
			if err := removeKept(kept.Path); err != nil {
				s.o.Log.Warn("could not remove the resumed edit's copy", "err", err)
			}
		}
	}()
	file := filepath.Join(dir, claim.ArchiveName(it.Name, it.SHA256))
	if err := os.WriteFile(file, start, 0o600); err != nil {
		return nil, s.refuse(ctx, err)
	}
	if err := eo.Editor(file); err != nil {
		return nil, s.refuse(ctx, fmt.Errorf("editor: %w; nothing was applied and %s still waits", err, it.ID))
	}
	edited, err := os.ReadFile(file)
	if err != nil {
		return nil, s.refuse(ctx, err)
	}
	if bytes.Equal(edited, data) {
		ue := &UnchangedError{Item: it}
		// What accept would need to apply it as it is: the flags of the
		// screens it fails, or an edit.
		if pr, err := s.in.Inspect(it.src, data, ingest.Override{Workspace: true}); err == nil && !pr.OK() {
			ue.Flags, ue.NeedsEdit = pr.Flags(), pr.NeedsEdit()
		}
		return nil, s.refuse(ctx, ue)
	}
	newSHA := sum(edited)
	if known, err := s.led.HasContent(ctx, newSHA); err != nil || known {
		if err == nil {
			keep = true
			err = fmt.Errorf("the edited text is byte for byte a handoff already stored (%s; `handoff where %s`): nothing was applied and %s still waits; your text is kept in %s", newSHA[:12], newSHA[:12], it.ID, file)
		}
		return nil, s.refuse(ctx, err)
	}
	src := ledger.SourceRow{SHA256: newSHA, Size: int64(len(edited)), Host: it.Host, Inbox: it.Inbox, Name: it.Name}
	pr, err := s.in.Inspect(src, edited, eo.Allow.override())
	if err != nil {
		return nil, s.refuse(ctx, err)
	}
	if !pr.OK() {
		keep = true
		return &Outcome{Item: it, Proposal: pr}, s.refuse(ctx, lintError(it, pr, file, eo.Allow))
	}
	d := s.decision(it, ledger.DecisionEdited, eo.Note)
	d.NewSHA256 = newSHA
	e, pr, err := s.in.Decide(ctx, ingest.Decision{Source: src, Data: edited, Override: eo.Allow.override(), Record: d, Edited: true})
	if errors.Is(err, ingest.ErrBlocked) {
		keep = true
		return &Outcome{Item: it, Proposal: pr}, s.refuse(ctx, lintError(it, pr, file, eo.Allow))
	}
	if err != nil {
		return nil, err
	}
	applied = true
	out := &Outcome{Item: it, Proposal: pr, Entry: entryOf(e), Edited: newSHA}
	rd := s.receiptDecision(d)
	orig := itemEntry(it, pr.Before)
	orig.Decision = &receipts.Decision{Decision: rd.Decision, By: rd.By, At: rd.At, Note: rd.Note, WaitedAs: rd.WaitedAs,
		Reason: rd.Reason, Overrides: []string{}, Draft: rd.Draft, EditedSHA256: newSHA}
	rd.Draft, rd.OriginalSHA256, rd.WaitedAs, rd.Reason = "", it.SHA256, "", ""
	out.Entry.Decision = rd
	s.entries = append(s.entries, orig, out.Entry)
	if out.Superseded, err = s.supersede(ctx, it, "edited"); err != nil {
		return out, s.refuse(ctx, err)
	}
	return out, s.finish(ctx, out)
}
