package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/review"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
)

// A host "keeps sending malformed handoffs" when at least
// malformedWriterMin of its last malformedWriterWindow handoffs (by
// storage order, duplicates left out) were malformed.
const (
	malformedWriterWindow = 5
	malformedWriterMin    = 3
)

// doctorReview checks what waits for a person: a warning when the oldest
// waiting item is older than the manifest's review_max_age, and one for
// each host that keeps sending malformed handoffs (its writer's template
// is broken). It reads the ledger as doctorLedger does, and writes
// nothing; without a readable ledger it says nothing (doctorLedger has).
func doctorReview(ctx context.Context, ws string, opts Options) []Check {
	lk, err := setup.ProbeLock(filepath.Join(ws, layout.LockFile))
	idle := err == nil && !lk.Held
	defer lk.Release()
	v, err := ledger.OpenReadOnly(filepath.Join(ws, layout.LedgerFile), idle)
	if err != nil {
		return nil
	}
	defer v.Close()
	var out []Check
	maxAge := manifest.DefaultReviewMaxAge
	if a := opts.Manifest.Defaults.ReviewMaxAge; a != nil {
		maxAge = a.Duration
	}
	c := Check{Scope: "workspace", Name: "review-age", Status: CheckOK}
	its, err := review.Waiting(ctx, v, ws)
	switch {
	case err != nil:
		c.Status, c.Message = CheckWarn, fmt.Sprintf("cannot list what waits for review: %v", err)
		c.Hint = "run `handoff review` to see the error; `handoff doctor` checks the ledger above"
	case len(its) == 0:
		c.Message = "nothing waits for review"
	default:
		oldest := its[0]
		for _, it := range its {
			if it.Since.Before(oldest.Since) {
				oldest = it
			}
		}
		age := max(opts.Now().Sub(oldest.Since), 0)
		c.Message = fmt.Sprintf("%d item(s) wait for review, the oldest for %s (%s, %s from %s)",
			len(its), roundAge(age), oldest.ID, oldest.Reason, displayName(oldest.Host))
		if age > maxAge {
			c.Status = CheckWarn
			c.Message += fmt.Sprintf(": longer than review_max_age (%s)", roundAge(maxAge))
			c.Hint = "go through them: `handoff review` lists them, `handoff review show ID` shows one, then accept, edit or reject it (README, \"The weekly review\"); defaults.review_max_age in the manifest sets how long is too long"
		}
	}
	out = append(out, c)

	recent, err := v.RecentByHost(ctx, malformedWriterWindow)
	if err != nil {
		return out
	}
	hosts := make([]string, 0, len(recent))
	for h := range recent {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	legacy, _ := spool.OpenReadOnly(filepath.Join(ws, layout.SpoolDir))
	if legacy != nil {
		defer legacy.Close()
	}
	sp := v.Store(legacy)
	defer sp.Close()
	for _, h := range hosts {
		rs := recent[h]
		n := 0
		for _, r := range rs {
			if r.Result == receipts.ResultMalformed {
				n++
			}
		}
		if n < malformedWriterMin {
			continue
		}
		latest := ""
		for _, r := range rs {
			if r.Result != receipts.ResultMalformed {
				continue
			}
			if data, err := sp.Get(r.SHA256); err == nil {
				if probs := ingest.Lint(data); len(probs) > 0 {
					latest = fmt.Sprintf(" (the latest, %s: %s)", r.SHA256[:12], displayName(probs[0].Message))
				}
			}
			break
		}
		out = append(out, Check{Scope: "workspace", Name: "malformed-writer", Status: CheckWarn,
			Message: fmt.Sprintf("host %s keeps sending malformed handoffs: %d of its last %d were malformed%s", displayName(h), n, len(rs), latest),
			Hint:    fmt.Sprintf("the template or prompt of the agent writing on %s is broken: compare what it writes with docs/handoff-format.md (`handoff lint FILE` checks one), then `handoff review` lists the quarantined ones to edit or reject", displayName(h))})
	}
	return out
}

// malformedMessage says how many malformed handoffs the quarantine holds
// and how many of them still wait for a person, as `handoff review`
// counts them: one a person rejected is still quarantined (its bytes
// stay) but waits no more.
func malformedMessage(ctx context.Context, v *ledger.View, total int) string {
	msg := fmt.Sprintf("%d malformed handoff(s) quarantined in the store", total)
	waiting, err := v.WaitingMalformed(ctx)
	switch {
	case total == 0:
		return msg
	case err != nil:
		return msg + " (`handoff review --all` lists them)"
	case waiting == 0:
		return msg + ", none waiting: a person decided about each (`handoff review --all` lists them)"
	case waiting == total:
		return msg + ", waiting for a person (`handoff review` lists them)"
	}
	return msg + fmt.Sprintf(", %d of them waiting for a person (`handoff review` lists those; `--all` the decided ones too)", waiting)
}
