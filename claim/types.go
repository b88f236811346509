package claim

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/repoid"
)

// Inbox states as they appear in receipts.
const (
	StateOK            = "ok"
	StateMissing       = "missing"
	StateSymlink       = "symlink"
	StateOptedOut      = "opted-out"
	StateGitUnreadable = "git-unreadable"
	StateError         = "error" // the inbox could not be listed, or stored files could not be archived
)

// A host pull's outcomes (HostReport.Outcome). A partial pull reached
// every inbox but could not archive some stored files: those inboxes have
// state StateError.
const (
	OutcomeOK      = "ok"
	OutcomePartial = "partial"
	OutcomeError   = "error"
)

// Results of a claim that did not store the file. Stored files get their
// result from the ingester.
const (
	ResultRejected = "rejected"
	ResultDeferred = "deferred"
)

// Reasons a claim gives (the same stable codes the ingester uses).
const (
	ReasonSymlink    = "symlink"
	ReasonNotRegular = "not-regular"
	ReasonOversize   = "oversize"
	ReasonChanging   = "changing"
	ReasonTooYoung   = "too-young"
	// ReasonUnfilledTemplate: a file that still holds a template's
	// placeholders and changed less than TemplateSettle ago, left for
	// its writer; older, it is taken and goes to review under the same
	// reason.
	ReasonUnfilledTemplate = "unfilled-template"
	// ReasonReadFailed: the host refused to read the file (permissions,
	// an I/O error) while the connection stayed up. It is tried again next
	// run; the item's error says what the host said.
	ReasonReadFailed = "read-failed"
)

// Quirks a host's SFTP server was seen to have, as receipts name them.
const (
	// QuirkFollowsSymlinks: the server's LSTAT (and so its RENAME and
	// REMOVE) follows symlinks, so its listing and its LSTAT disagree about
	// a symlink. Nothing is read, renamed or removed under such a name;
	// symlinked inboxes, archive directories and entries are left in place.
	QuirkFollowsSymlinks = "follows-symlinks"
)

// OptOutMarker is the file whose presence hides a directory tree.
const OptOutMarker = ".no-memory-handoffs"

// Config is what a pull needs to know about one host.
type Config struct {
	Host        string
	Transport   string
	Harnesses   []string // e.g. ".claude"
	Inboxes     []string // declared inboxes, may start with "~"
	Roots       []Root   // discovery roots, may start with "~"
	MaxFileSize int64
	Settle      time.Duration
	// Unfilled, when set, tells a file that still holds a template's
	// placeholders: one younger than TemplateSettle(Settle) is left in
	// its inbox for its writer (deferred, unfilled-template).
	Unfilled func([]byte) bool
	DryRun   bool             // archive nothing; the caller passes an overlay spool and a scratch ledger
	Now      func() time.Time // nil: time.Now
	Log      *slog.Logger     // nil: discard
	// Hint is what the previous run's discovery of this host left
	// (ParseHint): its calls are asked at once as discovery starts, and
	// its index memos spare reading a git index that has not changed.
	Hint Hint
	// Walked, when set, is given the calls this discovery made and the
	// memos of the git indexes it read or found unchanged, for the next
	// run's Hint. It is not called when discovery fails.
	Walked func(Hint)
	// Repos: read the identity (repoid.Read) of each repository one of
	// whose inboxes holds a handoff, alongside the pull, for the
	// inboxes' reports.
	Repos bool
	// Progress, when set, is told how many inboxes have been scanned and
	// how many handoffs stored so far: after discovery, after each stored
	// batch and after each inbox. Nil: nothing is reported.
	Progress func(inboxes, pulled int)
}

// Root is a directory walked for repositories.
type Root struct {
	Path     string
	MaxDepth int
}

