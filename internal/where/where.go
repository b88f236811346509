package where

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/receipts"
)

// ErrNoLedger means the workspace has no ledger: no run has stored
// anything there.
var ErrNoLedger = ledger.ErrNoLedger

// Kinds of Match.
const (
	Stored   = "stored"   // the bytes were read and stored (Bytes gives them)
	Rejected = "rejected" // never read: moved into malformed/ as it was
)

// How a query named a Match.
const (
	ByName   = "name"   // its name, archived name, path or SHA-256 prefix
	ByTarget = "target" // a workspace path its result wrote or drafted
)

// Match is one ledger record that a `handoff where` query names: a
// stored source and what became of it, or a rejected file.
type Match struct {
	Kind   string `json:"kind"` // stored | rejected
	Host   string `json:"host"`
	Inbox  string `json:"inbox"`
	Name   string `json:"name"`
	Path   string `json:"path"` // inbox/name on the host
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size"`
	// StoredAt is when the bytes were stored (rejected: when the file was
	// seen), and StoredRun by which run.
	StoredAt  time.Time `json:"stored_at"`
	StoredRun string    `json:"stored_run"`
	// Result and Reason as the receipt spells them; Result is "" while the
	// source waits to be ingested.
	Result string `json:"result"`
	Reason string `json:"reason"`
	// Action, Target and the hashes are those of the applied copy of these
	// bytes (for a duplicate, the first copy's).
	Action       string `json:"action,omitempty"`
	Target       string `json:"target,omitempty"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
	// ArchivedAs is where the host's copy went, relative to Inbox; Archived
	// says whether the rename is confirmed.
	ArchivedAs string    `json:"archived_as"`
	Archived   bool      `json:"archived"`
	IngestRun  string    `json:"ingest_run"`
	IngestedAt time.Time `json:"ingested_at,omitzero"`
	// AppliedFrom is, for a duplicate, the source whose copy got the result.
	AppliedFrom *Source `json:"applied_from,omitempty"`
	// MatchedBy says how the query named it: ByName, or ByTarget for the
	// handoffs whose result names the queried workspace path.
	MatchedBy string `json:"matched_by"`
	// Decisions are what people decided about these bytes in `handoff
	// review` (accepted, edited, rejected), oldest first.
	Decisions []Decision `json:"decisions,omitempty"`
	// EditedFrom is set when `handoff review edit` wrote these bytes: the
	// decision that did, naming the handoff they were edited from.
	EditedFrom *Decision `json:"edited_from,omitempty"`
	// WorkspaceID is the identity of the workspace whose ledger holds the
	// record; empty for a workspace an earlier handoff made, until its
	// next sync gives it one.
	WorkspaceID string `json:"workspace_id"`
	// Waiting says the handoff waits for a person: its result is review or
	// malformed and no decision about it is done or under way.
	Waiting bool `json:"waiting"`
	// Continues is the earlier handoff its Continues section names;
	// ContinuedBy the later ones whose Continues names it (threads.go).
	Continues   *Thread  `json:"continues,omitempty"`
	ContinuedBy []Thread `json:"continued_by,omitempty"`
}

