package ledger

// Decisions: what a person decided, in `handoff review`, about a handoff
// that waited for one (a review or a malformed result). See
// internal/review for the commands and docs/design.md, "Review".

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/receipts"
)

// migrationDecisions is the decisions table (migration 2).
const migrationDecisions = `CREATE TABLE decisions (
		id            INTEGER PRIMARY KEY,
		sha256        TEXT NOT NULL,
		decision      TEXT NOT NULL,
		state         TEXT NOT NULL,
		by            TEXT NOT NULL,
		note          TEXT NOT NULL DEFAULT '',
		at            TEXT NOT NULL,
		run_id        TEXT NOT NULL,
		from_result   TEXT NOT NULL,
		from_reason   TEXT NOT NULL DEFAULT '',
		overrides     TEXT NOT NULL DEFAULT '',
		new_sha256    TEXT NOT NULL DEFAULT '',
		plan_id       INTEGER NOT NULL DEFAULT 0,
		result        TEXT NOT NULL DEFAULT '',
		reason        TEXT NOT NULL DEFAULT '',
		target        TEXT NOT NULL DEFAULT '',
		before_sha256 TEXT NOT NULL DEFAULT '',
		after_sha256  TEXT NOT NULL DEFAULT '',
		done_at       TEXT NOT NULL DEFAULT '',
		draft         TEXT NOT NULL DEFAULT '',
		draft_removed INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX decisions_sha ON decisions (sha256);
	CREATE INDEX decisions_new_sha ON decisions (new_sha256) WHERE new_sha256 != '';
	CREATE INDEX decisions_started ON decisions (plan_id) WHERE state = 'started';
	CREATE INDEX decisions_drafts ON decisions (id) WHERE state = 'done' AND draft != '' AND draft_removed = 0;`

// Decisions a person makes about a waiting handoff.
const (
	DecisionAccepted = "accepted"
	DecisionEdited   = "edited"
	DecisionRejected = "rejected"
	// DecisionSuperseded: another version of the same handoff (the same
	// host, inbox and file name) was accepted or edited, and this one
	// waits no more. Done at once, like a reject; its bytes stay.
	DecisionSuperseded = "superseded"
)

// Decision states. A decision that applies something (accept, edit) is
// started together with its plan, in one transaction, and finished with
// the plan's bookkeeping, in one transaction (FinishAll): done when the
// plan was applied, abandoned when it went to review after all (the target
// changed under it), and the handoff then waits as before. A reject is done
// at once.
const (
	DecisionStarted   = "started"
	DecisionDone      = "done"
	DecisionAbandoned = "abandoned"
)

// ErrDecided means the handoff is not waiting: a person decided about it
// already (or a decision is under way), or it never waited.
var ErrDecided = errors.New("not waiting for review")

// Decision is one person's decision about one waiting handoff.
type Decision struct {
	ID       int64
	SHA256   string // the waiting handoff's content
	Decision string // accepted | edited | rejected
	State    string // started | done | abandoned
	By       string // $USER@host
	Note     string
	At       time.Time
	RunID    string // the review run that made it
	// FromResult and FromReason are what the handoff waited as.
	FromResult, FromReason string
	// Overrides are the rules the person's word relaxed, comma-separated
	// ("workspace,allow-secret").
	Overrides string
	// NewSHA256 is, for an edit, the edited handoff's content.
	NewSHA256 string
	PlanID    int64
	// Result, Reason, Target and the hashes are what the decision led to:
	// the applied plan's result and target, the target's hash before and
	// after; for a reject, the result it keeps and the hash of the target
	// it names as it was then.
	Result, Reason, Target, Before, After string
	DoneAt                                time.Time
	// Draft is the review draft to remove once done, relative to the
	// workspace ("" for a malformed handoff, which has none);
	// DraftRemoved says that it was.
	Draft        string
	DraftRemoved bool
}

