package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/receipts"
)

// Ledger is the ingester's SQLite database: every stored source, every
// distinct handoff and what became of it, every plan, every run. It runs in
// WAL mode with synchronous=FULL, so a committed transaction survives power
// loss. A process's writers take turns (writeTurn), and each takes
// SQLite's write lock up front; they wait up to busyTimeout for each
// other.
type Ledger struct {
	db   *sql.DB
	turn writeTurn // nil in a View, which never writes
	// fresh holds contents this process committed until the ingester
	// takes them (fresh.go).
	fresh freshContents
	ckpt  *checkpointer // nil in a View
}

var _ claim.Recorder = (*Ledger)(nil)

const busyTimeout = 30 * time.Second

// migrations are applied in order; PRAGMA user_version counts the applied
// ones. Never edit a released migration: append a new one.
var migrations = []string{
	`CREATE TABLE sources (
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
		UNIQUE (host, inbox, name, sha256)
	);
	CREATE INDEX sources_pending ON sources (result, id);
	CREATE INDEX sources_sha ON sources (sha256);
	CREATE INDEX sources_name ON sources (name);
	CREATE TABLE handoffs (
		sha256        TEXT PRIMARY KEY,
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
	CREATE TABLE plans (
		id            INTEGER PRIMARY KEY,
		sha256        TEXT NOT NULL UNIQUE,
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
	CREATE TABLE runs (
		run_id      TEXT PRIMARY KEY,
		started_at  TEXT NOT NULL,
		finished_at TEXT NOT NULL DEFAULT '',
		mode        TEXT NOT NULL,
		Outcome     TEXT NOT NULL DEFAULT '',
		status      TEXT NOT NULL DEFAULT '',
		receipt     TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE rejects (
		id          INTEGER PRIMARY KEY,
		run_id      TEXT NOT NULL,
		host        TEXT NOT NULL,
		inbox       TEXT NOT NULL,
		name        TEXT NOT NULL,
		size        INTEGER NOT NULL,
		reason      TEXT NOT NULL,
		archived_as TEXT NOT NULL DEFAULT '',
		at          TEXT NOT NULL
	);`,
	migrationDecisions,
	// 3: what confirmArchived asks every run, without visiting every
	// source an inbox ever held.
	`CREATE INDEX sources_unacked ON sources (host, inbox, id) WHERE acked = 0;`,
	// 4: a handoff's earlier versions, for revisions.
	migrationVersions,
	// 5: the workspace's identity.
	migrationIdentity,
	// 6: inboxes' repositories and handoffs' threads (repos.go).
	migrationRepos,
	// 7: stored handoffs' bytes (contents.go).
	migrationContents,
	// 8: the plans still open. Every ingest pass asks for them (Recover),
	// doctor counts them and prune keeps their contents; without it each
	// read every plan ever made (50-80 ms of a 1.8 s idle tick in a
	// workspace of 200,000 handoffs). It holds only the open plans, none
	// between runs. The queries name the state literally, so that the
	// index's WHERE term matches theirs as written.
	`CREATE INDEX plans_open ON plans (id) WHERE state = 'planned';`,
	// 9: sources_by_name (migration 4) repeats the unique index on
	// (host, inbox, name, sha256), which answers the same lookups (the
	// query planner uses it for Versions, covering). Every stored source
	// put an entry in both at a random place: in a workspace of 200,000
	// handoffs the two are 16,000 pages that a run's inserts touch at
	// random (issue 34).
	`DROP INDEX IF EXISTS sources_by_name;`,
	// 10: contents numbered, and keyed by number (shas.go).
	migrationSHAs,
	// 11: review drafts' names under .handoff/review (drafts.go).
	migrationDrafts,
	// 12: the normal texts of contents not in normal form (texts.go).
	migrationTexts,
	// 13: what RECENT.md shows of a handoff, kept past prune (notes.go).
	migrationNotes,
	// 14: a source recorded again when its name returns to earlier
	// bytes (returns.go).
	migrationReturns,
}

// Plan states.
const (
	planPlanned   = "planned"
	planDone      = "done"
	planAbandoned = "abandoned"
)