// Decision is one person's decision in `handoff review`.
type Decision struct {
	Decision string    `json:"decision"` // accepted | edited | rejected
	State    string    `json:"state"`    // done | started (a crash interrupted it) | abandoned
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Note     string    `json:"note"`
	RunID    string    `json:"run_id"`
	// WaitedAs and Reason are the result and reason it waited with.
	WaitedAs  string   `json:"waited_as"`
	Reason    string   `json:"reason"`
	Overrides []string `json:"overrides"`
	// Target and the hashes: the target's before and after the decision.
	Target       string `json:"target,omitempty"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
	// OriginalSHA256 is the handoff that was edited; EditedSHA256 the
	// handoff the edit made.
	OriginalSHA256 string `json:"original_sha256"`
	EditedSHA256   string `json:"edited_sha256,omitempty"`
}

// Source names one stored source.
type Source struct {
	Host       string `json:"host"`
	Inbox      string `json:"inbox"`
	Name       string `json:"name"`
	Path       string `json:"path"`
	ArchivedAs string `json:"archived_as"`
	Result     string `json:"result"`
	Reason     string `json:"reason"`
	IngestRun  string `json:"ingest_run"`
}

// Where looks a handoff up in the workspace's ledger by its name as found
// in the inbox (with or without .md), its archived name
// (<stem>.<sha12>.md), its full path (optionally host:path) or the start of
// its SHA-256 (at least 4 hex digits), and returns every stored source and
// rejected file it names, oldest first. A query that is a path in the
// workspace (memory/cards/x.md, TOOLS.md, a review draft's
// .handoff/review/<stem>.<sha12>.md; relative, ./-prefixed or
// absolute) also finds the handoffs whose result names that target: the
// copy each result came from. No match is an empty result. A directory
// that is no workspace is a *workspace.MissingError (naming the
// workspaces near it); a workspace without a ledger is ErrNoLedger.
//
// Where writes nothing; see ledger.View for how it reads.
func Lookup(ctx context.Context, ws, query string) ([]Match, error) {
	if strings.TrimSpace(query) == "" {
		return nil, &setup.UsageError{Msg: "where: empty name"}
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, err
	}
	v, id, done, err := open(ws)
	if err != nil {
		return nil, err
	}
	defer done()
	srcs, err := v.FindSources(ctx, query)
	if err != nil {
		return nil, err
	}
	by := map[int64]string{}
	for _, s := range srcs {
		by[s.ID] = ByName
	}
	if target := workspacePath(ws, query); target != "" {
		wrote, err := v.TargetWrites(ctx, target)
		if err != nil {
			return nil, err
		}
		for _, s := range wrote {
			if by[s.ID] == "" {
				by[s.ID] = ByTarget
				srcs = append(srcs, s)
			}
		}
	}
	rejs, err := v.FindRejects(ctx, query)
	if err != nil {
		return nil, err
	}
	out := []Match{}
	for _, s := range srcs {
		m := Match{
			Kind: Stored, MatchedBy: by[s.ID], Host: s.Host, Inbox: s.Inbox, Name: s.Name, Path: foundAt(s.Inbox, s.Name, s.ArchivedAs, s.Result),
			SHA256: s.SHA256, Size: s.Size, StoredAt: s.StoredAt, StoredRun: s.StoredRun,
			Result: s.Result, Reason: s.Reason, ArchivedAs: s.ArchivedAs, Archived: s.Archived,
			IngestRun: s.IngestRun, IngestedAt: s.IngestedAt,
		}
		if c := s.Content; c != nil && s.Result != "" {
			m.Action, m.Target, m.BeforeSHA256, m.AfterSHA256 = c.Action, c.Target, c.BeforeSHA256, c.AfterSHA256
			if c.SourceID != s.ID {
				m.AppliedFrom = &Source{
					Host: c.Host, Inbox: c.Inbox, Name: c.Name, Path: foundAt(c.Inbox, c.Name, c.ArchivedAs, c.Result), ArchivedAs: c.ArchivedAs,
					Result: c.Result, Reason: c.Reason, IngestRun: c.RunID,
				}
			}
		}
		out = append(out, m)
	}
	if err := addDecisions(ctx, v, out); err != nil {
		return nil, err
	}
	if err := addThreads(ctx, v, ws, out); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Waiting = waiting(out[i])
	}
	for _, r := range rejs {
		out = append(out, Match{
			Kind: Rejected, MatchedBy: ByName, Host: r.Host, Inbox: r.Inbox, Name: r.Name, Path: path.Join(r.Inbox, r.Name),
			Size: r.Size, StoredAt: r.At, Result: receipts.ResultRejected, Reason: r.Reason,
			ArchivedAs: r.ArchivedAs, Archived: r.ArchivedAs != "", IngestRun: r.RunID, IngestedAt: r.At,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoredAt.Before(out[j].StoredAt) })
	for i := range out {
		out[i].WorkspaceID = id.ID
	}
	return out, nil
}

// waiting reports whether m's handoff waits for a person: a review or
// malformed result that no decision is done about or under way for (an
// abandoned accept leaves it waiting).
func waiting(m Match) bool {
	if m.Result != receipts.ResultReview && m.Result != receipts.ResultMalformed {
		return false
	}
	for _, d := range m.Decisions {
		if d.State == ledger.DecisionDone || d.State == ledger.DecisionStarted {
			return false
		}
	}
	return true
}

// File is a file in the workspace, as `where` describes one no handoff
// wrote.
type File struct {
	Path   string `json:"path"` // relative to the workspace, slash-separated
	Kind   string `json:"kind"` // card | document | review draft | file
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// maxFile bounds what is read of a workspace file to hash it.
const maxFile = 64 << 20

// WorkspaceFile returns the regular file query names in the workspace
// (as Lookup reads a workspace path), with its SHA-256, or nil when query
// names none: not a path in the workspace, absent, not a regular file,
// reached through a symlink, or larger than 64 MiB. It writes nothing.
func WorkspaceFile(workspace, query string) (*File, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, err
	}
	rel := workspacePath(ws, query)
	if rel == "" {
		return nil, nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, nil
	}
	defer root.Close()
	// os.Root refuses a path that leaves the root; Lstat of each parent
	// refuses one that passes through a symlink inside it.
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if fi, err := root.Lstat(d); err != nil || !fi.IsDir() {
			return nil, nil
		}
	}
	fi, err := root.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxFile {
		return nil, nil
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxFile+1))
	if err != nil || n > maxFile {
		return nil, nil
	}
	return &File{Path: rel, Kind: fileKind(rel), SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// fileKind names what a workspace path is to handoff.
func fileKind(rel string) string {
	switch {
	case path.Dir(rel) == layout.CardsDir && strings.HasSuffix(rel, ".md"):
		return "card"
	case path.Dir(rel) == layout.ReviewDir:
		return "review draft"
	case ingest.IsAllowedDocument(rel):
		return "document"
	}
	return "file"
}

// foundAt is where a source was found on its host: in its inbox, or for
// one `handoff import processed` recorded (result legacy), in processed/.
func foundAt(inbox, name, archivedAs, result string) string {
	if result == receipts.ResultLegacy && archivedAs != "" {
		return path.Join(inbox, archivedAs)
	}
	return path.Join(inbox, name)
}

// workspacePath is query as a slash path relative to the workspace, when
// it can name a file there: relative (./ allowed) or absolute inside ws,
// with no .. and not the workspace itself. Else "".
func workspacePath(ws, query string) string {
	q := query
	if filepath.IsAbs(q) {
		rel, err := filepath.Rel(ws, q)
		if err != nil {
			return ""
		}
		q = rel
	}
	q = path.Clean(filepath.ToSlash(q))
	if q == "." || q == ".." || strings.HasPrefix(q, "../") || strings.HasPrefix(q, "/") {
		return ""
	}
	return q
}

// addDecisions puts on each match the decisions people made about its
// bytes, and for bytes an edit wrote, the edit.
func addDecisions(ctx context.Context, v *ledger.View, ms []Match) error {
	var shas []string
	for _, m := range ms {
		if m.SHA256 != "" {
			shas = append(shas, m.SHA256)
		}
	}
	ds, err := v.DecisionsFor(ctx, shas)
	if err != nil {
		return err
	}
	for i := range ms {
		m := &ms[i]
		for _, d := range ds {
			w := Decision{Decision: d.Decision, State: d.State, By: d.By, At: d.At, Note: d.Note, RunID: d.RunID,
				WaitedAs: d.FromResult, Reason: d.FromReason, Overrides: []string{}, Target: d.Target,
				BeforeSHA256: d.Before, AfterSHA256: d.After, OriginalSHA256: d.SHA256, EditedSHA256: d.NewSHA256}
			if d.Overrides != "" {
				w.Overrides = strings.Split(d.Overrides, ",")
			}
			switch {
			case d.SHA256 == m.SHA256:
				m.Decisions = append(m.Decisions, w)
			case d.NewSHA256 == m.SHA256 && d.State != ledger.DecisionAbandoned:
				m.EditedFrom = &w
			}
		}
	}
	return nil
}

// open opens the workspace's ledger read-only, as Lookup and Bytes read
// it: idle (nothing created beside it) when no run holds the lock. done
// closes it and gives the probe of the lock back.
func open(ws string) (*ledger.View, workspace.Identity, func(), error) {
	id, _, err := workspace.Check(ws)
	if err != nil {
		return nil, id, nil, err
	}
	lk, err := setup.ProbeLock(filepath.Join(ws, layout.LockFile))
	idle := err == nil && !lk.Held
	v, err := ledger.OpenReadOnly(filepath.Join(ws, layout.LedgerFile), idle)
	if err != nil {
		lk.Release()
		return nil, id, nil, err
	}
	return v, id, func() { v.Close(); lk.Release() }, nil
}
