package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/receipts"
)

// ArchivedTimes returns, for one inbox of one host, when each file the
// ledger knows in processed/ was stored: archived_as (processed/<name>)
// to the latest stored_at of its sources. Archiving follows storing in
// the same run, so this is the file's archive time as far as the ledger
// can tell; prune ages archived files by it. A timestamp that does not
// parse leaves the file out, so it is never aged.
func (l *Ledger) ArchivedTimes(ctx context.Context, host, inbox string) (map[string]time.Time, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT archived_as, stored_at FROM sources
		WHERE host = ? AND inbox = ? AND archived_as LIKE 'processed/%'`, host, inbox)
	if err != nil {
		return nil, fmt.Errorf("ledger: archived times: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	bad := map[string]bool{}
	for rows.Next() {
		var arch, at string
		if err := rows.Scan(&arch, &at); err != nil {
			return nil, fmt.Errorf("ledger: archived times: %w", err)
		}
		t, perr := time.Parse(time.RFC3339Nano, at)
		if perr != nil {
			bad[arch] = true
			continue
		}
		if t.After(out[arch]) {
			out[arch] = t
		}
	}
	for arch := range bad {
		delete(out, arch)
	}
	return out, rows.Err()
}

// RunRecord is one row of the runs table.
type RunRecord struct {
	ID         string
	Mode       string
	Outcome    string // "" while the run has not finished
	StartedAt  time.Time
	FinishedAt time.Time
	Receipt    string // the per-run receipt's path, "" when none was written
}

// Runs returns every run the ledger knows, oldest first.
func (l *Ledger) Runs(ctx context.Context) ([]RunRecord, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT run_id, mode, Outcome, started_at, finished_at, receipt FROM runs ORDER BY started_at, run_id`)
	if err != nil {
		return nil, fmt.Errorf("ledger: runs: %w", err)
	}
	defer rows.Close()
	var out []RunRecord
	for rows.Next() {
		var r RunRecord
		var started, finished string
		if err := rows.Scan(&r.ID, &r.Mode, &r.Outcome, &started, &finished, &r.Receipt); err != nil {
			return nil, fmt.Errorf("ledger: runs: %w", err)
		}
		r.StartedAt, r.FinishedAt = parseTime(started), parseTime(finished)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Runs returns every run the ledger knows, oldest first.
func (v *View) Runs(ctx context.Context) ([]RunRecord, error) { return v.l.Runs(ctx) }

// HostActivity is what the ledger knows of one host's handoffs.
type HostActivity struct {
	// LastStored is when the newest handoff from the host was stored
	// (sources recorded by `handoff import processed` do not count: they
	// say nothing about the host's writers now).
	LastStored time.Time
}

// Activity returns, by host name, when each host last sent a handoff,
// and when the ledger's first run started (zero when none has).
func (v *View) Activity(ctx context.Context) (map[string]HostActivity, time.Time, error) {
	out := map[string]HostActivity{}
	rows, err := v.l.db.QueryContext(ctx, `SELECT host, stored_at FROM sources WHERE result != ?`, receipts.ResultLegacy)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("ledger: activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var host, at string
		if err := rows.Scan(&host, &at); err != nil {
			return nil, time.Time{}, fmt.Errorf("ledger: activity: %w", err)
		}
		if t := parseTime(at); t.After(out[host].LastStored) {
			out[host] = HostActivity{LastStored: t}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("ledger: activity: %w", err)
	}
	var first time.Time
	runs, err := v.l.Runs(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, r := range runs {
		if r.Mode == receipts.ModeApply && !r.StartedAt.IsZero() && (first.IsZero() || r.StartedAt.Before(first)) {
			first = r.StartedAt
		}
	}
	return out, first, nil
}

// TargetWrites returns the handoffs (by content) whose result names
// target, a workspace-relative slash path such as memory/cards/x.md or a
// review draft's path, with the source whose copy got the result; oldest
// first.
func (v *View) TargetWrites(ctx context.Context, target string) ([]SourceRecord, error) {
	target = strings.TrimPrefix(target, "./")
	rows, err := v.l.db.QueryContext(ctx, `SELECT h.source_id FROM handoffs h WHERE h.target = ? ORDER BY h.ingested_at, h.source_id`, target)
	if err != nil {
		return nil, fmt.Errorf("ledger: target: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: target: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: target: %w", err)
	}
	var out []SourceRecord
	for _, id := range ids {
		recs, err := v.findSources(ctx, "t.id = ?", []any{id})
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}