// Open opens (creating and migrating if needed) the ledger at path. The
// database file, its -wal and its -shm are 0600 whatever the umask.
func Open(path string) (*Ledger, error) {
	if err := private(path); err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	// A statement that may write more than one row (an INSERT ... SELECT,
	// as recordSource is) keeps a statement journal of the pages it
	// changes. Past 64 KiB SQLite moves that journal to a temporary file
	// and then rewrites it for every statement of the transaction: 34
	// pwrite calls a recorded source, a tenth of a bulk run's CPU in
	// the run process. In memory it costs a copy of each page. Sorts
	// that outgrow the cache stay in memory too; the ledger's largest,
	// a year of handoffs, is tens of MiB.
	q.Add("_pragma", "temp_store(MEMORY)")
	// A checkpoint copies every page the log holds into the database
	// and syncs it; SQLite's default, every 1,000 pages, made a run on a
	// big workspace copy the pages its random-keyed indexes share again
	// and again (0.8 s of a bulk run's CPU). Every 10,000 pages (40 MiB
	// of log at most) copies each once or twice; the log is folded in
	// and removed when the run closes the ledger, as before.
	q.Add("_pragma", "wal_autocheckpoint(10000)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", path, err)
	}
	l := &Ledger{db: db, turn: make(writeTurn, 1)}
	if err := l.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger: %s: %w", path, err)
	}
	l.startCheckpoints()
	return l, nil
}

// private creates the database file 0600 before SQLite opens it. SQLite
// would create it 0644 less the umask, and it gives the -wal and -shm
// files it creates the database file's mode, umask or not, so all three
// are then 0600. A ledger an earlier version left wider is narrowed, and
// so are a -wal and -shm a run left behind. A symlinked ledger is left to
// SQLite.
func private(path string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		flag := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
		if suffix == "" {
			flag |= os.O_CREATE
		}
		f, err := os.OpenFile(path+suffix, flag, 0o600)
		if errors.Is(err, fs.ErrNotExist) && suffix != "" || errors.Is(err, syscall.ELOOP) {
			continue
		}
		if err != nil {
			return err
		}
		err = durable.Narrow(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database, which folds what is left of the log into
// it.
func (l *Ledger) Close() error {
	l.ckpt.close()
	return l.db.Close()
}

// DB is the ledger's database, for tests that look at its rows; what
// writes goes through the methods, which keep the guarantees.
func (l *Ledger) DB() *sql.DB { return l.db }

func (l *Ledger) migrate() error {
	// An up-to-date ledger (every open but the first) is only read: no
	// write lock, no commit, so that many workers opening it at once do
	// not queue behind each other.
	var current int
	if err := l.db.QueryRow(`PRAGMA user_version`).Scan(&current); err != nil {
		return err
	}
	if current == len(migrations) {
		return nil
	}
	ctx := context.Background()
	release, err := l.turn.take(ctx)
	if err != nil {
		return err
	}
	defer release()
	// A migration that rebuilds a table others refer to runs with
	// foreign keys off, as SQLite asks; a transaction cannot turn them
	// off, so it is done on this connection, before the transaction, and
	// undone before the connection goes back to the pool.
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
		return err
	}
	defer conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this handoff (%d); upgrade handoff", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.Exec(migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	// With foreign keys off nothing checked them: every reference must
	// still find its row, or nothing is committed.
	var bad int
	if err := tx.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&bad); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("migration: %d rows refer to rows that are not there (PRAGMA foreign_key_check)", bad)
	}
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

// IntegrityCheck runs PRAGMA integrity_check and returns nil when it says ok.
func (l *Ledger) IntegrityCheck(ctx context.Context) error {
	var res string
	if err := l.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("ledger: integrity check: %s", res)
	}
	var n int
	if err := l.db.QueryRowContext(ctx, shaConsistency).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("ledger: integrity check: %d %w", n, ErrNumbersDisagree)
	}
	return nil
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// RecordSources records sources whose contents are stored already, in one
// transaction.
func (l *Ledger) RecordSources(ctx context.Context, runID string, srcs []claim.Source) (int, error) {
	return l.StoreSources(ctx, runID, srcs, nil)
}

// StoreSources stores contents and records sources in one transaction:
// when it returns nil both are durable (claim.Recorder).
func (l *Ledger) StoreSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	w := &Write{Record: srcs, Contents: contents}
	err := l.Apply(ctx, runID, []*Write{w})
	return w.Added, err
}

// MarkArchived records that sources were renamed on their hosts.
func (l *Ledger) MarkArchived(ctx context.Context, srcs []claim.Source) error {
	return l.Apply(ctx, "", []*Write{{Archived: srcs}})
}

// Write is one caller's share of a commit made with Apply: contents to
// store, sources to record (their contents in this Write or stored
// before), and recorded sources renamed on their hosts.
type Write struct {
	Contents map[string][]byte // by SHA-256
	Record   []claim.Source
	Archived []claim.Source
	Added    int // set by Apply: how many of Record were new
}

