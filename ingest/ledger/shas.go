package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrationSHAs is migration 10: every content the ledger knows gets a
// number, in the order it was first seen, and the tables that hold at
// most one row a content (contents, handoffs, plans) and the sources'
// index by content are keyed by that number instead of by the SHA-256.
//
// A SHA-256 is random, so each index keyed by one took every new handoff
// at a random page: five such indexes made a run dirty, log and
// checkpoint five random pages a handoff, and in a workspace of 200,000
// handoffs that made a bulk run's ledger work 3.4 times that of an empty
// workspace (issue 34). Numbers grow, so the new keys go to the end of
// their b-trees; shas's index on the SHA-256 is the one random insert a
// new content costs. docs/design.md, "The ledger as the memory grows".
//
// Each of those tables keeps its sha256 column, always its number's
// SHA-256 (IntegrityCheck proves it), so what is read by hash reads the
// same; only lookups by hash go through shas. SQLite cannot change a
// table's key in place, so the rebuilt tables restate migration 1's
// columns: a migration is frozen text, never built from the other.
const migrationSHAs = `CREATE TABLE shas (
		id     INTEGER PRIMARY KEY,
		sha256 TEXT NOT NULL UNIQUE
	);
	INSERT OR IGNORE INTO shas (sha256) SELECT sha256 FROM sources ORDER BY id;
	INSERT OR IGNORE INTO shas (sha256) SELECT sha256 FROM contents ORDER BY rowid;
	INSERT OR IGNORE INTO shas (sha256) SELECT sha256 FROM handoffs ORDER BY rowid;
	INSERT OR IGNORE INTO shas (sha256) SELECT sha256 FROM plans ORDER BY id;

	ALTER TABLE sources ADD COLUMN sha_id INTEGER NOT NULL DEFAULT 0;
	UPDATE sources SET sha_id = (SELECT id FROM shas WHERE shas.sha256 = sources.sha256);
	DROP INDEX sources_sha;
	CREATE INDEX sources_sha_id ON sources (sha_id);

	CREATE TABLE contents_v10 (
		id     INTEGER PRIMARY KEY,
		sha256 TEXT NOT NULL,
		data   BLOB NOT NULL
	);
	INSERT INTO contents_v10 (id, sha256, data)
		SELECT s.id, c.sha256, c.data FROM contents c JOIN shas s ON s.sha256 = c.sha256 ORDER BY s.id;
	DROP TABLE contents;
	ALTER TABLE contents_v10 RENAME TO contents;

	CREATE TABLE handoffs_v10 (
		id            INTEGER PRIMARY KEY,
		sha256        TEXT NOT NULL,
		source_id     INTEGER NOT NULL REFERENCES sources (id),
		result        TEXT NOT NULL,
		reason        TEXT NOT NULL DEFAULT '',
		action        TEXT NOT NULL DEFAULT '',
		target        TEXT NOT NULL DEFAULT '',
		before_sha256 TEXT NOT NULL DEFAULT '',
		after_sha256  TEXT NOT NULL DEFAULT '',
		run_id        TEXT NOT NULL,
		ingested_at   TEXT NOT NULL
	);
	INSERT INTO handoffs_v10 (id, sha256, source_id, result, reason, action, target, before_sha256, after_sha256, run_id, ingested_at)
		SELECT s.id, h.sha256, h.source_id, h.result, h.reason, h.action, h.target, h.before_sha256, h.after_sha256, h.run_id, h.ingested_at
		FROM handoffs h JOIN shas s ON s.sha256 = h.sha256 ORDER BY s.id;
	DROP TABLE handoffs;
	ALTER TABLE handoffs_v10 RENAME TO handoffs;

	CREATE TABLE plans_v10 (
		id            INTEGER PRIMARY KEY,
		sha_id        INTEGER NOT NULL UNIQUE,
		sha256        TEXT NOT NULL,
		source_id     INTEGER NOT NULL REFERENCES sources (id),
		kind          TEXT NOT NULL,
		action        TEXT NOT NULL,
		target        TEXT NOT NULL,
		before_sha256 TEXT NOT NULL,
		after_sha256  TEXT NOT NULL,
		content       BLOB NOT NULL,
		backup        TEXT NOT NULL DEFAULT '',
		replans       INTEGER NOT NULL DEFAULT 0,
		state         TEXT NOT NULL,
		run_id        TEXT NOT NULL,
		created_at    TEXT NOT NULL
	);
	INSERT INTO plans_v10 (id, sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, backup, replans, state, run_id, created_at)
		SELECT p.id, s.id, p.sha256, p.source_id, p.kind, p.action, p.target, p.before_sha256, p.after_sha256, p.content, p.backup, p.replans, p.state, p.run_id, p.created_at
		FROM plans p JOIN shas s ON s.sha256 = p.sha256 ORDER BY p.id;
	DROP TABLE plans;
	ALTER TABLE plans_v10 RENAME TO plans;
	CREATE INDEX plans_open ON plans (id) WHERE state = 'planned';`

