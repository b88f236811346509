package ingest

// A person's decisions about handoffs that wait for review (`handoff
// review`, internal/review) go through the ingester's own plan and commit:
// Inspect decides what accepting a handoff now would do, with an Override
// that relaxes exactly the rules the person's word covers; Decide records
// the plan together with the decision and applies it as a sync would
// (backup, compare-and-swap, bookkeeping, crash recovery by the next Run or
// Recover); RemoveDecidedDrafts takes decided handoffs' drafts out of the
// review inbox.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
)

// Override is a person's word on one handoff that waits for review: it
// relaxes the rules it names, and no other.
type Override struct {
	// Workspace relaxes the rules about the target card's state: a stale
	// update-card (hash-conflict) is planned on the card as it is now, a
	// create-card whose card exists (card-exists) replaces it, an
	// update-card whose card is missing (card-missing) creates it. The
	// person has seen the card as it is now (`handoff review show`).
	Workspace bool
	// Secret, Hidden and Injection let secret-like, hidden-character and
	// injection-like content through (--allow-secret, --allow-hidden,
	// --allow-injection).
	Secret, Hidden, Injection bool
}

// Flags that relax the content screens, as the CLI spells them.
const (
	FlagAllowSecret    = "allow-secret"
	FlagAllowHidden    = "allow-hidden"
	FlagAllowInjection = "allow-injection"
)

// ScreenFlag is the flag that lets a screened reason through, or "" when no
// flag does.
func ScreenFlag(reason string) string {
	switch reason {
	case ReasonSecretLike:
		return FlagAllowSecret
	case ReasonHiddenCharacters:
		return FlagAllowHidden
	case ReasonInjectionLike:
		return FlagAllowInjection
	}
	return ""
}

// IsWorkspaceReason reports whether a reason is about the target card's
// state, which a person's accept overrides (Override.Workspace).
func IsWorkspaceReason(reason string) bool {
	switch reason {
	case ReasonHashConflict, ReasonCardExists, ReasonCardMissing, ReasonRevised, ReasonBootstrapCap, ReasonPrivateAppend, ReasonPrivateCard:
		return true
	}
	return false
}

// relaxes reports whether ov lets a problem with this reason through.
func (ov Override) relaxes(reason string) bool {
	switch reason {
	case ReasonSecretLike:
		return ov.Secret
	case ReasonHiddenCharacters:
		return ov.Hidden
	case ReasonInjectionLike:
		return ov.Injection
	}
	return ov.Workspace && IsWorkspaceReason(reason)
}