// StartDecision records a person's decision in one transaction. The
// handoff d.SHA256 must be waiting: its result is review or malformed and
// no decision about it is started or done (else ErrDecided). For an edit,
// edited is the edited handoff, recorded first as a new source already
// archived (it was never on a host) and given its id. With a plan p, p is
// recorded as planned (reusing the row of an abandoned plan of the same
// content, its replans counted up so that its backup gets a name of its
// own; or of the content's done plan, when the handoff that waits is a
// return, returns.go) and the decision as started, which the plan's
// bookkeeping finishes
// (FinishAll); without one (a reject), the decision is done at once. It
// sets d.ID, d.PlanID, and p's ID and Replans.
func (l *Ledger) StartDecision(ctx context.Context, d *Decision, p *Plan, edited *claim.Source) error {
	tx, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := waiting(ctx, tx.Tx, d.SHA256); err != nil {
		return err
	}
	at := now()
	if edited != nil {
		var nums numbers
		defer nums.close()
		num, err := nums.of(ctx, tx, edited.SHA256)
		if err != nil {
			return fmt.Errorf("ledger: record the edited handoff: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO sources
			(sha256, sha_id, size, host, inbox, name, archived_as, acked, stored_at, stored_run) VALUES (?, ?, ?, ?, ?, ?, '', 1, ?, ?)`,
			edited.SHA256, num, edited.Size, edited.Host, edited.Inbox, edited.Name, at, d.RunID)
		if err != nil {
			return fmt.Errorf("ledger: record the edited handoff: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if p != nil {
			p.SourceID = id
		}
	}
	d.State = DecisionDone
	if p != nil {
		err := tx.QueryRowContext(ctx, `INSERT INTO plans
			(sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at)
			VALUES (`+shaID+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (sha_id) DO UPDATE SET source_id = excluded.source_id, kind = excluded.kind, action = excluded.action,
				target = excluded.target, before_sha256 = excluded.before_sha256, after_sha256 = excluded.after_sha256,
				content = excluded.content, backup = '', replans = plans.replans + 1, state = excluded.state,
				run_id = excluded.run_id, created_at = excluded.created_at
			WHERE plans.state = ? OR plans.state = '`+planDone+`' AND `+returnedHandoff+`
			RETURNING id, replans`,
			p.SHA256, p.SHA256, p.SourceID, p.Kind, p.Action, p.Target, p.Before, p.After, p.Content, planPlanned, d.RunID, at, planAbandoned).
			Scan(&p.ID, &p.Replans)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: a plan for %.12s is open or done: %w", p.SHA256, ErrDecided)
		}
		if err != nil {
			return fmt.Errorf("ledger: record the plan: %w", err)
		}
		d.State, d.PlanID = DecisionStarted, p.ID
	}
	doneAt := ""
	if d.State == DecisionDone {
		doneAt = at
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO decisions
		(sha256, decision, state, by, note, at, run_id, from_result, from_reason, overrides, new_sha256, plan_id,
		 result, reason, target, before_sha256, after_sha256, done_at, draft)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.SHA256, d.Decision, d.State, d.By, d.Note, at, d.RunID, d.FromResult, d.FromReason, d.Overrides, d.NewSHA256, d.PlanID,
		d.Result, d.Reason, d.Target, d.Before, d.After, doneAt, d.Draft)
	if err != nil {
		return fmt.Errorf("ledger: record the decision: %w", err)
	}
	if d.ID, err = res.LastInsertId(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		d.ID, d.PlanID = 0, 0
		if p != nil {
			p.ID = 0
		}
		return err
	}
	d.At = parseTime(at)
	d.DoneAt = parseTime(doneAt)
	return nil
}

// waiting checks, in tx, that the handoff sha waits for a person.
func waiting(ctx context.Context, tx *sql.Tx, sha string) error {
	var result string
	err := tx.QueryRowContext(ctx, `SELECT result FROM handoffs WHERE id = `+shaID, sha).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ledger: no handoff %.12s: %w", sha, ErrDecided)
	}
	if err != nil {
		return err
	}
	if result != receipts.ResultReview && result != receipts.ResultMalformed {
		return fmt.Errorf("ledger: handoff %.12s is %s: %w", sha, result, ErrDecided)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM decisions WHERE sha256 = ? AND state IN (?, ?)`,
		sha, DecisionStarted, DecisionDone).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("ledger: handoff %.12s: %w", sha, ErrDecided)
	}
	return nil
}

// startedDecisions returns, in tx, the started decisions by plan id: none
// in the common case, one query per bookkeeping transaction.
func startedDecisions(ctx context.Context, tx *sql.Tx) (map[int64]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, plan_id FROM decisions WHERE state = ?`, DecisionStarted)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out map[int64]int64
	for rows.Next() {
		var id, plan int64
		if err := rows.Scan(&id, &plan); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[int64]int64{}
		}
		out[plan] = id
	}
	return out, rows.Err()
}