// Source says where one stored handoff came from.
type Source struct {
	Host       string `json:"host"`
	Inbox      string `json:"inbox"`
	Name       string `json:"name"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	ArchivedAs string `json:"archived_as"` // relative to Inbox, e.g. processed/x.3f9a1c2b4d5e.md
	Parses     bool   `json:"parses"`
}

// Recorder is the ledger as the pull sees it.
type Recorder interface {
	// StoreSources durably stores contents (exact bytes by SHA-256) and
	// records the sources, in one commit: when it returns nil both are
	// durable, and only then may a source be archived. Storing a content
	// or recording a source already there is a no-op. It returns how many
	// sources were new.
	StoreSources(ctx context.Context, runID string, srcs []Source, contents map[string][]byte) (int, error)
	// MarkArchived records that these sources were archived on their host.
	MarkArchived(ctx context.Context, srcs []Source) error
	// Unarchived returns the sources of a host that are stored but whose
	// archive was never confirmed (a crash, or a rename whose answer was
	// lost), by inbox and in the order they were stored.
	Unarchived(ctx context.Context, host string) ([]Source, error)
}

// QueueRecorder is a Recorder that takes a pull's batches several at a
// time. QueueSources is StoreSources in two steps: it returns once the
// batch holds its place behind those queued before it, and wait then
// returns what StoreSources would have. The recorder commits one pull's
// batches in the order they were queued, and fails every batch queued
// after one that failed, so that what is recorded of a pull is always a
// prefix of its batches in discovery order. A pull queues from one
// goroutine, one batch after another.
type QueueRecorder interface {
	Recorder
	QueueSources(ctx context.Context, runID string, srcs []Source, contents map[string][]byte) (wait func() (int, error), err error)
}

// HostReport is the outcome of one host's pull. It is JSON so that a worker
// process can hand it to its parent.
type HostReport struct {
	Name      string        `json:"name"`
	Transport string        `json:"transport"`
	Outcome   string        `json:"outcome"` // OutcomeOK | OutcomePartial | OutcomeError
	Error     string        `json:"error"`
	Inboxes   []InboxReport `json:"inboxes"`
	Items     []Item        `json:"items"` // rejected and deferred files, at most MaxItems
	// ItemsDropped counts rejected and deferred files beyond MaxItems.
	ItemsDropped int `json:"items_dropped,omitempty"`
	Stored       int `json:"stored"` // sources newly recorded in this pull
	// Quirks are the Quirk* codes the server was seen to have.
	Quirks []string `json:"quirks,omitempty"`
	// Unarchived are stored sources whose archive failed (Inbox, Name
	// and Error set): they stay in their inbox for the next run.
	Unarchived []Item `json:"unarchived,omitempty"`
	// Home is the login's home on the host, when repositories' identities
	// were read (Config.Repos), for the manifest's "~" paths.
	Home string `json:"home,omitempty"`
}

// InboxReport is one inbox as the receipt shows it.
type InboxReport struct {
	Path    string   `json:"path"`
	State   string   `json:"state"`
	Pending int      `json:"pending"`
	Tracked int      `json:"tracked"`
	Error   string   `json:"error,omitempty"`
	Ignored []string `json:"ignored,omitempty"` // quoted names that are not plain *.md names (at most MaxIgnored)
	// IgnoredCount counts every such name, also those beyond MaxIgnored.
	IgnoredCount int `json:"ignored_count,omitempty"`
	// Repo is the identity of the inbox's repository, read when the inbox
	// held a handoff in this pull (Config.Repos); nil otherwise.
	Repo *repoid.Identity `json:"repo,omitempty"`
}

// MaxIgnored bounds how many ignored names a report lists, so that a
// hostile host cannot make the report grow without bound.
const MaxIgnored = 100

// MaxItems bounds the rejected and deferred files one host report lists.
const MaxItems = 10_000

// maxErrText bounds an error message kept in a report.
const maxErrText = 512

// clip shortens s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Item is a file the pull looked at but did not store.
type Item struct {
	Inbox      string `json:"inbox"`
	Name       string `json:"name"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256,omitempty"`
	Result     string `json:"result"`
	Reason     string `json:"reason"`
	ArchivedAs string `json:"archived_as,omitempty"`
	Error      string `json:"error,omitempty"`
}

// TemplateSettle is how long a file that still holds a template's
// placeholders is left in its inbox after it last changed: an hour, or
// sixty settle periods when that is longer. A writer who saved a
// skeleton and is filling it in has that long; a file abandoned half
// written reaches review after it.
func TemplateSettle(settle time.Duration) time.Duration {
	return max(time.Hour, 60*settle)
}