// Apply makes many writes in one transaction, so that they share one
// commit (and one fsync): the pulls of all hosts record their batches
// together. Recording a source already recorded is a no-op. runID is the
// run that stored the sources. On an error nothing is written.
func (l *Ledger) Apply(ctx context.Context, runID string, ws []*Write) error {
	tx, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Prepared once a transaction: a batch is up to 256 sources, and
	// parsing the statement for each was most of the cost.
	var record, archived, content *sql.Stmt
	var nums numbers
	defer nums.close()
	defer func() {
		if content != nil {
			content.Close()
		}
	}()
	at := now()
	rctx := rowContext(ctx)
	for _, w := range ws {
		w.Added = 0
		if err := putContents(ctx, tx, &nums, &content, w.Contents); err != nil {
			return err
		}
		if len(w.Record) > 0 && record == nil {
			if record, err = tx.PrepareContext(ctx, recordSource); err != nil {
				return err
			}
			defer record.Close()
		}
		for _, s := range w.Record {
			if err := ctx.Err(); err != nil {
				return err
			}
			id, err := nums.of(ctx, tx, s.SHA256)
			if err != nil {
				return err
			}
			res, err := record.ExecContext(rctx, s.SHA256, id, s.Size, s.Host, s.Inbox, s.Name, s.ArchivedAs, at, runID,
				s.Host, s.Inbox, s.Name, s.SHA256)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				w.Added++
			}
		}
		if len(w.Archived) > 0 && archived == nil {
			if archived, err = tx.PrepareContext(ctx, `UPDATE sources SET acked = 1, archived_as = ?
				WHERE host = ? AND inbox = ? AND name = ? AND sha256 = ?`); err != nil {
				return err
			}
			defer archived.Close()
		}
		for _, s := range w.Archived {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := archived.ExecContext(rctx, s.ArchivedAs, s.Host, s.Inbox, s.Name, s.SHA256); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		for _, w := range ws {
			w.Added = 0
		}
		return err
	}
	for _, w := range ws {
		l.fresh.add(w.Contents)
	}
	return nil
}

