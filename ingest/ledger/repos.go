package ledger

// Repositories and threads: which repository each inbox belongs to, as
// the pulls found it (internal/repoid), and which earlier handoff each
// handoff continues. The mirror's repos/ and `handoff where` read them
// (internal/continuity; docs/design.md, "Continuity").

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/receipts"
)

// migrationRepos is the inbox_repos and threads tables (migration 6).
// An inbox's row is its repository as the newest pull that read it
// found it; a handoff's thread row names what it continues, as its
// Continues section wrote it, normalized (ingest.ContinuesKey). Both are
// WITHOUT ROWID, keyed by what they are looked up by: one b-tree each
// and no index beside it, so that a new workspace's ledger grows by two
// pages. threads is small (only handoffs that continue another have a
// row), so ThreadsNaming scans it.
const migrationRepos = `CREATE TABLE inbox_repos (
		host    TEXT NOT NULL,
		inbox   TEXT NOT NULL,
		repo    TEXT NOT NULL,
		origin  TEXT NOT NULL DEFAULT '',
		problem TEXT NOT NULL DEFAULT '',
		home    TEXT NOT NULL DEFAULT '',
		run_id  TEXT NOT NULL,
		seen_at TEXT NOT NULL,
		PRIMARY KEY (host, inbox)
	) WITHOUT ROWID;
	CREATE TABLE threads (
		sha256    TEXT PRIMARY KEY,
		continues TEXT NOT NULL
	) WITHOUT ROWID;`

// InboxRepo is an inbox's repository as a pull found it.
type InboxRepo struct {
	Host, Inbox string
	// Repo is the repository directory on the host; Origin its normalized
	// origin remote ("" when none); Problem why the origin could not be
	// read; Home the login's home on the host then ("" when unknown).
	Repo, Origin, Problem, Home string
	RunID                       string
	SeenAt                      time.Time
}

// RecordRepos records what a run's pulls found of the inboxes'
// repositories, replacing what earlier runs found of the same inboxes.
func (l *Ledger) RecordRepos(ctx context.Context, runID string, rows []InboxRepo) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger: record repositories: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO inbox_repos (host, inbox, repo, origin, problem, home, run_id, seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (host, inbox) DO UPDATE SET repo = excluded.repo, origin = excluded.origin, problem = excluded.problem,
			home = excluded.home, run_id = excluded.run_id, seen_at = excluded.seen_at`)
	if err != nil {
		return fmt.Errorf("ledger: record repositories: %w", err)
	}
	defer st.Close()
	at := now()
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r.Host, r.Inbox, r.Repo, r.Origin, r.Problem, r.Home, runID, at); err != nil {
			return fmt.Errorf("ledger: record repositories: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: record repositories: %w", err)
	}
	return nil
}

// RecordThreads records, for each handoff by SHA-256, the key of the
// earlier handoff it continues. A handoff's bytes never change, so a
// recorded row is kept as it is.
func (l *Ledger) RecordThreads(ctx context.Context, continues map[string]string) error {
	if len(continues) == 0 {
		return nil
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger: record threads: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO threads (sha256, continues) VALUES (?, ?) ON CONFLICT (sha256) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("ledger: record threads: %w", err)
	}
	defer st.Close()
	for sha, key := range continues {
		if _, err := st.ExecContext(ctx, sha, key); err != nil {
			return fmt.Errorf("ledger: record threads: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: record threads: %w", err)
	}
	return nil
}

// InboxRepos returns every inbox's recorded repository, by host and inbox.
func (l *Ledger) InboxRepos(ctx context.Context) ([]InboxRepo, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT host, inbox, repo, origin, problem, home, run_id, seen_at
		FROM inbox_repos ORDER BY host, inbox`)
	if err != nil {
		return nil, fmt.Errorf("ledger: repositories: %w", err)
	}
	defer rows.Close()
	var out []InboxRepo
	for rows.Next() {
		var r InboxRepo
		var at string
		if err := rows.Scan(&r.Host, &r.Inbox, &r.Repo, &r.Origin, &r.Problem, &r.Home, &r.RunID, &at); err != nil {
			return nil, fmt.Errorf("ledger: repositories: %w", err)
		}
		r.SeenAt = parseTime(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: repositories: %w", err)
	}
	return out, nil
}