// Names lists the rules ov relaxes, for the ledger and the receipt:
// "workspace", "allow-secret", "allow-hidden", "allow-injection".
func (ov Override) Names() []string {
	var out []string
	if ov.Workspace {
		out = append(out, "workspace")
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{ov.Secret, FlagAllowSecret}, {ov.Hidden, FlagAllowHidden}, {ov.Injection, FlagAllowInjection}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// Proposal is what accepting a stored handoff now would do (Inspect).
type Proposal struct {
	SHA256 string
	// Handoff is the parsed handoff; nil when the bytes do not parse, and
	// ParseError then says why.
	Handoff    *Handoff
	ParseError string
	// Problems are every reason not to apply the handoff as it is now:
	// validation's, most important first, then the planner's (the target's
	// state, or an unsafe target).
	Problems []Problem
	// Blocking are the problems the override does not relax. While any is
	// left, Decide refuses.
	Blocking []Problem
	// Identical: the card already holds exactly the handoff's content, so
	// accepting it writes nothing.
	Identical bool
	// Replaces is, for a revision of a document append, the earlier
	// version whose appended text the plan replaces in place (Kind
	// "document-replace", Next the whole document); AppendOnly, when the
	// earlier version appended and the plan cannot replace its text, says
	// why accept appends instead.
	Replaces   string
	AppendOnly string
	// Kind ("card" or "document"), Action and Target are what the handoff
	// would change; empty when it names no target a handoff may write.
	Kind, Action, Target string
	// Exists, Current and Before are the target as it is now (Before ""
	// when absent); Next and After as the handoff would leave it, computed
	// even when blocked, so that a person sees what it would do (nil and
	// "" when the target cannot be planned on).
	Exists  bool
	Current []byte
	Before  string
	Next    []byte
	After   string

	p  *plan // the plan Decide records; nil when blocked
	ov Override
}

// OK reports whether Decide would apply the proposal.
func (p *Proposal) OK() bool { return p != nil && len(p.Blocking) == 0 && p.p != nil }

// Flags are the flags that would relax the blocking problems no edit is
// needed for (allow-secret, …), in the order of the problems.
func (p *Proposal) Flags() []string {
	var out []string
	for _, pr := range p.Blocking {
		if f := ScreenFlag(pr.Reason); f != "" && !strings.Contains(strings.Join(out, ","), f) {
			out = append(out, f)
		}
	}
	return out
}

// Relaxed names the rules the override relaxed for this proposal, each
// once, as Override.Names spells them: the ones a problem needed.
func (p *Proposal) Relaxed() []string {
	var out []string
	add := func(n string) {
		for _, o := range out {
			if o == n {
				return
			}
		}
		out = append(out, n)
	}
	for _, pr := range p.Problems {
		if !p.ov.relaxes(pr.Reason) {
			continue
		}
		if f := ScreenFlag(pr.Reason); f != "" {
			add(f)
		} else {
			add("workspace")
		}
	}
	return out
}

// NeedsEdit reports whether a blocking problem is one no flag relaxes: the
// handoff cannot be accepted as it is.
func (p *Proposal) NeedsEdit() bool {
	for _, pr := range p.Blocking {
		if ScreenFlag(pr.Reason) == "" && !IsWorkspaceReason(pr.Reason) {
			return true
		}
	}
	return false
}

// IsHiddenRune reports whether the hidden-characters screen flags r
// wherever it stands (invisible, bidirectional and control characters but
// tab, newline and carriage return).
func IsHiddenRune(r rune) bool { return isHiddenRune(r) }

// ErrBlocked means a proposal has problems its override does not relax.
var ErrBlocked = errors.New("cannot be applied as it is")

// Inspect decides what applying data (the bytes of src) now would do under
// ov, reading the workspace as it is on disk. It writes nothing, and needs
// neither the ledger nor the spool: an Ingester opened with DryRun and
// nil ledger and spool may Inspect.
func (in *Ingester) Inspect(src ledger.SourceRow, data []byte, ov Override) (*Proposal, error) {
	return in.InspectRevision(src, data, ov, nil)
}

// InspectRevision is Inspect for a handoff that revises the version e
// (nil when it revises none). When e appended to the document this one
// names, and the document still holds e's text exactly once, the proposal
// replaces that text in place (Replaces); else it appends and AppendOnly
// says why. Review's show, accept --dry-run and accept all ask this, so
// that they describe one change.
func (in *Ingester) InspectRevision(src ledger.SourceRow, data []byte, ov Override, e *Earlier) (*Proposal, error) {
	pr := &Proposal{SHA256: src.SHA256, ov: ov}
	h, err := Parse(data)
	if err != nil {
		msg := err.Error()
		if pe, ok := errors.AsType[*ParseError](err); ok {
			msg = pe.Msg
		}
		pr.ParseError = msg
		pr.Problems = []Problem{{Reason: ReasonParseError, Message: msg}}
		pr.Blocking = pr.Problems
		return pr, nil
	}
	pr.Handoff, pr.Action = h, h.Action
	pr.Problems = h.Validate()
	if t := NamedTarget(h); t != "" {
		// The planner's view, as a sync would have it (no override), for
		// the reason; then with the workspace rules relaxed, for what the
		// handoff would do.
		p, reason, err := in.planWith(src, h, in.readDisk, Override{})
		if err != nil {
			return nil, err
		}
		switch {
		case reason == ReasonCardIdentical:
			pr.Identical = true
		case reason != "":
			pr.Problems = append(pr.Problems, in.planProblem(reason, h, p))
		}
		if reason == "" || IsWorkspaceReason(reason) || reason == ReasonCardIdentical {
			if p, _, err = in.planWith(src, h, in.readDisk, Override{Workspace: true}); err != nil {
				return nil, err
			}
			pr.Kind, pr.Target = p.Kind, p.Target
			pr.Exists, pr.Current, pr.Before = p.Before != "", p.cur, p.Before
			pr.Next, pr.After = p.next, p.After
			pr.p = p
		} else if p != nil {
			pr.Kind, pr.Target = p.Kind, p.Target
		}
	}
	if e != nil && e.Result == ResultRouted && h.Document != nil && h.Card == nil {
		inspectRevision(pr, h, e)
	}
	for _, prob := range pr.Problems {
		if !ov.relaxes(prob.Reason) {
			pr.Blocking = append(pr.Blocking, prob)
		}
	}
	if pr.p == nil && len(pr.Blocking) == 0 {
		// Nothing to plan on and nothing said why (no-card without a
		// document is a no-target problem; be safe).
		pr.Blocking = append(pr.Blocking, Problem{Reason: ReasonNoTarget, Message: "the handoff names no target to apply it to"})
	}
	if len(pr.Blocking) > 0 || (!ov.Workspace && pr.Identical) {
		pr.p = nil
	}
	return pr, nil
}

// inspectRevision makes pr, the proposal of a document append h whose
// earlier version e appended already, the replacement of e's text when it
// can be, and says so among the problems (revised, which the person's
// word on the workspace relaxes).
func inspectRevision(pr *Proposal, h *Handoff, e *Earlier) {
	pr.Problems = append(pr.Problems, problemf(ReasonRevised, SectionTargetDocument,
		"a revision of %.12s, which already appended its text to %s", e.SHA256, e.Target))
	if pr.p == nil || pr.p.Kind != kindDocument {
		return
	}
	rp, why := replacePlan(pr.p, e, h)
	if rp == nil {
		pr.AppendOnly = why
		return
	}
	pr.p, pr.Kind, pr.Replaces = rp, rp.Kind, e.SHA256
	pr.Next, pr.After = rp.next, rp.After
	pr.Identical = rp.After == rp.Before
}

// planProblem words a planner's reason for a person.
func (in *Ingester) planProblem(reason string, h *Handoff, p *plan) Problem {
	target := ""
	if p != nil {
		target = p.Target
	}
	field := SectionTargetCard
	if h.Card == nil {
		field = SectionTargetDocument
	}
	switch reason {
	case ReasonHashConflict:
		return problemf(reason, SectionExpectedSHA, "%s now hashes to %s, not the %s the writer expected: someone changed it since the writer read it", target, p.Before, h.Card.ExpectedSHA256)
	case ReasonCardExists:
		return problemf(reason, field, "%s already exists, with other content than the handoff's", target)
	case ReasonCardMissing:
		return problemf(reason, field, "%s does not exist, so there is nothing to update", target)
	case ReasonBootstrapCap:
		return problemf(reason, field, "%s", capMessage(target, p.overflow))
	case ReasonPrivateCard:
		return problemf(reason, field, "%s is shown on every host's mirror, and this handoff is private to its host: accepting it changes the card and keeps it off the other hosts' mirrors from then on", target)
	case ReasonPrivateAppend:
		return problemf(reason, field, "%s is shown on every host's mirror, and this handoff is private to its host: accepting it appends it and keeps %s off the other hosts' mirrors from then on", target, target)
	}
	_, _, err := in.ws.read(target)
	var u *errUnsafe
	if errors.As(err, &u) {
		return problemf(reason, field, "%s", u.Msg)
	}
	return problemf(reason, field, "%s", Reasons[reason])
}

// Decision is what Decide records: a person's decision about the handoff
// Source (a waiting handoff; for an edit, the edited handoff, not stored
// yet) whose bytes are Data, under Override. Record is the ledger's row;
// Decide fills in its ids.
type Decision struct {
	Source   ledger.SourceRow
	Data     []byte
	Override Override
	Record   *ledger.Decision
	// Edited: Source is an edited handoff (ID 0), stored and recorded as a
	// new source with the decision.
	Edited bool
	// Earlier is the version Source revises, if any (InspectRevision).
	Earlier *Earlier
}

// Decide applies a person's decision now, through the ingester's own plan
// and commit. It inspects the handoff again (the caller holds the
// workspace lock), and refuses with ErrBlocked, writing nothing, while a
// problem is left that the override does not relax. Else it makes sure
// the spool holds the bytes (an edited handoff is stored first), records
// the plan with the decision as started, in one transaction, and applies
// the plan as a sync would: backup, compare-and-swap, and bookkeeping that
// finishes the decision in the same transaction as the plan's. A crash
// after the plan is recorded is finished by the next Run or Recover;
// before, nothing is recorded and the handoff still waits. It returns the
// plan's entry: promoted or routed, or review when the target changed
// while it was written (the decision is then abandoned and the handoff
// waits again).
func (in *Ingester) Decide(ctx context.Context, d Decision) (_ Entry, _ *Proposal, err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrBlocked) {
			in.unclean = true
		}
	}()
	pr, err := in.InspectRevision(d.Source, d.Data, d.Override, d.Earlier)
	if err != nil {
		return Entry{}, nil, err
	}
	if !pr.OK() {
		return Entry{}, pr, ErrBlocked
	}
	if in.opts.DryRun {
		return Entry{}, pr, fmt.Errorf("ingest: Decide in a dry run")
	}
	has, err := in.spool.Has(d.Source.SHA256)
	if err != nil {
		return Entry{}, pr, fmt.Errorf("ingest: %w", err)
	}
	if !has {
		// An edited handoff, or a waiting one whose spool copy was
		// pruned (its draft holds the bytes): stored before anything
		// refers to it.
		if err := in.spool.Put(map[string][]byte{d.Source.SHA256: d.Data}); err != nil {
			return Entry{}, pr, fmt.Errorf("ingest: %w", err)
		}
	}
	if d.Edited {
		failpoint.Inject("review.edit-stored")
	}
	var edited *claim.Source
	if d.Edited {
		s := d.Source
		edited = &claim.Source{Host: s.Host, Inbox: s.Inbox, Name: s.Name, SHA256: s.SHA256, Size: s.Size}
	}
	p := pr.p
	if d.Record.Target == "" {
		d.Record.Target = p.Target
	}
	d.Record.Overrides = strings.Join(pr.Relaxed(), ",")
	if err := in.led.StartDecision(ctx, d.Record, &p.Plan, edited); err != nil {
		return Entry{}, pr, fmt.Errorf("ingest: %w", err)
	}
	failpoint.Inject("review.planned")
	src := d.Source
	src.ID = p.SourceID
	e, err := in.apply(ctx, src, p, nil, nil)
	if err == nil {
		in.noteCards([]Entry{e})
		in.UpdateCardIndex()
	}
	return e, pr, err
}