// finishDecided is the bookkeeping of a plan a person's decision started:
// the decision is done (or abandoned, when the plan went to review after
// all), the handoff's result replaces the one it waited with (or is
// recorded, for an edited handoff's new content), and the source gets it,
// keeping the run that first ingested it.
func finishDecided(ctx context.Context, tx *sql.Tx, decision int64, f Finished, runID, at string) error {
	o := f.O
	state := DecisionDone
	if o.Result == receipts.ResultReview {
		state = DecisionAbandoned
	}
	if _, err := tx.ExecContext(ctx, `UPDATE decisions SET state = ?, result = ?, reason = ?, target = ?, before_sha256 = ?, after_sha256 = ?, done_at = ?
		WHERE id = ?`, state, o.Result, o.Reason, o.Target, o.Before, o.After, at, decision); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE handoffs SET result = ?, reason = ?, action = ?, target = ?, before_sha256 = ?, after_sha256 = ?
		WHERE id = `+shaID, o.Result, o.Reason, o.Action, o.Target, o.Before, o.After, f.Src.SHA256)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		res, err := tx.ExecContext(ctx, insertHandoff, f.Src.ID, o.Result, o.Reason, o.Action, o.Target, o.Before, o.After, runID, at, f.Src.SHA256)
		if err := one(res, err, "result of", f.Src.SHA256); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE sources SET result = ?, reason = ?,
		ingest_run = CASE WHEN ingest_run = '' THEN ? ELSE ingest_run END,
		ingested_at = CASE WHEN ingested_at = '' THEN ? ELSE ingested_at END WHERE id = ?`,
		o.Result, o.Reason, runID, at, f.Src.ID)
	return err
}

// DraftsToRemove returns the done decisions whose review draft has not
// been removed yet: the one just made, or one a crash left behind.
func (l *Ledger) DraftsToRemove(ctx context.Context) ([]Decision, error) {
	return l.decisions(ctx, `state = ? AND draft != '' AND draft_removed = 0`, DecisionDone)
}

// DraftRemoved records that a decision's draft is gone (or was left in
// place on purpose).
func (l *Ledger) DraftRemoved(ctx context.Context, id int64) error {
	_, err := l.exec(ctx, `UPDATE decisions SET draft_removed = 1 WHERE id = ?`, id)
	return err
}

// DecisionsFor returns every decision about the contents shas, and every
// decision whose edit made one of them, oldest first.
func (l *Ledger) DecisionsFor(ctx context.Context, shas []string) ([]Decision, error) {
	if len(shas) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2*len(shas))
	for _, s := range shas {
		args = append(args, s)
	}
	for _, s := range shas {
		args = append(args, s)
	}
	in := "(?" + strings.Repeat(", ?", len(shas)-1) + ")"
	return l.decisions(ctx, `sha256 IN `+in+` OR new_sha256 IN `+in, args...)
}

func (l *Ledger) decisions(ctx context.Context, where string, args ...any) ([]Decision, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, sha256, decision, state, by, note, at, run_id, from_result, from_reason, overrides,
			new_sha256, plan_id, result, reason, target, before_sha256, after_sha256, done_at, draft, draft_removed
		FROM decisions WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: decisions: %w", err)
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		var at, doneAt string
		var removed int
		if err := rows.Scan(&d.ID, &d.SHA256, &d.Decision, &d.State, &d.By, &d.Note, &at, &d.RunID, &d.FromResult, &d.FromReason, &d.Overrides,
			&d.NewSHA256, &d.PlanID, &d.Result, &d.Reason, &d.Target, &d.Before, &d.After, &doneAt, &d.Draft, &removed); err != nil {
			return nil, fmt.Errorf("ledger: decisions: %w", err)
		}
		d.At, d.DoneAt, d.DraftRemoved = parseTime(at), parseTime(doneAt), removed != 0
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: decisions: %w", err)
	}
	return out, nil
}

// ReviewItem is a handoff that waits, or waited, for a person: its result
// is review or malformed, or a decision was made about it.
type ReviewItem struct {
	SHA256, Result, Reason, Action, Target string
	BeforeSHA256                           string
	RunID                                  string
	IngestedAt                             time.Time
	// The source whose copy got the result.
	Source   SourceRow
	StoredAt time.Time
}

