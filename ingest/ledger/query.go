package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/receipts"
)

// ErrNoLedger means the workspace has no ledger file: no run has stored
// anything there yet.
var ErrNoLedger = errors.New("no ledger")

// View is the ledger opened for reading only, for `handoff doctor`
// and `handoff where`. It offers no way to write.
//
// Guarantees: opening a view never creates, migrates or changes the
// database. With idle set (the caller holds the workspace lock, shared, so
// no run can write) nothing at all is created next to the ledger either: a
// cleanly closed ledger is read as an immutable file, and one that a
// crashed run left with a write-ahead log is copied, with its log, into a
// private temporary directory and read there. Without idle (a run holds the
// lock) the view reads the live files through SQLite's WAL protocol and sees
// one consistent snapshot; SQLite then shares the -wal and -shm files the
// run has open.
type View struct {
	l       *Ledger
	cleanup func()
}

// OpenReadOnly opens the ledger at path read-only; see View. A
// missing file is ErrNoLedger (wrapped); it is never created. A ledger whose
// schema this handoff does not know is an error.
func OpenReadOnly(path string, idle bool) (*View, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ledger %s: %w", path, ErrNoLedger)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("ledger %s: not a regular file", path)
	}
	v := &View{cleanup: func() {}}
	var dsn string
	_, walErr := os.Lstat(path + "-wal")
	switch {
	case !idle:
		q := url.Values{}
		q.Set("mode", "ro")
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
		dsn = fileURI(path, q)
	case errors.Is(walErr, fs.ErrNotExist):
		// Checkpointed and closed: the main file holds everything, and
		// nobody writes it while the caller holds the lock.
		q := url.Values{}
		q.Set("mode", "ro")
		q.Set("immutable", "1")
		dsn = fileURI(path, q)
	default:
		// A crashed run's log: recovering it needs write access, so work
		// on a private copy.
		tmp, err := os.MkdirTemp("", "handoff-ledger-")
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		v.cleanup = func() { os.RemoveAll(tmp) }
		copied := filepath.Join(tmp, "ledger.db")
		if err := Copy(path, copied); err != nil {
			v.cleanup()
			return nil, err
		}
		dsn = copied
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		v.cleanup()
		return nil, fmt.Errorf("ledger: open %s: %w", path, err)
	}
	v.l = &Ledger{db: db}
	if err := v.checkVersion(); err != nil {
		v.Close()
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	return v, nil
}

