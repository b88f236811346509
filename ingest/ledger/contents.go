package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/handoff-sync/handoff/claim/spool"
)

// migrationContents is migration 7: the exact bytes of every stored
// handoff, by SHA-256, kept in the ledger itself so that a pull's batch is
// made durable by the same commit that records its sources (one fsync of
// the write-ahead log a batch, not a file, a rename and an fsync a
// handoff). Earlier versions kept them as .handoff/spool/<sha256>.md;
// those files are still read (Store). Migration 10 keys it by the
// content's number (shas.go).
const migrationContents = `CREATE TABLE contents (
	sha256 TEXT PRIMARY KEY,
	data   BLOB NOT NULL
);`

// putContents inserts contents not stored yet, each under its number
// (shas.go); one already stored is left as it is (a content is never
// rewritten). A content whose bytes do not hash to its key is refused, so
// a key always names its bytes. stmt is prepared on first use.
func putContents(ctx context.Context, tx *writeTx, nums *numbers, stmt **sql.Stmt, contents map[string][]byte) error {
	if len(contents) == 0 {
		return nil
	}
	if *stmt == nil {
		var err error
		if *stmt, err = tx.PrepareContext(ctx, `INSERT OR IGNORE INTO contents (id, sha256, data) VALUES (?, ?, ?)`); err != nil {
			return err
		}
	}
	for sha, data := range contents {
		if spool.Hash(data) != sha {
			return fmt.Errorf("ledger: content %s: its bytes hash to %s", sha, spool.Hash(data))
		}
		id, err := nums.of(ctx, tx, sha)
		if err != nil {
			return err
		}
		if data == nil {
			data = []byte{} // an empty blob, not NULL, which OR IGNORE would skip
		}
		if _, err := (*stmt).ExecContext(rowContext(ctx), id, sha, data); err != nil {
			return err
		}
	}
	return nil
}

// PutContents stores contents in one transaction; see putContents.
func (l *Ledger) PutContents(ctx context.Context, contents map[string][]byte) error {
	return l.Apply(ctx, "", []*Write{{Contents: contents}})
}

// DeleteContents removes the stored bytes of these hashes in one
// transaction and returns the hashes that had bytes and their size in
// all. prune.Spool calls it for handoffs that are done with; nothing else
// removes bytes.
func (l *Ledger) DeleteContents(ctx context.Context, shas []string) (deleted []string, size int64, err error) {
	if len(shas) == 0 {
		return nil, 0, nil
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	for _, sha := range shas {
		var z int64
		err := tx.QueryRowContext(ctx, `DELETE FROM contents WHERE id = `+shaID+` RETURNING length(data)`, sha).Scan(&z)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, 0, fmt.Errorf("ledger: delete content: %w", err)
		}
		deleted = append(deleted, sha)
		size += z
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("ledger: delete contents: %w", err)
	}
	l.fresh.drop(deleted)
	return deleted, size, nil
}

// ContentSizes returns the size of each of these hashes' stored bytes;
// a hash with none is missing from the map.
func (l *Ledger) ContentSizes(ctx context.Context, shas []string) (map[string]int64, error) {
	out := make(map[string]int64, len(shas))
	for _, sha := range shas {
		var z int64
		err := l.db.QueryRowContext(ctx, `SELECT length(data) FROM contents WHERE id = `+shaID, sha).Scan(&z)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		out[sha] = z
	}
	return out, nil
}

// Store is the store step's spool.Store: the contents table, then the
// spool directory earlier versions wrote (Legacy, read-only; may be nil).
// Put writes the contents table only. Get checks the hash whichever holds
// the bytes.
type Store struct {
	l      *Ledger // nil: a View's, which never writes
	db     *sql.DB
	legacy *spool.Dir

	once sync.Once
	get  *sql.Stmt
	err  error
}

var _ spool.Store = (*Store)(nil)

// Store returns the ledger's content store over legacy (may be nil).
func (l *Ledger) Store(legacy *spool.Dir) *Store {
	return &Store{l: l, db: l.db, legacy: legacy}
}

// Store returns a read-only content store: Put fails.
func (v *View) Store(legacy *spool.Dir) *Store {
	return &Store{db: v.l.db, legacy: legacy}
}

func (s *Store) stmt() (*sql.Stmt, error) {
	s.once.Do(func() {
		s.get, s.err = s.db.Prepare(`SELECT data FROM contents WHERE id = ` + shaID)
	})
	return s.get, s.err
}

// lookup returns the bytes the contents table holds, nil when none.
func (s *Store) lookup(sha string) ([]byte, bool, error) {
	st, err := s.stmt()
	if err != nil {
		return nil, false, fmt.Errorf("ledger: %w", err)
	}
	var data []byte
	err = st.QueryRow(sha).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("ledger: content %s: %w", sha, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, true, nil
}

// Has reports whether the content is stored, in the ledger or the legacy
// spool.
func (s *Store) Has(sha string) (bool, error) {
	var ok bool
	if err := s.db.QueryRow(`SELECT EXISTS (SELECT 1 FROM contents WHERE id = `+shaID+`)`, sha).Scan(&ok); err != nil {
		return false, fmt.Errorf("ledger: content %s: %w", sha, err)
	}
	if ok || s.legacy == nil {
		return ok, nil
	}
	return s.legacy.Has(sha)
}

// Get returns the stored bytes after checking they hash to sha:
// spool.ErrCorrupt when they do not, fs.ErrNotExist (wrapped) when
// neither the ledger nor the legacy spool holds them.
func (s *Store) Get(sha string) ([]byte, error) {
	if s.l != nil {
		// Bytes this process just committed; anything that does not
		// hash to sha is read from the table instead.
		if data, ok := s.l.fresh.take(sha); ok && spool.Hash(data) == sha {
			return data, nil
		}
	}
	data, ok, err := s.lookup(sha)
	if err != nil {
		return nil, err
	}
	if ok {
		if spool.Hash(data) != sha {
			return nil, fmt.Errorf("ledger: content %s: %w", sha, spool.ErrCorrupt)
		}
		return data, nil
	}
	if s.legacy != nil {
		return s.legacy.Get(sha)
	}
	return nil, fmt.Errorf("ledger: content %s: %w", sha, fs.ErrNotExist)
}

// Put stores a batch in one transaction: durable when it returns nil.
func (s *Store) Put(batch map[string][]byte) error {
	if s.l == nil {
		return errors.New("ledger: a read-only view stores nothing")
	}
	return s.l.PutContents(context.Background(), batch)
}

// Close releases the prepared statement; the ledger stays open.
func (s *Store) Close() error {
	if s.get != nil {
		return s.get.Close()
	}
	return nil
}