// RepoSource is a stored source of an inbox whose repository is known,
// with what became of its content and what it continues.
type RepoSource struct {
	SourceRecord
	// Continues is the thread key it names (RecordThreads), "" for none.
	Continues string
	// InboxRows is how many rows RepoSources found of its inbox, those
	// it left out included, counted up to MaxInboxRows+1: more than
	// MaxInboxRows means at least that many.
	InboxRows int
}

// RepoSources returns, for each of hosts, that host's sources of inboxes
// with a recorded repository stored at or after since (to the second),
// newest first: of each inbox at most perInbox, the newest, and of each
// host at most perHost. Each host's rows are its own share, so that no
// host's rows push another's out. Rows that are no handoff never count
// against a share and are not returned: malformed (the source or its
// content), rejected, a copy of content another source brought, and
// `handoff import processed` records (result legacy). Each row carries
// how many rows of its inbox there are (InboxRows), so that a caller can
// say what it was not given.
func (l *Ledger) RepoSources(ctx context.Context, hosts []string, since time.Time, perInbox, perHost int) ([]RepoSource, error) {
	var out []RepoSource
	for _, host := range hosts {
		rs, err := l.repoSources(ctx, host, since, perInbox, perHost)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	slices.SortFunc(out, func(a, b RepoSource) int { return cmp.Compare(b.ID, a.ID) })
	return out, nil
}

// MaxInboxRows bounds the count of an inbox's rows that RepoSources
// gives (RepoSource.InboxRows): past it, a count says "at least", and
// reading it costs no more however long the inbox's history.
const MaxInboxRows = 1_000

// repoFilter keeps, of the sources s (their content's row hs), the
// handoffs of one inbox of one host stored at or after a time: bound as
// host, inbox, since. Rows that are no handoff are skipped by SQLite, so a
// flood of junk never fills a share.
const repoFilter = `s.host = ? AND s.inbox = ? AND s.stored_at >= ?
	AND s.result NOT IN ('` + receipts.ResultLegacy + `', '` + receipts.ResultMalformed + `', '` + receipts.ResultRejected + `')
	AND (hs.result IS NULL OR hs.result != '` + receipts.ResultMalformed + `')
	AND NOT (s.result = '` + receipts.ResultDuplicate + `' AND hs.source_id IS NOT NULL AND hs.source_id != s.id)`

// repoSources is one host's share of RepoSources. Each inbox is read
// newest first down sources_inbox (host, inbox, id), as far as its share
// and no further, and its rows are counted up to MaxInboxRows+1: an idle
// build's work does not grow with an inbox's history (issue 46: 16,000
// handoffs in one repository made a build read and sort every row of the
// host).
func (l *Ledger) repoSources(ctx context.Context, host string, since time.Time, perInbox, limit int) ([]RepoSource, error) {
	at := since.UTC().Format(time.RFC3339)
	byInbox := func(alias string) string {
		return strings.NewReplacer("s.host = ?", "s.host = "+alias+".host", "s.inbox = ?", "s.inbox = "+alias+".inbox").Replace(repoFilter)
	}
	counts := map[string]int{}
	rows, err := l.db.QueryContext(ctx, `SELECT r.inbox, (SELECT count(*) FROM (SELECT 1 FROM sources s LEFT JOIN handoffs hs ON hs.id = s.sha_id
			WHERE `+byInbox("r")+` ORDER BY s.id DESC LIMIT ?))
		FROM inbox_repos r WHERE r.host = ?`, at, MaxInboxRows+1, host)
	if err != nil {
		return nil, fmt.Errorf("ledger: repository sources: %w", err)
	}
	for rows.Next() {
		var inbox string
		var n int
		if err := rows.Scan(&inbox, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: repository sources: %w", err)
		}
		counts[inbox] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: repository sources: %w", err)
	}
	rows, err = l.db.QueryContext(ctx, `SELECT
			t.id, t.sha256, t.size, t.host, t.inbox, t.name, t.archived_as, t.stored_at, t.stored_run, t.result, t.reason,
			h.source_id, h.result, h.reason, h.action, h.target, h.before_sha256, h.after_sha256,
			COALESCE(th.continues, '')
		FROM inbox_repos r
		JOIN sources t ON t.id IN (SELECT s.id FROM sources s LEFT JOIN handoffs hs ON hs.id = s.sha_id
			WHERE `+byInbox("r")+` ORDER BY s.id DESC LIMIT ?)
		LEFT JOIN handoffs h ON h.id = t.sha_id
		LEFT JOIN threads th ON th.sha256 = t.sha256
		WHERE r.host = ?
		ORDER BY t.id DESC
		LIMIT ?`, at, perInbox, host, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: repository sources: %w", err)
	}
	defer rows.Close()
	var out []RepoSource
	for rows.Next() {
		var s RepoSource
		var storedAt string
		var hSource sql.NullInt64
		var hResult, hReason, hAction, hTarget, hBefore, hAfter sql.NullString
		if err := rows.Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs, &storedAt, &s.StoredRun, &s.Result, &s.Reason,
			&hSource, &hResult, &hReason, &hAction, &hTarget, &hBefore, &hAfter, &s.Continues); err != nil {
			return nil, fmt.Errorf("ledger: repository sources: %w", err)
		}
		s.StoredAt = parseTime(storedAt)
		s.InboxRows = counts[s.Inbox]
		if hSource.Valid {
			s.Content = &ContentRecord{SourceID: hSource.Int64, Result: hResult.String, Reason: hReason.String, Action: hAction.String,
				Target: hTarget.String, BeforeSHA256: hBefore.String, AfterSHA256: hAfter.String}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: repository sources: %w", err)
	}
	return out, nil
}

// ThreadsNaming returns, by SHA-256, the handoffs whose thread row names
// one of keys: the file names, archived names and hashes by which a
// handoff can be continued. A key of hex digits also matches a thread row
// holding a prefix of it (a Continues section may give a hash's start).
func (l *Ledger) ThreadsNaming(ctx context.Context, names []string, sha string) (map[string]string, error) {
	var conds []string
	var args []any
	if len(names) > 0 {
		conds = append(conds, "continues IN (?"+strings.Repeat(", ?", len(names)-1)+")")
		for _, n := range names {
			args = append(args, n)
		}
	}
	if sha != "" {
		conds = append(conds, "(length(continues) >= ? AND continues NOT GLOB '*[^0-9a-f]*' AND substr(?, 1, length(continues)) = continues)")
		args = append(args, MinSHAPrefix, strings.ToLower(sha))
	}
	if len(conds) == 0 {
		return nil, nil
	}
	rows, err := l.db.QueryContext(ctx, `SELECT sha256, continues FROM threads WHERE `+strings.Join(conds, " OR "), args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: threads: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var s, c string
		if err := rows.Scan(&s, &c); err != nil {
			return nil, fmt.Errorf("ledger: threads: %w", err)
		}
		out[s] = c
	}
	return out, rows.Err()
}

// ThreadsNaming is the ledger's (see Ledger.ThreadsNaming).
func (v *View) ThreadsNaming(ctx context.Context, names []string, sha string) (map[string]string, error) {
	return v.l.ThreadsNaming(ctx, names, sha)
}

// Continues returns the thread key a handoff names, "" for none.
func (v *View) Continues(ctx context.Context, sha string) (string, error) {
	var c string
	err := v.l.db.QueryRowContext(ctx, `SELECT continues FROM threads WHERE sha256 = ?`, sha).Scan(&c)
	if err == sql.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ledger: threads: %w", err)
	}
	return c, nil
}
