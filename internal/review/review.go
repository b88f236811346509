// Package review is the human's side of the pipeline: what waits for a
// person (review drafts in .handoff/review and malformed handoffs in
// the quarantine), and the person's decisions about it: `handoff review`
// lists, shows, accepts, edits and rejects.
//
// Guarantees:
//   - List and Show write nothing anywhere; like `handoff where` they read
//     the ledger through a read-only view, so they also work while a sync
//     runs.
//   - Accept, Edit and Reject hold the workspace lock (ErrLocked, exit 75,
//     while a sync or another review holds it; a sync exits 75 while one of
//     them does), finish first what a crashed run left (open plans, drafts
//     of decided handoffs), and decide about a handoff only while it waits.
//   - Accept and Edit apply through the ingester's own plan and commit
//     (ingest.Ingester.Decide): the plan is durable with the decision
//     before the target is touched, the target's prior content is backed
//     up, it is replaced by compare-and-swap, and the decision is finished
//     in the same transaction as the plan's bookkeeping. The person's word
//     relaxes exactly the rule that stopped the handoff (the card's state;
//     secret-like, hidden or injection-like content only with its flag),
//     nothing else.
//   - A crash at any step leaves the handoff accepted exactly once or still
//     waiting, never both and never lost: its bytes stay in the spool, its
//     draft stays until the decision is done, and the next review command
//     or sync finishes what was started.
//   - Every decision (who, when, the note, the target's hashes before and
//     after) is in the ledger, in a receipt of mode review, and in `handoff
//     where`. A dry run (Accept with DryRun) writes nothing at all.
//   - Review drafts stay the handoff's exact bytes; Show, not the draft,
//     says why it waits, and everything it returns for a terminal goes
//     through Safe.
package review

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/receipts"
)

// Errors the commands return; the CLI maps them to exit codes.
var (
	// ErrNoLedger: the workspace has no ledger, so nothing waits.
	ErrNoLedger = ledger.ErrNoLedger
	// ErrLocked: a sync or another review holds the workspace lock.
	ErrLocked = setup.ErrLocked
	// ErrNotFound: no handoff that waits, or waited, has that id.
	ErrNotFound = errors.New("no such review item")
	// ErrUnchanged: the editor left the handoff as it was.
	ErrUnchanged = errors.New("the edited text is the same as the handoff's")
)

// AmbiguousError is an id that is the start of several items' ids.
type AmbiguousError struct {
	ID      string
	Matches []string // their SHA-256s
}

func (e *AmbiguousError) Error() string {
	ids := make([]string, len(e.Matches))
	for i, m := range e.Matches {
		ids[i] = m[:16]
	}
	return fmt.Sprintf("%q names %d items (%s); give more of the id", e.ID, len(e.Matches), strings.Join(ids, ", "))
}

// BadIDError is an id that cannot name an item at all.
type BadIDError struct{ ID string }

func (e *BadIDError) Error() string {
	return fmt.Sprintf("%q is not an item id: give its id as `handoff review` lists it (12 hex digits; from %d to 64 will do), or its draft's name", SafeLine(e.ID), ledger.MinSHAPrefix)
}

// DecidedError is a decision asked about a handoff a person has decided
// about already.
type DecidedError struct {
	Item Item
}

func (e *DecidedError) Error() string {
	d := e.Item.Decision
	return fmt.Sprintf("%s is not waiting: %s by %s at %s", e.Item.ID, d.Decision, SafeLine(d.By), d.At.UTC().Format(time.RFC3339))
}

// BlockedError is a handoff that cannot be applied under the person's word
// as given: Proposal.Blocking says why, Proposal.Flags what would relax
// the screens, Proposal.NeedsEdit whether only an edit can help.
type BlockedError struct {
	Item     Item
	Proposal *ingest.Proposal
}

func (e *BlockedError) Error() string {
	var ps []string
	for _, p := range e.Proposal.Blocking {
		ps = append(ps, p.Reason)
	}
	return fmt.Sprintf("%s cannot be accepted as it is: %s", e.Item.ID, strings.Join(ps, ", "))
}

// UnchangedError is an edit saved without a change (it wraps
// ErrUnchanged): nothing was applied and the item still waits. Flags are
// the flags `handoff review accept` needs to apply it as it is; NeedsEdit
// says that no flag will do.
type UnchangedError struct {
	Item      Item
	Flags     []string
	NeedsEdit bool
}

func (e *UnchangedError) Error() string {
	return fmt.Sprintf("%v: nothing was applied and %s still waits", ErrUnchanged, e.Item.ID)
}