// Recover finishes what a crashed run, sync or review, left: it removes
// temporary files (before its first Run only), finishes every open plan,
// and removes the drafts of decided handoffs (RemoveDecidedDrafts). Run
// does all of this first; `handoff review` calls it before it decides
// anything. It returns the entries of the plans it finished.
func (in *Ingester) Recover(ctx context.Context) (_ []Entry, err error) {
	defer func() {
		if err != nil {
			in.unclean = true
		}
	}()
	// Temporary files are a crashed process's leftovers only before this
	// Ingester's first Run; after it they are its own retired files.
	if !in.tempsRemoved {
		if err := in.removeLeftTemps(ctx); err != nil {
			return nil, fmt.Errorf("ingest: remove temporary files: %w", err)
		}
		in.tempsRemoved = true
		if _, err := in.moveLegacyDrafts(ctx); err != nil {
			return nil, err
		}
	}
	var out []Entry
	open, err := in.led.OpenPlans(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	plans := make([]*plan, len(open))
	for i, lp := range open {
		plans[i] = &plan{Plan: *lp}
	}
	for i, p := range plans {
		src, err := in.led.Source(ctx, p.SourceID)
		if err != nil {
			return out, fmt.Errorf("ingest: plan %d: %w", p.ID, err)
		}
		in.log.Info("finishing interrupted plan", "plan", p.ID, "target", p.Target)
		e, err := in.apply(ctx, src, p, plans[:i], plans[i+1:])
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	if !in.draftsChecked {
		if err := in.RemoveDecidedDrafts(ctx); err != nil {
			return out, err
		}
		in.draftsChecked = true
	}
	return out, nil
}

// removeLeftTemps removes the temporary files a crash or a failure may
// have left in the directories the ingester and the receipts write
// (workspace.removeTemps), when one may have: an ingester left
// layout.IngestingFile (it wrote and did not close cleanly), or the run
// before this one did not finish (it may have died writing its
// receipt). Otherwise there are none to find, and those directories,
// which grow with the memory (every card, backup and receipt), are not
// listed.
func (in *Ingester) removeLeftTemps(ctx context.Context) error {
	if in.opts.DryRun {
		return nil
	}
	left, err := in.ws.leftMarked()
	if err != nil {
		return err
	}
	if !left && in.led != nil {
		finished, err := in.led.PreviousRunFinished(ctx, in.opts.RunID)
		if err != nil {
			return err
		}
		left = !finished
	}
	if !left && in.led != nil {
		return nil
	}
	return in.ws.removeTemps()
}

// RemoveDecidedDrafts removes from the review inbox the draft of every
// handoff a person has decided about whose draft is still there, and
// records that it did. A draft that no longer holds the handoff's bytes
// (someone edited it by hand) is left in place, and the log says so. A
// dry run removes nothing.
func (in *Ingester) RemoveDecidedDrafts(ctx context.Context) error {
	if in.opts.DryRun {
		return nil
	}
	ds, err := in.led.DraftsToRemove(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	for _, d := range ds {
		if err := in.removeDraft(d); err != nil {
			return err
		}
		failpoint.Inject("review.draft-removed")
		if err := in.led.DraftRemoved(ctx, d.ID); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	return nil
}

func (in *Ingester) removeDraft(d ledger.Decision) error {
	if !strings.HasPrefix(d.Draft, layout.ReviewDir+"/") {
		in.log.Warn("a decision names a draft outside the review inbox; left alone", "draft", d.Draft)
		return nil
	}
	data, exists, err := in.ws.read(d.Draft)
	if _, uerr := unsafeReason(err); uerr != nil {
		return fmt.Errorf("ingest: review draft %s: %w", d.Draft, uerr)
	}
	switch {
	case err != nil:
		in.log.Warn("review draft is not a regular file; left in place", "draft", d.Draft, "err", err)
		return nil
	case !exists:
		return nil
	case hash(data) != d.SHA256:
		in.log.Warn("review draft was edited by hand; left in place", "draft", d.Draft, "decision", d.Decision)
		return nil
	}
	if err := in.ws.root.Remove(d.Draft); err != nil {
		return fmt.Errorf("ingest: remove review draft %s: %w", d.Draft, err)
	}
	if err := durable.SyncDir(in.ws.root, path.Dir(d.Draft)); err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	return nil
}
