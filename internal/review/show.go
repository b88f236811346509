package review

import (
	"context"
	"syscall"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/receipts"
)

const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// Detail is one item as Show gives it.
type Detail struct {
	Item Item
	// Data is the handoff's exact bytes (Safe before printing).
	Data []byte
	// Why says the reason in words; Resolve what would resolve it.
	Why, Resolve string
	// Proposal is what `handoff review accept` (with the flags it needs)
	// would do now: Proposal.Problems every reason it waits, Blocking
	// those the accept alone does not relax, Current and Next the target
	// now and after.
	Proposal *ingest.Proposal
	// Diff is the unified diff from the target as it is now to what the
	// handoff would leave (a card: the whole card; a document: the text
	// appended at its end); "" when there is nothing to compare.
	Diff string
	// Lost counts the lines of the card as it is now that the handoff's
	// card does not keep (an update replaces the whole card); Added the
	// lines the diff adds (a document append's blank separator included).
	Lost, Added int
	// Decisions are every decision about it, oldest first (abandoned ones
	// too).
	Decisions []Decision
	// Earlier is, for a revision (reason revised), the version it
	// revises: what became of it and the diff from its bytes to these.
	Earlier *Earlier
}

// Earlier is the version a revision revises.
type Earlier struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
	// Result, Reason, Action and Target are what became of it: promoted
	// or routed to Target (what it already wrote there), review, ...
	Result string `json:"result"`
	Reason string `json:"reason"`
	Action string `json:"action"`
	Target string `json:"target"`
	// After is the target's hash once it was applied.
	After string `json:"after_sha256,omitempty"`
	// Diff is the unified diff from its bytes to the revision's; "" when
	// its bytes are no longer stored (pruned).
	Diff string `json:"diff"`
}

// Show returns one item (waiting or decided) with its bytes, why it waits
// and what would resolve it, and what accepting it now would do. It writes
// nothing. It sees the workspace's OpenClaw as o says, as accept does,
// so that both describe the same change.
func Show(ctx context.Context, o Options, id string) (*Detail, error) {
	o.fill()
	ws := o.Workspace
	v, done, err := view(ws)
	if err != nil {
		return nil, err
	}
	defer done()
	its, err := items(ctx, v, ws, true)
	if err != nil {
		return nil, err
	}
	it, err := resolve(its, id)
	if err != nil {
		return nil, err
	}
	b := openBytes(ws, v)
	defer b.close()
	data, _, err := b.get(it)
	if err != nil {
		return nil, err
	}
	in, err := ingest.New(ingest.Options{Workspace: ws, DryRun: true, OpenClaw: o.OpenClaw}, nil, nil)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	pr, _, err := propose(ctx, in, v, b, it, data, ingest.Override{Workspace: true})
	if err != nil {
		return nil, err
	}
	d := &Detail{Item: it, Data: data, Proposal: pr}
	if d.Earlier, err = earlier(ctx, v, b, it, data); err != nil {
		return nil, err
	}
	d.Why, d.Resolve = explain(it, pr, d.Earlier)
	if pr.Next != nil && pr.Target != "" {
		d.Diff = UnifiedDiff(pr.Target+" (as it is now)", pr.Target+" (as the handoff leaves it)", pr.Current, pr.Next)
		if pr.Kind == "card" {
			d.Lost = lostLines(pr.Current, pr.Next)
		}
		d.Added = addedLines(pr.Current, pr.Next)
	}
	ds, err := v.DecisionsFor(ctx, []string{it.SHA256})
	if err != nil {
		return nil, err
	}
	for _, x := range ds {
		if x.SHA256 == it.SHA256 {
			d.Decisions = append(d.Decisions, *decisionOf(x))
		}
	}
	return d, nil
}