func (e *UnchangedError) Unwrap() error { return ErrUnchanged }

// AcceptCommand is the command line that accepts item id with flags.
func AcceptCommand(id string, flags []string) string {
	c := "handoff review accept " + id
	for _, f := range flags {
		c += " --" + f
	}
	return c
}

// LintError is an edited handoff with problems: it was not applied, and
// the item still waits. The edited text is kept at Kept.
type LintError struct {
	Item     Item
	Problems []ingest.Problem
	Kept     string
	// Flags are the flags that would let the kept text through, when
	// flags alone would (its only problems are content screens).
	Flags []string
}

func (e *LintError) Error() string {
	return fmt.Sprintf("the edited handoff has %d problem(s); nothing was applied and %s still waits", len(e.Problems), e.Item.ID)
}

// Options say where a command works and who decides.
type Options struct {
	Workspace string            // absolute
	Manifest  receipts.Manifest // for the receipt; may be empty
	By        string            // who decides; "" means Who()
	Log       *slog.Logger      // nil discards
	Now       func() time.Time  // nil means time.Now
	// OpenClaw is how the manifest treats the workspace's reader; a
	// review without a manifest keeps the card index (the default) and
	// detects the layout.
	OpenClaw ingest.OpenClawOptions
}

func (o *Options) fill() {
	if o.By == "" {
		o.By = Who()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpenClaw == (ingest.OpenClawOptions{}) {
		o.OpenClaw.CardIndex = true
	}
}

// Who is the person deciding: $USER@host (the user name from the system
// when $USER is unset, the host name "localhost" when unknown).
func Who() string {
	u := os.Getenv("USER")
	if u == "" {
		if cu, err := user.Current(); err == nil {
			u = cu.Username
		} else {
			u = fmt.Sprintf("uid%d", os.Getuid())
		}
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return u + "@" + h
}

// Item is a handoff that waits for a person, or did (List with all).
type Item struct {
	// ID is the short stable id people use: the first 12 hex digits of
	// SHA256.
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Result is what the ingester gave it: review or malformed (for a
	// decided item, what it got since); Reason its reason code.
	Result string `json:"result"`
	Reason string `json:"reason"`
	// State is waiting, or the latest decision: accepted, edited,
	// rejected; or accepting or editing while a crashed decision waits to
	// be finished by the next review command or sync.
	State string `json:"state"`
	// Host, Inbox and Name are where its bytes were found.
	Host  string `json:"host"`
	Inbox string `json:"inbox"`
	Name  string `json:"name"`
	// Action and Target are what it recommends and names (the target as
	// written, safe or not); Title its title; ParseError why it is
	// malformed.
	Action     string `json:"action,omitempty"`
	Target     string `json:"target,omitempty"`
	Title      string `json:"title,omitempty"`
	ParseError string `json:"parse_error,omitempty"`
	// Draft is its review draft, relative to the workspace ("" for a
	// malformed handoff); DraftEdited says the draft no longer holds its
	// bytes (someone edited it by hand).
	Draft       string `json:"draft,omitempty"`
	DraftEdited bool   `json:"draft_edited,omitempty"`
	// Since is when it was routed to review or quarantined.
	Since    time.Time `json:"since"`
	StoredAt time.Time `json:"stored_at"`
	// Decision is the latest decision about it, if any.
	Decision *Decision `json:"decision,omitempty"`
	// Versions are the other items with its host, inbox and file name
	// (its writer rewrote it in place: revisions), oldest first: one item's
	// versions, each decided on its own. Accepting or editing one records
	// the others that still wait as superseded.
	Versions []VersionRef `json:"versions,omitempty"`

	src ledger.SourceRow
}

// VersionRef names another version of an item.
type VersionRef struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// Decision is a person's decision about an item, as the ledger keeps it.
type Decision struct {
	Decision string    `json:"decision"` // accepted | edited | rejected
	State    string    `json:"state"`    // started | done | abandoned
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Note     string    `json:"note"`
	RunID    string    `json:"run_id"`
	// Overrides are the rules the person's word relaxed.
	Overrides []string `json:"overrides"`
	// Result, Target and the hashes: what it led to.
	Result       string `json:"result,omitempty"`
	Target       string `json:"target,omitempty"`
	BeforeSHA256 string `json:"before_sha256,omitempty"`
	AfterSHA256  string `json:"after_sha256,omitempty"`
	// EditedSHA256 is the handoff an edit made.
	EditedSHA256 string `json:"edited_sha256,omitempty"`
}

func decisionOf(d ledger.Decision) *Decision {
	out := &Decision{Decision: d.Decision, State: d.State, By: d.By, At: d.At, Note: d.Note, RunID: d.RunID,
		Overrides: []string{}, Result: d.Result, Target: d.Target, BeforeSHA256: d.Before, AfterSHA256: d.After, EditedSHA256: d.NewSHA256}
	if d.Overrides != "" {
		out.Overrides = strings.Split(d.Overrides, ",")
	}
	return out
}

// reader is what List and Show read: the ledger (a view) and the bytes.
type reader interface {
	ReviewItems(ctx context.Context, all bool) ([]ledger.ReviewItem, error)
	DecisionsFor(ctx context.Context, shas []string) ([]ledger.Decision, error)
	Versions(ctx context.Context, keys []ledger.NameKey) (map[ledger.NameKey][]ledger.Version, error)
	Store(legacy *spool.Dir) *ledger.Store
}

// items returns the items the ledger knows (waiting ones; all with all),
// oldest first, each with its bytes' title, action and target.
func items(ctx context.Context, r reader, ws string, all bool) ([]Item, error) {
	rows, err := r.ReviewItems(ctx, all)
	if err != nil {
		return nil, err
	}
	shas := make([]string, len(rows))
	for i, row := range rows {
		shas[i] = row.SHA256
	}
	ds, err := r.DecisionsFor(ctx, shas)
	if err != nil {
		return nil, err
	}
	latest := map[string]ledger.Decision{}
	for _, d := range ds {
		if d.State != ledger.DecisionAbandoned && d.State != ledger.DecisionPast {
			latest[d.SHA256] = d // oldest first: the last one wins
		}
	}
	b := openBytes(ws, r)
	defer b.close()
	out := make([]Item, 0, len(rows))
	for _, row := range rows {
		it := Item{ID: row.SHA256[:12], SHA256: row.SHA256, Size: row.Source.Size, Result: row.Result, Reason: row.Reason,
			State: "waiting", Host: row.Source.Host, Inbox: row.Source.Inbox, Name: row.Source.Name,
			Since: row.IngestedAt, StoredAt: row.StoredAt, src: row.Source}
		if row.Result == receipts.ResultReview && strings.HasPrefix(row.Target, layout.ReviewDir+"/") {
			it.Draft = row.Target
		} else if row.Result != receipts.ResultMalformed {
			// Decided: the draft it had.
			it.Draft = layout.ReviewDir + "/" + claim.ArchiveName(row.Source.Name, row.SHA256)
		}
		if d, ok := latest[row.SHA256]; ok {
			it.Decision = decisionOf(d)
			switch {
			case d.State == ledger.DecisionDone:
				it.State = d.Decision
				it.Result, it.Reason = d.FromResult, d.FromReason
			case d.Decision == ledger.DecisionEdited:
				it.State = "editing"
			default:
				it.State = "accepting"
			}
		}
		if !all && it.State != "waiting" && !strings.HasSuffix(it.State, "ing") {
			continue
		}
		if data, edited, err := b.get(it); err == nil {
			it.DraftEdited = edited
			describe(&it, data)
		} else {
			it.ParseError = "bytes unreadable: " + err.Error()
		}
		out = append(out, it)
	}
	linkVersions(out)
	return out, nil
}

// linkVersions gives each item the others of its host, inbox and name.
func linkVersions(its []Item) {
	byKey := map[ledger.NameKey][]int{}
	for i, it := range its {
		byKey[it.src.Key()] = append(byKey[it.src.Key()], i)
	}
	for _, idx := range byKey {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			for _, j := range idx {
				if i != j {
					its[i].Versions = append(its[i].Versions, VersionRef{ID: its[j].ID, State: its[j].State, Reason: its[j].Reason})
				}
			}
		}
	}
}

// describe fills in what the bytes say: title, action, target, or the
// parse error.
func describe(it *Item, data []byte) {
	h, err := ingest.Parse(data)
	if err != nil {
		if pe, ok := errors.AsType[*ingest.ParseError](err); ok {
			it.ParseError = pe.Msg
		} else {
			it.ParseError = err.Error()
		}
		return
	}
	it.Title, it.Action = h.Title, h.Action
	switch {
	case h.Card != nil && h.Card.Name != "":
		it.Target = layout.CardsDir + "/" + h.Card.Name
	case h.Document != nil:
		it.Target = h.Document.Target
	}
}

// bytesReader reads an item's exact bytes: from the ledger's store (or
// the spool directory an earlier version wrote), else (pruned) from its
// draft, each only when they still hash to the item's SHA-256.
type bytesReader struct {
	ws     string
	legacy *spool.Dir
	spool  *ledger.Store
	root   *os.Root
}

func openBytes(ws string, r reader) *bytesReader {
	b := &bytesReader{ws: ws}
	b.legacy, _ = spool.OpenReadOnly(filepath.Join(ws, layout.SpoolDir))
	b.spool = r.Store(b.legacy)
	b.root, _ = os.OpenRoot(ws)
	return b
}

func (b *bytesReader) close() {
	b.spool.Close()
	if b.legacy != nil {
		b.legacy.Close()
	}
	if b.root != nil {
		b.root.Close()
	}
}

// draft returns the draft's bytes, if it is a regular file.
func (b *bytesReader) draft(it Item) ([]byte, bool) {
	if b.root == nil || it.Draft == "" {
		return nil, false
	}
	fi, err := b.root.Lstat(it.Draft)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	f, err := b.root.OpenFile(it.Draft, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	data := make([]byte, 0, fi.Size())
	buf := make([]byte, 32<<10)
	for len(data) <= maxDraft {
		n, err := f.Read(buf)
		data = append(data, buf[:n]...)
		if err != nil {
			break
		}
	}
	if len(data) > maxDraft {
		return nil, false
	}
	return data, true
}

// maxDraft bounds what is read of a draft.
const maxDraft = 64 << 20

// get returns the item's bytes and whether its draft differs from them.
func (b *bytesReader) get(it Item) ([]byte, bool, error) {
	draft, hasDraft := b.draft(it)
	edited := hasDraft && sum(draft) != it.SHA256
	data, err := b.spool.Get(it.SHA256)
	if err == nil {
		return data, edited, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, spool.ErrCorrupt) {
		return nil, edited, err
	}
	if hasDraft && !edited {
		return draft, false, nil
	}
	return nil, edited, fmt.Errorf("neither the ledger's store nor its draft holds its bytes (%s); they were pruned", it.SHA256[:12])
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// draftName matches a review draft's name, <stem>.<sha12>.md.
var draftName = regexp.MustCompile(`\.([0-9a-f]{12})\.md$`)

// resolve finds the item id names among its: its id, a longer or shorter
// (at least 4) start of its SHA-256, or its draft's name or path.
func resolve(its []Item, id string) (Item, error) {
	q := strings.ToLower(strings.TrimSpace(id))
	if m := draftName.FindStringSubmatch(q); m != nil && strings.Contains(q, ".md") {
		q = m[1]
	}
	if !ledger.IsSHAPrefix(q) {
		return Item{}, &BadIDError{ID: id}
	}
	var found []Item
	for _, it := range its {
		if strings.HasPrefix(it.SHA256, q) {
			found = append(found, it)
		}
	}
	switch len(found) {
	case 0:
		return Item{}, fmt.Errorf("%w: %s", ErrNotFound, SafeLine(id))
	case 1:
		return found[0], nil
	}
	e := &AmbiguousError{ID: id}
	for _, it := range found {
		e.Matches = append(e.Matches, it.SHA256)
	}
	return Item{}, e
}

// view opens the ledger for List and Show as `handoff where` does: shared
// lock while no run holds it, else a live read-only view. A directory that
// is no workspace is a *workspace.MissingError, as for the commands that
// write.
func view(ws string) (*ledger.View, func(), error) {
	if _, _, err := workspace.Check(ws); err != nil {
		return nil, nil, err
	}
	lk, err := setup.ProbeLock(filepath.Join(ws, layout.LockFile))
	idle := err == nil && !lk.Held
	v, err := ledger.OpenReadOnly(filepath.Join(ws, layout.LedgerFile), idle)
	if err != nil {
		lk.Release()
		return nil, nil, err
	}
	return v, func() { v.Close(); lk.Release() }, nil
}

// List returns the items that wait for a person, oldest first; with all,
// also those decided about, with their decision. It writes nothing.
func List(ctx context.Context, ws string, all bool) ([]Item, error) {
	v, done, err := view(ws)
	if err != nil {
		return nil, err
	}
	defer done()
	return items(ctx, v, ws, all)
}

func newRunID(t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Waiting returns the items that wait for a person, oldest first, read
// through an open view of the ledger (doctor's). It writes nothing.
func Waiting(ctx context.Context, v *ledger.View, ws string) ([]Item, error) {
	return items(ctx, v, ws, false)
}
