package ledger

import (
	"context"
	"strings"

	"github.com/handoff-sync/handoff/receipts"
)

// migrationVersions indexed sources by where they came from, so that a
// handoff's earlier versions (the same host, inbox and file name) are
// found without a scan. Migration 9 drops it: the unique index on
// (host, inbox, name, sha256) finds them as well.
const migrationVersions = `CREATE INDEX sources_by_name ON sources (host, inbox, name, id);`

// NameKey is where a handoff came from: a revision has the key of an
// earlier handoff and other bytes.
type NameKey struct{ Host, Inbox, Name string }

// Key is the source's NameKey.
func (s SourceRow) Key() NameKey { return NameKey{s.Host, s.Inbox, s.Name} }

// Version is one version of a name: a source stored under it and what
// became of its bytes.
type Version struct {
	SourceID                                      int64
	SHA256                                        string
	StoredAt                                      string
	Result, Reason, Action, Target, Before, After string
	// Decision is the person's done decision on it, if any: accepted,
	// edited or rejected.
	Decision string
}

// Changed reports whether the version changed the workspace: it was
// promoted or routed (by the ingester or by a person's accept).
func (v Version) Changed() bool {
	return v.Result == receipts.ResultPromoted || v.Result == receipts.ResultRouted
}

// Waiting reports whether the version still waits for a person.
func (v Version) Waiting() bool {
	return v.Result == receipts.ResultReview && v.Decision == ""
}

// Versions returns, for each key, every version of it the ledger holds
// that has a result, oldest first (one per distinct content; a later copy
// of the same bytes is not another version). One query for all keys.
func (l *Ledger) Versions(ctx context.Context, keys []NameKey) (map[NameKey][]Version, error) {
	out := map[NameKey][]Version{}
	if len(keys) == 0 {
		return out, nil
	}
	seen := map[NameKey]bool{}
	var args []any
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		args = append(args, k.Host, k.Inbox, k.Name)
	}
	rows, err := l.db.QueryContext(ctx, versionsQuery(len(seen)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	shas := map[NameKey]map[string]bool{}
	for rows.Next() {
		var k NameKey
		var v Version
		if err := rows.Scan(&v.SourceID, &k.Host, &k.Inbox, &k.Name, &v.SHA256, &v.StoredAt,
			&v.Result, &v.Reason, &v.Action, &v.Target, &v.Before, &v.After, &v.Decision); err != nil {
			return nil, err
		}
		if shas[k] == nil {
			shas[k] = map[string]bool{}
		}
		if shas[k][v.SHA256] {
			continue
		}
		shas[k][v.SHA256] = true
		out[k] = append(out[k], v)
	}
	return out, rows.Err()
}

// Earlier returns, for each source, the newest version of its name
// stored before it with other bytes, when there is one: what a revision
// revises. returns holds the sources whose bytes an earlier version of
// their name had, with a result (returns.go).
func (l *Ledger) Earlier(ctx context.Context, srcs []SourceRow) (earlier map[int64]Version, returns map[int64]bool, err error) {
	keys := make([]NameKey, len(srcs))
	for i, s := range srcs {
		keys[i] = s.Key()
	}
	all, err := l.Versions(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	earlier, returns = map[int64]Version{}, map[int64]bool{}
	for _, s := range srcs {
		vs := all[s.Key()]
		found := false
		for i := len(vs) - 1; i >= 0; i-- {
			switch {
			case vs[i].SourceID >= s.ID:
			case vs[i].SHA256 == s.SHA256:
				returns[s.ID] = true
			case !found:
				earlier[s.ID], found = vs[i], true
			}
		}
	}
	return earlier, returns, nil
}

// Versions is Ledger.Versions on a read-only view.
func (v *View) Versions(ctx context.Context, keys []NameKey) (map[NameKey][]Version, error) {
	return v.l.Versions(ctx, keys)
}

// versionsQuery asks for the versions of n keys, given as 3n arguments.
func versionsQuery(n int) string {
	return `SELECT s.id, s.host, s.inbox, s.name, s.sha256, s.stored_at,
			h.result, h.reason, h.action, h.target, h.before_sha256, h.after_sha256,
			COALESCE((SELECT d.decision FROM decisions d WHERE d.sha256 = s.sha256 AND d.state = 'done' ORDER BY d.id DESC LIMIT 1), '')
		FROM sources s JOIN handoffs h ON h.id = s.sha_id
		WHERE (s.host, s.inbox, s.name) IN (VALUES ` + strings.Repeat("(?, ?, ?), ", n-1) + `(?, ?, ?))
		ORDER BY s.id`
}
