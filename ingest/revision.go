package ingest

import (
	"bytes"
	"context"
	"fmt"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
)

// Revisions. Agents rewrite a handoff in place: the same host, inbox and
// file name, other bytes, often after the first version was pulled and
// applied. A revision never changes the workspace blindly a second time
// (docs/design.md, "Revisions"):
//
//   - a revision of a version that still waits in review goes to review
//     too (reason revised), beside it;
//   - a revised card whose card still holds exactly what the earlier
//     version wrote is applied as a hash-guarded update over it (before =
//     the earlier version's after), with reason revised;
//   - any other revision of a version that changed the workspace (a
//     document append, a card changed since) goes to review (revised);
//   - a revision of a version that changed nothing (malformed, rejected
//     in review) is decided as any new handoff.

// revises returns the version src revises: the newest earlier one of its
// name in this batch, in the batch being applied, or in the ledger.
func (b *batch) revises(src sourceRow) (ledger.Version, bool) {
	for _, bb := range []*batch{b, b.prev} {
		if bb == nil {
			continue
		}
		if it, ok := bb.names[src.Key()]; ok && it.src.SHA256 != src.SHA256 {
			return ledger.Version{SourceID: it.src.ID, SHA256: it.src.SHA256, Result: it.o.Result, Reason: it.o.Reason,
				Action: it.o.Action, Target: it.o.Target, Before: it.o.Before, After: it.o.After}, true
		}
	}
	v, ok := b.earlier[src.ID]
	return v, ok
}

// revision decides a valid handoff h that revises v, given what the
// planner made of it as a new handoff (p, reason; replan plans it on the
// card as it is now). It returns the plan and reason to go on with, or
// review: route it to review as revised.
func revision(v ledger.Version, h *Handoff, p *plan, reason string, replan func() (*plan, string, error)) (*plan, string, bool, error) {
	switch {
	case v.Waiting():
		return nil, "", true, nil
	case !v.Changed():
		return p, reason, false, nil
	case h.Card == nil || v.Target != layout.CardsDir+"/"+h.Card.Name:
		return nil, "", true, nil
	}
	switch reason {
	case "":
	case ReasonCardExists, ReasonHashConflict:
		np, nr, err := replan()
		if err != nil {
			return nil, "", false, err
		}
		if nr != "" {
			return nil, "", true, nil
		}
		p = np
	default:
		// card-identical, an unsafe target: as for any handoff.
		return p, reason, false, nil
	}
	if p == nil || p.Before != v.After {
		return nil, "", true, nil
	}
	return p, "", false, nil
}

// Replacing a revised append. A person who accepts a revision of a
// document append means "replace my earlier note", not "add a second
// one". While the document still holds the earlier version's text
// exactly, once, as whole lines, accept replaces that text in place with
// the revision's: a hash-guarded write of the whole document, backed up,
// recorded as a plan of kind kindReplace. Otherwise accept can only
// append, and the proposal says why (docs/design.md, "Revisions").

// kindReplace is a plan that replaces a document whole (the earlier
// version's appended text swapped for the revision's); its Content is
// the whole new document, as a card plan's is.
const kindReplace = "document-replace"

// Earlier is the version a revision revises, as `handoff review` finds it
// in the ledger: its content's hash, what became of it, and its bytes
// (nil when no longer stored).
type Earlier struct {
	SHA256 string
	Result string
	Target string
	Data   []byte
}

// replacePlan turns p, a document append planned with the workspace
// rules relaxed, into the replacement of what the earlier version e
// appended, when the document still holds that text exactly once. Else
// it returns nil and why accept can only append.
func replacePlan(p *plan, e *Earlier, h *Handoff) (*plan, string) {
	switch {
	case e.Target != p.Target:
		return nil, fmt.Sprintf("the earlier version %.12s appended to %s and this one names %s, so accept appends to %s and leaves %s as it is", e.SHA256, e.Target, p.Target, p.Target, e.Target)
	case e.Data == nil:
		return nil, fmt.Sprintf("the earlier version %.12s is no longer stored (pruned), so the text it appended cannot be found: accept appends", e.SHA256)
	}
	eh, err := Parse(e.Data)
	if err != nil || eh.Document == nil {
		return nil, fmt.Sprintf("the earlier version %.12s does not parse as a document append any more, so the text it appended cannot be found: accept appends", e.SHA256)
	}
	next, n := replaceAppended(p.cur, eh.Document.Content, h.Document.Content)
	switch {
	case n == 0:
		return nil, fmt.Sprintf("%s no longer holds the text version %.12s appended exactly (it was edited or removed since), so accept appends this version; `handoff review edit` to merge by hand", p.Target, e.SHA256)
	case n > 1:
		return nil, fmt.Sprintf("%s holds the text version %.12s appended %d times, so which one to replace is not clear: accept appends; `handoff review edit` to merge by hand", p.Target, e.SHA256, n)
	}
	rp := &plan{Plan: p.Plan, cur: p.cur, next: next}
	rp.Kind, rp.Content, rp.After = kindReplace, next, hash(next)
	return rp, ""
}

// replaceAppended returns cur with old, the text an earlier version
// appended, replaced by content, and how many times cur holds old as
// whole lines (starting a line, ending one or the file). Only when it is
// exactly once is the replaced content returned.
func replaceAppended(cur []byte, old, content string) ([]byte, int) {
	if old == "" {
		return nil, 0
	}
	at, n := -1, 0
	for i := 0; i <= len(cur); {
		j := bytes.Index(cur[i:], []byte(old))
		if j < 0 {
			break
		}
		k, end := i+j, i+j+len(old)
		if (k == 0 || cur[k-1] == '\n') && (end == len(cur) || cur[end] == '\n') {
			at = k
			n++
		}
		i = k + 1
	}
	if n != 1 {
		return nil, n
	}
	next := make([]byte, 0, len(cur)-len(old)+len(content))
	next = append(next, cur[:at]...)
	next = append(next, content...)
	next = append(next, cur[at+len(old):]...)
	return next, 1
}

// Returns. A handoff rewritten back to an earlier version's bytes (v1,
// v2, then v1 again under the same name) is its writer's last word: a
// revision of the version before it, decided as any revision is, not a
// duplicate of v1. The ledger records it as a source of its own
// (ledger/returns.go) and gives its content's handoff row the return's
// result; a return's plan takes over the row of its content's finished
// plan, its replans counted on so that its backup has a name of its own.

// nameContent is a name and the content it held.
type nameContent struct {
	key ledger.NameKey
	sha string
}

// returnsWithin reports whether src's name held its bytes earlier in this
// batch or in the batch being applied: then the return waits for that
// batch's bookkeeping, and is decided in a batch after it.
func (b *batch) returnsWithin(src sourceRow) bool {
	k := nameContent{src.Key(), src.SHA256}
	return b.had[k] || b.prev != nil && b.prev.had[k]
}

// retake makes p, a return's plan, take over its content's finished plan.
func (b *batch) retake(ctx context.Context, p *plan) error {
	n, err := b.in.led.PlanReplans(ctx, p.SHA256)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	p.Again, p.Replans = true, n+1
	return nil
}