// shaID is the subquery that gives a content's number; bind its SHA-256.
const shaID = `(SELECT id FROM shas WHERE sha256 = ?)`

// numbers gives contents their numbers within one write transaction,
// with statements prepared on first use: the one way a content the
// ledger may not have seen yet (a source's, stored bytes') is numbered.
// A missing number is an error here, where a subquery's NULL would be
// skipped without a word by INSERT OR IGNORE.
type numbers struct {
	add, get *sql.Stmt
	ids      map[string]int64 // given in this transaction
}

// of returns sha's number, numbering it first if the ledger has not seen
// it.
func (n *numbers) of(ctx context.Context, tx *writeTx, sha string) (int64, error) {
	if id, ok := n.ids[sha]; ok {
		return id, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n.get == nil {
		var err error
		if n.add, err = tx.PrepareContext(ctx, `INSERT INTO shas (sha256) VALUES (?) ON CONFLICT (sha256) DO NOTHING`); err != nil {
			return 0, err
		}
		if n.get, err = tx.PrepareContext(ctx, `SELECT id FROM shas WHERE sha256 = ?`); err != nil {
			return 0, err
		}
		n.ids = map[string]int64{}
	}
	// An insert's number is its row id. A statement's result, unlike a
	// row read back, costs database/sql no goroutine to watch the
	// transaction for it.
	var id int64
	rctx := rowContext(ctx)
	res, err := n.add.ExecContext(rctx, sha)
	var added int64
	if err == nil {
		added, err = res.RowsAffected()
	}
	switch {
	case err != nil:
	case added == 1:
		id, err = res.LastInsertId()
	default: // numbered before
		err = n.get.QueryRowContext(rctx, sha).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: number of %.12s: %w", sha, err)
	}
	n.ids[sha] = id
	return id, nil
}

func (n *numbers) close() {
	for _, st := range []*sql.Stmt{n.add, n.get} {
		if st != nil {
			st.Close()
		}
	}
}

// insertHandoff records a content's result under its number, taken from
// shas in the same statement: it inserts nothing when shas has no such
// content, which recordHandoff turns into an error, rather than letting
// SQLite number the row itself.
const insertHandoff = `INSERT INTO handoffs
	(id, sha256, source_id, result, reason, action, target, before_sha256, after_sha256, run_id, ingested_at)
	SELECT id, sha256, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM shas WHERE sha256 = ?`

// insertHandoffByID is insertHandoff for a content whose number the
// caller has from the ledger itself (a source row's sha_id), bound after
// the row and before the SHA-256: it does not look at shas at all, which
// made FinishAll 0.91x. IntegrityCheck proves the numbers and hashes agree.
const insertHandoffByID = `INSERT INTO handoffs
	(source_id, result, reason, action, target, before_sha256, after_sha256, run_id, ingested_at, id, sha256)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// one fails unless a statement that must write one row did.
func one(res sql.Result, err error, what, sha string) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("ledger: %s %.12s: the content has no number in shas", what, sha)
	}
	return nil
}

// ErrNumbersDisagree means rows of the ledger name a content other than
// the one their number does (IntegrityCheck). No handoff writes such
// rows: the ledger was changed outside it.
var ErrNumbersDisagree = errors.New("rows name a content other than their number's")

// shaConsistency counts rows whose sha256 is not the SHA-256 their
// number names in shas, and sources without a number: IntegrityCheck
// wants none.
const shaConsistency = `SELECT
	(SELECT count(*) FROM sources t LEFT JOIN shas s ON s.id = t.sha_id WHERE s.sha256 IS NOT t.sha256) +
	(SELECT count(*) FROM contents t LEFT JOIN shas s ON s.id = t.id WHERE s.sha256 IS NOT t.sha256) +
	(SELECT count(*) FROM handoffs t LEFT JOIN shas s ON s.id = t.id WHERE s.sha256 IS NOT t.sha256) +
	(SELECT count(*) FROM plans t LEFT JOIN shas s ON s.id = t.sha_id WHERE s.sha256 IS NOT t.sha256)`
