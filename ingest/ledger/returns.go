package ledger

import (
	"context"
	"database/sql"
	"errors"
)

// Returns: a handoff rewritten back to an earlier version's bytes (v1,
// then v2, then v1 again at the same host, inbox and name) is a revision,
// not a duplicate: the last v1 is its writer's last word (issue 48).
//
// Until migration 14, sources held at most one row for each host, inbox,
// name and content, so the second v1 was a recording of a source already
// recorded, and nothing more. Now a source is recorded again when the
// newest source of its name holds other bytes; a copy listed again while
// it waits for its archive (the newest of its name, the same bytes) is
// still recorded once. The ingester decides such a return as a revision
// of the version before it and gives the content's handoff row that
// decision (FinishAll, Finished.Again): one row a content, which says
// what became of it last.

// migrationReturns is migration 14: sources without the unique key on
// (host, inbox, name, sha256), which kept a return from being recorded.
// Sources are indexed by name and then by id instead: the newest of a
// name (which recordSource asks for each source) is one step down it,
// however many versions the name has had. sources_inbox lets RECENT.md's
// build read an inbox's newest handoffs, and no more (repos.go).
// handoffs and plans refer to sources, so SQLite rebuilds it with foreign
// keys off (migrate pins a connection for that) and the migration checks
// them before it commits. The columns restate migration 1's and 10's: a
// migration is frozen text.
const migrationReturns = `CREATE TABLE sources_v14 (
		id          INTEGER PRIMARY KEY,
		sha256      TEXT NOT NULL,
		size        INTEGER NOT NULL,
		host        TEXT NOT NULL,
		inbox       TEXT NOT NULL,
		name        TEXT NOT NULL,
		archived_as TEXT NOT NULL DEFAULT '',
		acked       INTEGER NOT NULL DEFAULT 0,
		stored_at   TEXT NOT NULL,
		stored_run  TEXT NOT NULL,
		result      TEXT NOT NULL DEFAULT '',
		reason      TEXT NOT NULL DEFAULT '',
		ingest_run  TEXT NOT NULL DEFAULT '',
		ingested_at TEXT NOT NULL DEFAULT '',
		sha_id      INTEGER NOT NULL DEFAULT 0
	);
	INSERT INTO sources_v14 (id, sha256, size, host, inbox, name, archived_as, acked, stored_at, stored_run,
			result, reason, ingest_run, ingested_at, sha_id)
		SELECT id, sha256, size, host, inbox, name, archived_as, acked, stored_at, stored_run,
			result, reason, ingest_run, ingested_at, sha_id FROM sources ORDER BY id;
	DROP TABLE sources;
	ALTER TABLE sources_v14 RENAME TO sources;
	CREATE INDEX sources_key ON sources (host, inbox, name, id);
	CREATE INDEX sources_inbox ON sources (host, inbox, id);
	CREATE INDEX sources_pending ON sources (result, id);
	CREATE INDEX sources_name ON sources (name);
	CREATE INDEX sources_unacked ON sources (host, inbox, id) WHERE acked = 0;
	CREATE INDEX sources_sha_id ON sources (sha_id);`

// recordSource records a stored source unless the newest source of its
// name holds the same bytes already (it was recorded, and is listed again
// before its archive was confirmed). Bound: sha256, sha_id, size, host,
// inbox, name, archived_as, stored_at, stored_run, then host, inbox, name
// and sha256 again.
const recordSource = `INSERT INTO sources
		(sha256, sha_id, size, host, inbox, name, archived_as, stored_at, stored_run)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE (SELECT sha256 FROM sources WHERE host = ? AND inbox = ? AND name = ? ORDER BY id DESC LIMIT 1) IS NOT ?`

// DecisionPast is the state of a person's done decision about a content
// whose handoff returned since (its name held other bytes, then these
// again): the decision was about the content's earlier ingest, and the
// return is decided, and waits, afresh. Its history stays readable.
const DecisionPast = "past"

// returned is true, in SQL, for the source bound as host, inbox, name,
// sha256 and id when an earlier source of its name held the same bytes.
const returned = `EXISTS (SELECT 1 FROM sources e WHERE e.host = ? AND e.inbox = ? AND e.name = ? AND e.sha256 = ? AND e.id < ?)`

// redecide gives a returned content's handoff row the return's result;
// bound as FinishAll binds insertHandoff, then the source for returned.
const redecide = `UPDATE handoffs SET source_id = ?, result = ?, reason = ?, action = ?, target = ?, before_sha256 = ?,
		after_sha256 = ?, run_id = ?, ingested_at = ?
	WHERE id = ` + shaID + ` AND ` + returned

// pastDecisions marks a returned content's done decisions past.
const pastDecisions = `UPDATE decisions SET state = '` + DecisionPast + `' WHERE sha256 = ? AND state = '` + DecisionDone + `'`

// finishReturn records f, a return, in tx: its content's handoff row now
// says what became of the return, and the decisions about the content's
// earlier ingest are past. It reports false, having written nothing, when
// f is not a return after all.
func finishReturn(ctx context.Context, tx *sql.Tx, f Finished, runID, at string) (bool, error) {
	o, s := f.O, f.Src
	res, err := tx.ExecContext(ctx, redecide, s.ID, o.Result, o.Reason, o.Action, o.Target, o.Before, o.After, runID, at,
		s.SHA256, s.Host, s.Inbox, s.Name, s.SHA256, s.ID)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, pastDecisions, s.SHA256)
	return err == nil, err
}

// returnedHandoff is true, in SQL, when the handoff row of the plan
// (plans.sha_id) is a return's: a person's decision about it takes over
// the content's done plan as the ingester's plan does (replanReturn).
const returnedHandoff = `EXISTS (SELECT 1 FROM handoffs h JOIN sources r ON r.id = h.source_id JOIN sources e
		ON e.host = r.host AND e.inbox = r.inbox AND e.name = r.name AND e.sha256 = r.sha256 AND e.id < r.id
	WHERE h.id = plans.sha_id)`

// replanReturn is InsertPlans's statement for a return's plan: the row of
// the content's finished plan is taken over (its backups keep their
// names: the return's plan numbers its replans past the old one's,
// PlanReplans). An open plan of the content is never taken over.
const replanReturn = `INSERT INTO plans
		(sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, replans, state, run_id, created_at)
		VALUES (` + shaID + `, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (sha_id) DO UPDATE SET source_id = excluded.source_id, kind = excluded.kind, action = excluded.action,
		target = excluded.target, before_sha256 = excluded.before_sha256, after_sha256 = excluded.after_sha256,
		content = excluded.content, backup = '', replans = excluded.replans, state = excluded.state,
		run_id = excluded.run_id, created_at = excluded.created_at
	WHERE plans.state != '` + planPlanned + `' AND excluded.replans > plans.replans
	RETURNING id`

// PlanReplans returns the replans count of content sha's plan, or -1
// when it has none: a return's plan counts on from it, so that its
// backup gets a name of its own.
func (l *Ledger) PlanReplans(ctx context.Context, sha string) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT replans FROM plans WHERE sha_id = `+shaID, sha).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	return n, err
}

// Returning reports whether source id is a return: an earlier source of
// its name held the same bytes. Recover asks it of an open plan's
// source; a batch knows it from Earlier.
func (l *Ledger) Returning(ctx context.Context, s SourceRow) (bool, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) WHERE `+returned, s.Host, s.Inbox, s.Name, s.SHA256, s.ID).Scan(&n)
	return n > 0, err
}