// propose is what accepting it now would do, under ov: the one planning
// Show, Accept and Accept's dry run share, so that they describe the same
// change. A revision of a document append is planned as the replacement
// of the earlier version's text when the document still holds it
// (ingest.InspectRevision). It returns the version it revises too.
func propose(ctx context.Context, in *ingest.Ingester, r reader, b *bytesReader, it Item, data []byte, ov ingest.Override) (*ingest.Proposal, *ingest.Earlier, error) {
	e, err := revises(ctx, r, b, it)
	if err != nil {
		return nil, nil, err
	}
	pr, err := in.InspectRevision(it.src, data, ov, e)
	return pr, e, err
}

// revises returns the version it revises as the ingester plans on it: the
// newest version of its host, inbox and name stored before it with other
// bytes, with its bytes when they are still stored; nil when there is
// none.
func revises(ctx context.Context, r reader, b *bytesReader, it Item) (*ingest.Earlier, error) {
	vs, err := r.Versions(ctx, []ledger.NameKey{it.src.Key()})
	if err != nil {
		return nil, err
	}
	var e *ingest.Earlier
	for _, x := range vs[it.src.Key()] {
		if x.SourceID < it.src.ID && x.SHA256 != it.SHA256 {
			e = &ingest.Earlier{SHA256: x.SHA256, Result: x.Result, Target: x.Target}
		}
	}
	if e != nil {
		if data, err := b.spool.Get(e.SHA256); err == nil {
			e.Data = data
		}
	}
	return e, nil
}

// addedLines counts the lines the diff from a to b adds.
func addedLines(a, b []byte) int {
	n := 0
	for _, op := range diffLines(splitLines(string(a)), splitLines(string(b))) {
		n += op.b1 - op.b0
	}
	return n
}

// lostLines counts the non-blank lines of a that b does not keep.
func lostLines(a, b []byte) int {
	n := 0
	for _, op := range diffLines(splitLines(string(a)), splitLines(string(b))) {
		for _, l := range splitLines(string(a))[op.a0:op.a1] {
			if len(l) > 0 && l != "\n" {
				n++
			}
		}
	}
	return n
}

// explain says why an item waits, in words, and what would resolve it.
func explain(it Item, pr *ingest.Proposal, e *Earlier) (why, resolve string) {
	why = ingest.Reasons[it.Reason]
	if it.Result == receipts.ResultMalformed {
		why = "it is not a handoff (quarantined as malformed): " + it.ParseError
	}
	id := it.ID
	// accept is the accept command with the flags it needs.
	accept := "handoff review accept " + id
	if pr != nil {
		accept = AcceptCommand(id, pr.Flags())
	}
	switch {
	case it.State != "waiting" && it.Decision != nil && it.Decision.State == ledger.DecisionStarted:
		return why, "a decision was interrupted: the next `handoff review` command or `handoff sync` finishes it"
	case it.State != "waiting":
		return why, "decided: nothing left to do"
	case it.Result == receipts.ResultMalformed:
		return why, "`handoff review edit " + id + "` to turn it into a handoff, or `handoff review reject " + id + " --note TEXT`"
	}
	switch it.Reason {
	case ingest.ReasonHashConflict:
		resolve = "`" + accept + "` applies it to the card as it is now, replacing the whole card (the diff below shows what that changes, lost lines included); `edit` to merge it first; `reject` to drop it"
	case ingest.ReasonCardExists:
		resolve = "`" + accept + "` replaces the existing card with the handoff's (the diff below); `edit` to merge the two; `reject` to keep the card as it is"
	case ingest.ReasonCardMissing:
		resolve = "`" + accept + "` creates the card; `edit` to name another card; `reject` to drop it"
	case ingest.ReasonSecretLike:
		resolve = "`handoff review edit " + id + "` to take the value out (and rotate it if it was real); `" + accept + "` if it is not a secret"
	case ingest.ReasonHiddenCharacters:
		resolve = "`handoff review edit " + id + "` to remove them (they are shown as escapes below); `" + accept + "` if they are meant"
	case ingest.ReasonInjectionLike:
		resolve = "the text reads like instructions to the agent that will read this memory: `handoff review edit " + id + "` to rewrite it as a plain note, `reject` it, or `" + accept + "` if it is meant"
	case ingest.ReasonNoTarget:
		resolve = "it carries nothing to apply: `handoff review reject " + id + " --note TEXT` once read, or `edit` it to name a document"
	case ingest.ReasonRevised:
		resolve = reviseResolve(it, pr, e, accept)
	case ingest.ReasonSymlink, ingest.ReasonNotRegular:
		resolve = "the target in the workspace is a symlink or not a regular file: fix the workspace, then `" + accept + "`; or `edit` / `reject` it"
	default:
		resolve = "it cannot be accepted as it is: `handoff review edit " + id + "` to fix it, or `handoff review reject " + id + " --note TEXT`"
	}
	if pr != nil && pr.OK() && !ingest.IsWorkspaceReason(it.Reason) && ingest.ScreenFlag(it.Reason) == "" {
		// What stopped it is gone (the workspace was fixed): accept
		// applies it as it is.
		resolve = "what stopped it is gone now: `" + accept + "` applies it; " + resolve
	}
	return why, resolve
}

