package where

import (
	"context"
	"path"
	"path/filepath"
	"slices"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
)

// maxThreadRead bounds a spool file read to find what a handoff
// continues, when the ledger has no thread row for it (a handoff stored
// before threads were recorded).
const maxThreadRead = 64 << 20

// Thread is a handoff a match continues, or one that continues it
// (docs/handoff-format.md, "Continuity").
type Thread struct {
	// Key is how the Continues section names the earlier handoff
	// (ingest.ContinuesKey).
	Key string `json:"key"`
	// The handoffs the key names (for Continues) or that name the match
	// (for ContinuedBy), oldest first; none when the key names nothing in
	// the ledger.
	Sources []Source `json:"sources"`
}

// addThreads puts on each stored match the handoff it continues and the
// handoffs that continue it.
func addThreads(ctx context.Context, v *ledger.View, ws string, ms []Match) error {
	var sp *ledger.Store // opened only when a thread row is missing
	var legacy *spool.Dir
	defer func() {
		if sp != nil {
			sp.Close()
		}
		if legacy != nil {
			legacy.Close()
		}
	}()
	for i := range ms {
		m := &ms[i]
		if m.Kind != Stored || m.SHA256 == "" {
			continue
		}
		key, err := v.Continues(ctx, m.SHA256)
		if err != nil {
			return err
		}
		if key == "" {
			if sp == nil {
				legacy, _ = spool.OpenReadOnly(filepath.Join(ws, layout.SpoolDir))
				sp = v.Store(legacy)
			}
			if data, err := sp.Get(m.SHA256); err == nil && len(data) <= maxThreadRead {
				if h, err := ingest.Parse(data); err == nil {
					key = ingest.ContinuesKey(h.Continues)
				}
			}
		}
		if key != "" {
			srcs, err := v.FindSources(ctx, key)
			if err != nil {
				return err
			}
			t := &Thread{Key: key, Sources: []Source{}}
			for _, s := range srcs {
				if s.SHA256 != m.SHA256 {
					t.Sources = append(t.Sources, sourceOf(s))
				}
			}
			m.Continues = t
		}
		names := []string{m.Name}
		if m.ArchivedAs != "" {
			names = append(names, path.Base(m.ArchivedAs))
		}
		by, err := v.ThreadsNaming(ctx, names, m.SHA256)
		if err != nil {
			return err
		}
		for _, sha := range slices.Sorted(func(yield func(string) bool) {
			for s := range by {
				if s != m.SHA256 && !yield(s) {
					return
				}
			}
		}) {
			srcs, err := v.FindSources(ctx, sha)
			if err != nil {
				return err
			}
			t := Thread{Key: by[sha], Sources: []Source{}}
			for _, s := range srcs {
				if s.SHA256 == sha {
					t.Sources = append(t.Sources, sourceOf(s))
				}
			}
			m.ContinuedBy = append(m.ContinuedBy, t)
		}
	}
	return nil
}

func sourceOf(s ledger.SourceRecord) Source {
	return Source{Host: s.Host, Inbox: s.Inbox, Name: s.Name, Path: foundAt(s.Inbox, s.Name, s.ArchivedAs, s.Result),
		ArchivedAs: s.ArchivedAs, Result: s.Result, Reason: s.Reason, IngestRun: s.IngestRun}
}