// ReviewItems returns the handoffs that wait for a person (review and
// malformed results), and with all those a decision was made about too,
// oldest first.
func (l *Ledger) ReviewItems(ctx context.Context, all bool) ([]ReviewItem, error) {
	where := `h.result IN (?, ?)`
	if all {
		where += ` OR EXISTS (SELECT 1 FROM decisions d WHERE d.sha256 = h.sha256 AND d.state != '` + DecisionPast + `')`
	}
	rows, err := l.db.QueryContext(ctx, `SELECT h.sha256, h.result, h.reason, h.action, h.target, h.before_sha256, h.run_id, h.ingested_at,
			s.id, s.sha256, s.size, s.host, s.inbox, s.name, s.archived_as, s.stored_at
		FROM handoffs h JOIN sources s ON s.id = h.source_id
		WHERE `+where, receipts.ResultReview, receipts.ResultMalformed)
	if err != nil {
		return nil, fmt.Errorf("ledger: review items: %w", err)
	}
	defer rows.Close()
	var out []ReviewItem
	for rows.Next() {
		var it ReviewItem
		var ingested, stored string
		s := &it.Source
		if err := rows.Scan(&it.SHA256, &it.Result, &it.Reason, &it.Action, &it.Target, &it.BeforeSHA256, &it.RunID, &ingested,
			&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs, &stored); err != nil {
			return nil, fmt.Errorf("ledger: review items: %w", err)
		}
		it.IngestedAt, it.StoredAt = parseTime(ingested), parseTime(stored)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: review items: %w", err)
	}
	// By time, not by the text of the timestamps (trimmed fractions do
	// not sort as text).
	slices.SortStableFunc(out, func(a, b ReviewItem) int {
		if c := a.IngestedAt.Compare(b.IngestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SHA256, b.SHA256)
	})
	return out, nil
}

// HasContent reports whether content sha is known to the ledger at all: a
// stored source holds it.
func (l *Ledger) HasContent(ctx context.Context, sha string) (bool, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM sources WHERE sha_id = `+shaID, sha).Scan(&n)
	return n > 0, err
}

// HostResult is one ingested source of a host, newest first (RecentByHost).
type HostResult struct {
	SHA256, Result, Reason string
	IngestedAt             time.Time
}

// RecentByHost returns, for every host, the results of its last n stored
// sources that got a result of their own (duplicates of earlier content
// left out), the last stored first.
func (l *Ledger) RecentByHost(ctx context.Context, n int) (map[string][]HostResult, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT host, sha256, result, reason, ingested_at FROM (
			SELECT host, sha256, result, reason, ingested_at,
				row_number() OVER (PARTITION BY host ORDER BY id DESC) AS k
			FROM sources WHERE result != '' AND NOT (result = ? AND reason = '')
		) WHERE k <= ? ORDER BY host, k`, receipts.ResultDuplicate, n)
	if err != nil {
		return nil, fmt.Errorf("ledger: recent results: %w", err)
	}
	defer rows.Close()
	out := map[string][]HostResult{}
	for rows.Next() {
		var host, at string
		var r HostResult
		if err := rows.Scan(&host, &r.SHA256, &r.Result, &r.Reason, &at); err != nil {
			return nil, fmt.Errorf("ledger: recent results: %w", err)
		}
		r.IngestedAt = parseTime(at)
		out[host] = append(out[host], r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: recent results: %w", err)
	}
	return out, nil
}

// WaitingMalformed counts the malformed handoffs that still wait for a
// person: no decision about them is started or done (a rejected one is
// in the quarantine and waits no more).
func (l *Ledger) WaitingMalformed(ctx context.Context) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM handoffs h WHERE h.result = ?
		AND NOT EXISTS (SELECT 1 FROM decisions d WHERE d.sha256 = h.sha256 AND d.state IN (?, ?))`,
		receipts.ResultMalformed, DecisionStarted, DecisionDone).Scan(&n)
	return n, err
}

// WaitingMalformed is Ledger.WaitingMalformed on a read-only view.
func (v *View) WaitingMalformed(ctx context.Context) (int, error) { return v.l.WaitingMalformed(ctx) }

// ReviewItems, DecisionsFor and RecentByHost for readers (doctor, where,
// `handoff review list` and `show`).
func (v *View) ReviewItems(ctx context.Context, all bool) ([]ReviewItem, error) {
	return v.l.ReviewItems(ctx, all)
}

func (v *View) DecisionsFor(ctx context.Context, shas []string) ([]Decision, error) {
	return v.l.DecisionsFor(ctx, shas)
}

func (v *View) RecentByHost(ctx context.Context, n int) (map[string][]HostResult, error) {
	return v.l.RecentByHost(ctx, n)
}
