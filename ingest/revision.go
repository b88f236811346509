package ingest

import (
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