// reviseResolve says what resolves a revision (reason revised): what
// accept would do to the earlier version's text, to the card, or to the
// other versions that wait.
func reviseResolve(it Item, pr *ingest.Proposal, e *Earlier, accept string) string {
	id := it.ID
	edit, reject := "`handoff review edit "+id+"`", "`handoff review reject "+id+" --note TEXT`"
	switch {
	case pr == nil || !pr.OK():
		return "it cannot be accepted as it is: " + edit + " to fix it, or " + reject
	case pr.Replaces != "" && pr.Identical:
		return "`" + accept + "` records it: " + pr.Target + " already holds this version's text where version " + pr.Replaces[:12] + " put its own, so nothing is written; or " + reject
	case pr.Replaces != "":
		return "`" + accept + "` replaces the text version " + pr.Replaces[:12] + " appended to " + pr.Target + " with this version's, in place (the diff below; the document is backed up first); " + edit + " to change it first; " + reject + " keeps the earlier version's text"
	case pr.AppendOnly != "":
		return "`" + accept + "` can only append: " + pr.AppendOnly + "; " + edit + " to merge the two versions first, or " + reject + " to keep the earlier version's text alone"
	case pr.Kind == "card":
		return "`" + accept + "` applies it to the card as it is now, replacing the whole card (the diff below); " + edit + " to merge first; " + reject + " keeps the card as it is"
	case e != nil && e.Result == receipts.ResultReview:
		return "`" + accept + "` applies this version (the diff below) and records the other versions that wait as superseded; " + edit + " to change it first; or " + reject
	}
	return "`" + accept + "` applies it (the diff below); " + edit + " to change it first; or " + reject
}

// earlier finds the version it revises, when it is one: the newest
// version of its host, inbox and name stored before it with other bytes.
func earlier(ctx context.Context, v *ledger.View, b *bytesReader, it Item, data []byte) (*Earlier, error) {
	vs, err := v.Versions(ctx, []ledger.NameKey{it.src.Key()})
	if err != nil {
		return nil, err
	}
	var e *Earlier
	for _, x := range vs[it.src.Key()] {
		if x.SourceID < it.src.ID && x.SHA256 != it.SHA256 {
			e = &Earlier{ID: x.SHA256[:12], SHA256: x.SHA256, Result: x.Result, Reason: x.Reason, Action: x.Action, Target: x.Target, After: x.After}
		}
	}
	if e == nil {
		return nil, nil
	}
	if old, err := b.spool.Get(e.SHA256); err == nil {
		e.Diff = UnifiedDiff(it.Name+" (the earlier version, "+e.ID+")", it.Name+" (this revision, "+it.ID+")", old, data)
	}
	return e, nil
}