// fileURI renders an SQLite URI filename, escaping whatever the path holds.
func fileURI(path string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Copy copies a ledger and its write-ahead log (if any) to dst, a
// path that must not exist yet, so that a reader can work on a private
// copy. A ledger that does not exist copies as nothing.
func Copy(src, dst string) error {
	for _, suffix := range []string{"", "-wal"} {
		if err := copyPlain(src+suffix, dst+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("ledger: copy %s: %w", src+suffix, err)
		}
	}
	return nil
}

// OpenFor opens the ledger at path for a command that has a dry run: the
// ledger itself, or, in a dry run, a private copy made with Copy in a new
// temporary directory named after prefix, so that nothing done to it
// reaches path (a missing ledger gives an empty copy). done closes it
// (and removes the copy).
func OpenFor(path string, dryRun bool, prefix string) (l *Ledger, done func(), err error) {
	if !dryRun {
		if l, err = Open(path); err != nil {
			return nil, nil, err
		}
		return l, func() { l.Close() }, nil
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	copyPath := filepath.Join(tmp, "ledger.db")
	if err := Copy(path, copyPath); err != nil {
		os.RemoveAll(tmp)
		return nil, nil, fmt.Errorf("dry run: %w", err)
	}
	if l, err = Open(copyPath); err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	return l, func() { l.Close(); os.RemoveAll(tmp) }, nil
}

func copyPlain(src, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(src, "-wal") {
		return nil // checkpointed and removed meanwhile
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (v *View) checkVersion() error {
	var version int
	if err := v.l.db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	switch {
	case version > len(migrations):
		return fmt.Errorf("schema version %d is newer than this handoff (%d); upgrade handoff", version, len(migrations))
	case version < len(migrations):
		return fmt.Errorf("schema version %d is older than this handoff (%d); the next `handoff sync` upgrades it", version, len(migrations))
	}
	return nil
}

// Close closes the view and removes its private copy, if any.
func (v *View) Close() error {
	err := v.l.Close()
	v.cleanup()
	return err
}

// IntegrityCheck runs PRAGMA integrity_check; nil means "ok".
func (v *View) IntegrityCheck(ctx context.Context) error { return v.l.IntegrityCheck(ctx) }

// InterruptedPlans counts plans a run started and did not finish.
func (v *View) InterruptedPlans(ctx context.Context) (int, error) {
	return v.l.InterruptedPlans(ctx)
}

// Totals are the ledger's counts for `handoff doctor`.
type Totals struct {
	Sources  int            // stored sources (every copy)
	Pending  int            // stored sources not ingested yet
	Results  map[string]int // distinct handoffs (by content) by result
	Rejected int            // rejected files recorded
}

// Totals counts sources, pending sources, handoffs by result and rejects.
func (v *View) Totals(ctx context.Context) (Totals, error) {
	t := Totals{Results: map[string]int{}}
	db := v.l.db
	if err := db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(result = ''), 0) FROM sources`).Scan(&t.Sources, &t.Pending); err != nil {
		return t, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM rejects`).Scan(&t.Rejected); err != nil {
		return t, err
	}
	rows, err := db.QueryContext(ctx, `SELECT result, count(*) FROM handoffs GROUP BY result`)
	if err != nil {
		return t, err
	}
	defer rows.Close()
	for rows.Next() {
		var r string
		var n int
		if err := rows.Scan(&r, &n); err != nil {
			return t, err
		}
		t.Results[r] = n
	}
	return t, rows.Err()
}

// SourceRecord is one stored source and what became of it.
type SourceRecord struct {
	ID         int64
	SHA256     string
	Size       int64
	Host       string
	Inbox      string
	Name       string
	ArchivedAs string // relative to Inbox, decided before the rename
	Archived   bool   // the rename on the host is confirmed
	StoredAt   time.Time
	StoredRun  string
	Result     string // "" while not ingested yet
	Reason     string
	IngestRun  string
	IngestedAt time.Time
	// Content is what became of these bytes: the handoffs row written when
	// the first source of this content was ingested. For a duplicate it is
	// the applied copy's. Nil when no source of these bytes is ingested.
	Content *ContentRecord
}

// ContentRecord is the result of one distinct handoff (by content), with
// the source whose copy got it.
type ContentRecord struct {
	SourceID     int64
	Result       string
	Reason       string
	Action       string
	Target       string
	BeforeSHA256 string
	AfterSHA256  string
	RunID        string
	IngestedAt   time.Time
	// The applied source.
	Host, Inbox, Name, ArchivedAs string
}

// RejectRecord is one rejected file: never read, moved into malformed/.
type RejectRecord struct {
	ID         int64
	RunID      string
	Host       string
	Inbox      string
	Name       string
	Size       int64
	Reason     string
	ArchivedAs string // relative to Inbox; "" when the move failed
	At         time.Time
}

// MinSHAPrefix is the shortest hex prefix FindSources matches hashes by.
const MinSHAPrefix = 4

// IsSHAPrefix reports whether q can name a handoff by the start of its
// SHA-256: MinSHAPrefix to 64 hex digits, either case.
func IsSHAPrefix(q string) bool {
	if len(q) < MinSHAPrefix || len(q) > 64 {
		return false
	}
	for _, c := range q {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// nameConds matches q against a table's host, inbox, name and archived_as:
// the name as found, the name without ".md", the archived name (as in
// processed/<stem>.<sha12>.md, with or without the directory), and the
// full path, bare or as host:path.
func nameConds(q string) (string, []any) {
	conds := []string{
		"t.name = ?", "t.name = ?",
		"t.archived_as = ?", "t.archived_as = ?", "t.archived_as = ?",
		"t.inbox || '/' || t.name = ?", "t.inbox || '/' || t.archived_as = ?",
		"t.host || ':' || t.inbox || '/' || t.name = ?", "t.host || ':' || t.inbox || '/' || t.archived_as = ?",
	}
	args := []any{q, q + ".md", q, "processed/" + q, "malformed/" + q, q, q, q, q}
	return strings.Join(conds, " OR "), args
}

// FindSources returns the stored sources that q names (see nameConds) or
// whose SHA-256 starts with q (IsSHAPrefix), oldest first.
func (v *View) FindSources(ctx context.Context, q string) ([]SourceRecord, error) {
	where, args := nameConds(q)
	if IsSHAPrefix(q) {
		// A range on shas's index: every hash with this prefix.
		lo := strings.ToLower(q)
		where += " OR t.sha_id IN (SELECT id FROM shas WHERE sha256 >= ? AND sha256 < ?)"
		args = append(args, lo, lo+"g")
	}
	return v.findSources(ctx, where, args)
}

// findSources returns the sources (table alias t) that where selects,
// with what became of their content, oldest first.
func (v *View) findSources(ctx context.Context, where string, args []any) ([]SourceRecord, error) {
	rows, err := v.l.db.QueryContext(ctx, `SELECT
			t.id, t.sha256, t.size, t.host, t.inbox, t.name, t.archived_as, t.acked,
			t.stored_at, t.stored_run, t.result, t.reason, t.ingest_run, t.ingested_at,
			h.source_id, h.result, h.reason, h.action, h.target, h.before_sha256, h.after_sha256, h.run_id, h.ingested_at,
			a.host, a.inbox, a.name, a.archived_as
		FROM sources t
		LEFT JOIN handoffs h ON h.id = t.sha_id
		LEFT JOIN sources a ON a.id = h.source_id
		WHERE `+where+`
		ORDER BY t.stored_at, t.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: find sources: %w", err)
	}
	defer rows.Close()
	var out []SourceRecord
	for rows.Next() {
		var s SourceRecord
		var acked int
		var storedAt, ingestedAt string
		var hSource sql.NullInt64
		var hResult, hReason, hAction, hTarget, hBefore, hAfter, hRun, hAt, aHost, aInbox, aName, aArch sql.NullString
		if err := rows.Scan(&s.ID, &s.SHA256, &s.Size, &s.Host, &s.Inbox, &s.Name, &s.ArchivedAs, &acked,
			&storedAt, &s.StoredRun, &s.Result, &s.Reason, &s.IngestRun, &ingestedAt,
			&hSource, &hResult, &hReason, &hAction, &hTarget, &hBefore, &hAfter, &hRun, &hAt,
			&aHost, &aInbox, &aName, &aArch); err != nil {
			return nil, fmt.Errorf("ledger: find sources: %w", err)
		}
		s.Archived = acked != 0
		s.StoredAt, s.IngestedAt = parseTime(storedAt), parseTime(ingestedAt)
		if hSource.Valid {
			s.Content = &ContentRecord{
				SourceID: hSource.Int64, Result: hResult.String, Reason: hReason.String, Action: hAction.String,
				Target: hTarget.String, BeforeSHA256: hBefore.String, AfterSHA256: hAfter.String,
				RunID: hRun.String, IngestedAt: parseTime(hAt.String),
				Host: aHost.String, Inbox: aInbox.String, Name: aName.String, ArchivedAs: aArch.String,
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: find sources: %w", err)
	}
	return out, nil
}

// FindRejects returns the rejected files that q names (see nameConds),
// oldest first.
func (v *View) FindRejects(ctx context.Context, q string) ([]RejectRecord, error) {
	where, args := nameConds(q)
	rows, err := v.l.db.QueryContext(ctx, `SELECT t.id, t.run_id, t.host, t.inbox, t.name, t.size, t.reason, t.archived_as, t.at
		FROM rejects t WHERE `+where+` ORDER BY t.at, t.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: find rejects: %w", err)
	}
	defer rows.Close()
	var out []RejectRecord
	for rows.Next() {
		var r RejectRecord
		var at string
		if err := rows.Scan(&r.ID, &r.RunID, &r.Host, &r.Inbox, &r.Name, &r.Size, &r.Reason, &r.ArchivedAs, &at); err != nil {
			return nil, fmt.Errorf("ledger: find rejects: %w", err)
		}
		r.At = parseTime(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: find rejects: %w", err)
	}
	return out, nil
}

// parseTime reads a ledger timestamp (RFC 3339, UTC); zero if empty or bad.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// PrunableSpool returns, sorted, the hashes whose spool files may be
// removed (prune.Spool): every source of that content has a result,
// none is malformed, no plan for it is open, and the latest source was
// ingested before before (from hosts only, when hosts is not empty). Timestamps are compared as times, not as strings (RFC 3339 with
// trimmed fractions does not sort as text); a timestamp that does not parse
// keeps the file.
func (l *Ledger) PrunableSpool(ctx context.Context, before time.Time, hosts []string) ([]string, error) {
	type agg struct {
		keep   bool
		latest time.Time
	}
	by := map[string]*agg{}
	rows, err := l.db.QueryContext(ctx, `SELECT sha256, host, result, ingested_at FROM sources`)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	for rows.Next() {
		var sha, host, result, at string
		if err := rows.Scan(&sha, &host, &result, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		a := by[sha]
		if a == nil {
			a = &agg{}
			by[sha] = a
		}
		t, perr := time.Parse(time.RFC3339Nano, at)
		switch {
		case result == "" || result == receipts.ResultMalformed || perr != nil:
			a.keep = true
		case len(hosts) > 0 && !slices.Contains(hosts, host):
			a.keep = true
		case t.After(a.latest):
			a.latest = t
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	// A plan still open (a crashed run's) keeps its content, whatever the
	// sources say.
	open, err := l.db.QueryContext(ctx, `SELECT sha256 FROM plans WHERE state = 'planned'`)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	for open.Next() {
		var sha string
		if err := open.Scan(&sha); err != nil {
			open.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		if a := by[sha]; a != nil {
			a.keep = true
		}
	}
	open.Close()
	if err := open.Err(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var out []string
	for sha, a := range by {
		if !a.keep && a.latest.Before(before) && isSHA256(sha) {
			out = append(out, sha)
		}
	}
	sort.Strings(out)
	return out, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