// Unarchived returns a host's stored sources whose archive is not
// confirmed, by inbox and in the order they were stored.
func (l *Ledger) Unarchived(ctx context.Context, host string) ([]claim.Source, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT inbox, sha256, size, name, archived_as FROM sources
		WHERE host = ? AND acked = 0 ORDER BY inbox, id`, host)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []claim.Source
	for rows.Next() {
		s := claim.Source{Host: host}
		if err := rows.Scan(&s.Inbox, &s.SHA256, &s.Size, &s.Name, &s.ArchivedAs); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SourceRow is one stored source as the ingester sees it.
type SourceRow struct {
	ID         int64
	SHA256     string
	Size       int64
	Host       string
	Inbox      string
	Name       string
	ArchivedAs string
	// StoredRun is the run that stored it, and ShaID its content's
	// number (PendingSourcesAfter and Source only; 0 otherwise).
	StoredRun string
	ShaID     int64
}

// PendingSources returns every stored source without a result, in the
// order they were stored.
func (l *Ledger) PendingSources(ctx context.Context) ([]SourceRow, error) {
	return l.PendingSourcesAfter(ctx, 0, -1)
}

// PendingSourcesAfter returns up to limit (all when negative) stored
// sources without a result whose id is greater than after, in the order
// they were stored: one page of the ingester's work.
func (l *Ledger) PendingSourcesAfter(ctx context.Context, after int64, limit int) ([]SourceRow, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, sha256, size, host, inbox, name, archived_as, stored_run, sha_id
		FROM sources WHERE result = '' AND id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SourceRow
	for rows.Next() {
		var s SourceRow
		if err := rows.Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs, &s.StoredRun, &s.ShaID); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func (l *Ledger) Source(ctx context.Context, id int64) (SourceRow, error) {
	var s SourceRow
	err := l.db.QueryRowContext(ctx, `SELECT id, sha256, size, host, inbox, name, archived_as, stored_run, sha_id FROM sources WHERE id = ?`, id).
		Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs, &s.StoredRun, &s.ShaID)
	return s, err
}

// KnownHandoffs returns which of the given content hashes already have a
// result: one query for a whole batch.
func (l *Ledger) KnownHandoffs(ctx context.Context, shas []string) (map[string]bool, error) {
	return l.known(ctx, `SELECT s.sha256 FROM shas s JOIN handoffs h ON h.id = s.id WHERE s.sha256 IN `, shas)
}

// known runs query, which ends in "IN " and selects one text column,
// with the list of vals, and returns which of vals it selected.
func (l *Ledger) known(ctx context.Context, query string, vals []string) (map[string]bool, error) {
	known := map[string]bool{}
	if len(vals) == 0 {
		return known, nil
	}
	args := make([]any, len(vals))
	for i, s := range vals {
		args[i] = s
	}
	rows, err := l.db.QueryContext(ctx, query+`(?`+strings.Repeat(", ?", len(vals)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		known[s] = true
	}
	return known, rows.Err()
}

// Outcome is what the ingester decided for one source.
type Outcome struct {
	Result, Reason, Action, Target, Before, After string
}

// Finished is one source's result, ready to be recorded.
type Finished struct {
	Src    SourceRow
	O      Outcome
	PlanID int64 // the plan marked done or abandoned with it, or 0
	// Norm is the hash of the content's normal text when the content is
	// not in normal form (texts.go), else "".
	Norm string
	// Again says the source is a return (returns.go): its name held
	// these bytes before, then others. Its result becomes its content's.
	Again bool
}

// Finish records a source's result and, unless it is a copy of content
// already ingested (see Outcome.OwnResult), the handoff's, in one
// transaction. planID, when not zero, is marked done or
// abandoned in the same transaction.
func (l *Ledger) Finish(ctx context.Context, runID string, src SourceRow, o Outcome, planID int64) error {
	return l.FinishAll(ctx, runID, []Finished{{Src: src, O: o, PlanID: planID}})
}

// FinishAll records many results as Finish does, all in one transaction:
// a batch's bookkeeping costs one commit.
func (l *Ledger) FinishAll(ctx context.Context, runID string, fs []Finished) error {
	if len(fs) == 0 {
		return nil
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	srcStmt, err := tx.PrepareContext(ctx, `UPDATE sources SET result = ?, reason = ?, ingest_run = ?, ingested_at = ? WHERE id = ?`)
	if err != nil {
		return err
	}
	defer srcStmt.Close()
	var hoStmt, hoByID, planStmt, textStmt *sql.Stmt
	at := now()
	// A plan among these may be a person's decision (StartDecision): its
	// bookkeeping is the decision's too, in this transaction.
	var decided map[int64]int64
	for _, f := range fs {
		if f.PlanID != 0 {
			if decided, err = startedDecisions(ctx, tx.Tx); err != nil {
				return err
			}
			break
		}
	}
	rctx := rowContext(ctx)
	for _, f := range fs {
		if err := ctx.Err(); err != nil {
			return err
		}
		o := f.O
		d, mine := decided[f.PlanID]
		mine = mine && f.PlanID != 0
		if mine {
			// The source's and the handoff's rows are the decision's.
			if err := finishDecided(ctx, tx.Tx, d, f, runID, at); err != nil {
				return err
			}
		} else if _, err := srcStmt.ExecContext(rctx, o.Result, o.Reason, runID, at, f.Src.ID); err != nil {
			return err
		}
		own := o.OwnResult() && !mine
		if own && f.Again {
			again, err := finishReturn(rctx, tx.Tx, f, runID, at)
			if err != nil {
				return err
			}
			own = !again // recorded: no row of its own
		}
		if own {
			// A number the source row gave spares the lookup by hash.
			st, q, key := &hoStmt, insertHandoff, []any{f.Src.SHA256}
			if f.Src.ShaID != 0 {
				st, q, key = &hoByID, insertHandoffByID, []any{f.Src.ShaID, f.Src.SHA256}
			}
			if *st == nil {
				if *st, err = tx.PrepareContext(ctx, q); err != nil {
					return err
				}
				defer (*st).Close()
			}
			res, err := (*st).ExecContext(rctx, append([]any{f.Src.ID, o.Result, o.Reason, o.Action, o.Target, o.Before, o.After, runID, at}, key...)...)
			if err := one(res, err, "result of", f.Src.SHA256); err != nil {
				return err
			}
			if f.Norm != "" {
				if textStmt == nil {
					if textStmt, err = tx.PrepareContext(ctx, insertText); err != nil {
						return err
					}
					defer textStmt.Close()
				}
				if _, err := textStmt.ExecContext(rctx, f.Src.SHA256, f.Norm); err != nil {
					return err
				}
			}
		}
		if f.PlanID != 0 {
			if planStmt == nil {
				if planStmt, err = tx.PrepareContext(ctx, `UPDATE plans SET state = ? WHERE id = ?`); err != nil {
					return err
				}
				defer planStmt.Close()
			}
			state := planDone
			if o.Result == receipts.ResultReview {
				state = planAbandoned
			}
			if _, err := planStmt.ExecContext(rctx, state, f.PlanID); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// Plan is a change the ingester has decided to make to one target, as the
// ledger keeps it.
type Plan struct {
	ID       int64
	SHA256   string
	SourceID int64
	Kind     string // card | document
	Action   string
	Target   string // slash path relative to the workspace
	Before   string // SHA-256 of the target before, "" if absent
	After    string // SHA-256 of the target after
	Content  []byte // card: the whole file; document: the text appended
	Backup   string
	Replans  int
	// Again says the plan is a return's (returns.go): it takes over the
	// row of its content's finished plan.
	Again bool
}

// InsertPlans records plans in one transaction and sets their ids.
func (l *Ledger) InsertPlans(ctx context.Context, runID string, ps []*Plan) error {
	tx, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO plans
		(sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at)
		VALUES (`+shaID+`, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	at := now()
	rctx := rowContext(ctx)
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.Again {
			err := tx.QueryRowContext(rctx, replanReturn, p.SHA256, p.SHA256, p.SourceID, p.Kind, p.Action, p.Target, p.Before, p.After, p.Content,
				p.Replans, planPlanned, runID, at).Scan(&p.ID)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("ledger: the plan of %.12s is open, or its replans do not count on", p.SHA256)
			}
			if err != nil {
				return err
			}
			continue
		}
		res, err := stmt.ExecContext(rctx, p.SHA256, p.SHA256, p.SourceID, p.Kind, p.Action, p.Target, p.Before, p.After, p.Content, planPlanned, runID, at)
		if err != nil {
			return err
		}
		if p.ID, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		for _, p := range ps {
			p.ID = 0
		}
		return err
	}
	return nil
}

func (l *Ledger) UpdatePlan(ctx context.Context, p *Plan) error {
	_, err := l.exec(ctx, `UPDATE plans SET before_sha256 = ?, after_sha256 = ?, backup = ?, replans = ? WHERE id = ?`,
		p.Before, p.After, p.Backup, p.Replans, p.ID)
	return err
}

func (l *Ledger) OpenPlans(ctx context.Context) ([]*Plan, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, backup, replans
		FROM plans WHERE state = 'planned' ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Plan
	for rows.Next() {
		p := &Plan{}
		if err := rows.Scan(&p.ID, &p.SHA256, &p.SourceID, &p.Kind, &p.Action, &p.Target, &p.Before, &p.After, &p.Content, &p.Backup, &p.Replans); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// InterruptedPlans counts plans a crashed run left unfinished.
func (l *Ledger) InterruptedPlans(ctx context.Context) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM plans WHERE state = 'planned'`).Scan(&n)
	return n, err
}

