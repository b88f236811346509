package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// migrationNotes is the notes table (migration 13): what the mirror's RECENT.md shows of a handoff, kept when a build
// first reads its bytes (internal/continuity), so that prune, which
// deletes the bytes, never blanks RECENT.md while it still lists the
// handoff. A withheld handoff's row holds only why: its text is never
// kept here. WITHOUT ROWID, keyed by the content's hash.
const migrationNotes = `CREATE TABLE notes (
		sha256         TEXT PRIMARY KEY,
		withheld       TEXT NOT NULL DEFAULT '',
		continues      TEXT NOT NULL DEFAULT '',
		type           TEXT NOT NULL DEFAULT '',
		title          TEXT NOT NULL DEFAULT '',
		summary        TEXT NOT NULL DEFAULT '',
		facts          TEXT NOT NULL DEFAULT '',
		open_questions TEXT NOT NULL DEFAULT '[]',
		next_steps     TEXT NOT NULL DEFAULT '[]'
	) WITHOUT ROWID;`

// Note is what RECENT.md shows of a handoff's content.
type Note struct {
	SHA256 string
	// Withheld, when set, is why the text may not be shown (a reason
	// code); the text fields are then empty.
	Withheld                    string
	Continues                   string
	Type, Title, Summary, Facts string
	OpenQuestions, NextSteps    []string
}

// KeepNotes records notes, leaving any already kept for the same content.
func (l *Ledger) KeepNotes(ctx context.Context, notes []Note) error {
	if len(notes) == 0 {
		return nil
	}
	tx, err := l.begin(ctx)
	if err != nil {
		return fmt.Errorf("ledger: keep notes: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO notes (sha256, withheld, continues, type, title, summary, facts, open_questions, next_steps)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("ledger: keep notes: %w", err)
	}
	defer st.Close()
	for _, n := range notes {
		oq, _ := json.Marshal(nonNil(n.OpenQuestions))
		ns, _ := json.Marshal(nonNil(n.NextSteps))
		if _, err := st.ExecContext(ctx, n.SHA256, n.Withheld, n.Continues, n.Type, n.Title, n.Summary, n.Facts, string(oq), string(ns)); err != nil {
			return fmt.Errorf("ledger: keep notes: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: keep notes: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Notes returns the kept notes of shas, by hash; a hash without one is
// absent.
func (l *Ledger) Notes(ctx context.Context, shas []string) (map[string]Note, error) {
	out := map[string]Note{}
	for start := 0; start < len(shas); start += notesChunk {
		chunk := shas[start:min(start+notesChunk, len(shas))]
		rows, err := l.db.QueryContext(ctx, `SELECT sha256, withheld, continues, type, title, summary, facts, open_questions, next_steps
			FROM notes WHERE sha256 IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, notesArgs(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("ledger: notes: %w", err)
		}
		for rows.Next() {
			var n Note
			var oq, ns string
			if err := rows.Scan(&n.SHA256, &n.Withheld, &n.Continues, &n.Type, &n.Title, &n.Summary, &n.Facts, &oq, &ns); err != nil {
				rows.Close()
				return nil, fmt.Errorf("ledger: notes: %w", err)
			}
			if json.Unmarshal([]byte(oq), &n.OpenQuestions) != nil || json.Unmarshal([]byte(ns), &n.NextSteps) != nil {
				continue // not ours: as if none was kept
			}
			out[n.SHA256] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("ledger: notes: %w", err)
		}
	}
	return out, nil
}

// notesChunk bounds the hashes one query of Notes asks for.
const notesChunk = 500

func notesArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// NotesKept counts how many of shas have kept notes.
func (l *Ledger) NotesKept(ctx context.Context, shas []string) (int, error) {
	n, err := l.Notes(ctx, shas)
	return len(n), err
}