// RecordReject remembers a rejected file so that `handoff where` finds it.
func (l *Ledger) RecordReject(ctx context.Context, runID string, it claim.Item, host string) error {
	_, err := l.exec(ctx, `INSERT INTO rejects (run_id, host, inbox, name, size, reason, archived_as, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, runID, host, it.Inbox, it.Name, it.Size, it.Reason, it.ArchivedAs, now())
	return err
}

// StartRun and FinishRun keep the runs table.
func (l *Ledger) StartRun(ctx context.Context, runID, mode string) error {
	_, err := l.exec(ctx, `INSERT INTO runs (run_id, started_at, mode) VALUES (?, ?, ?)`, runID, now(), mode)
	return err
}

// FinishRun records a run's Outcome and receipt path.
func (l *Ledger) FinishRun(ctx context.Context, runID, Outcome, status, receipt string) error {
	_, err := l.exec(ctx, `UPDATE runs SET finished_at = ?, Outcome = ?, status = ?, receipt = ? WHERE run_id = ?`,
		now(), Outcome, status, receipt, runID)
	return err
}

// PreviousRunFinished reports whether the run the ledger recorded last,
// other than runID, has finished, or there is none. Runs take the
// workspace lock one at a time, so an unfinished one died: the ingester
// then removes the temporary files it may have left (its receipt's). The
// order is the order of StartRun (rowid), whatever the clock said, and
// the lookup is one step down the table's rowid, however many runs there
// were.
func (l *Ledger) PreviousRunFinished(ctx context.Context, runID string) (bool, error) {
	var finished string
	err := l.db.QueryRowContext(ctx, `SELECT finished_at FROM runs WHERE run_id != ? ORDER BY rowid DESC LIMIT 1`, runID).Scan(&finished)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return finished != "", nil
}

// OwnResult reports whether o is the result of its content itself, which
// the ledger keeps by hash so that later copies of the same bytes are
// duplicates of it. Every outcome is, but that of such a copy: a duplicate
// without a reason.
func (o Outcome) OwnResult() bool {
	return o.Result != receipts.ResultDuplicate || o.Reason != ""
}
