// Package receipts defines the JSON receipt every applied run writes
// (schema_version 1, see docs/receipts.md), and writes and reads them.
//
// Guarantees: a receipt file is written durably and atomically (a reader
// never sees half a receipt); latest.json and latest.log are replaced
// atomically after the per-run file is durable, so latest.json always names a
// run whose own receipt exists; the per-run file counts the inboxes that
// had nothing to say (Compact) where latest.json lists them.
package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/failpoint"
)

// SchemaVersion is the receipt format this package writes.
const SchemaVersion = 1

// Modes, outcomes and statuses.
const (
	ModeApply  = "apply"
	ModeDryRun = "dry-run"

	OutcomeOK      = "ok"
	OutcomePartial = "partial"
	OutcomeFailed  = "failed"

	StatusIngested = "ingested"
	StatusEmpty    = "empty"
)

// Receipt is one run.
type Receipt struct {
	SchemaVersion int    `json:"schema_version"`
	RunID         string `json:"run_id"`
	Mode          string `json:"mode"`
	Outcome       string `json:"outcome"`
	Status        string `json:"status"`
	Error         string `json:"error,omitempty"`
	// Interrupted: the run was stopped (SIGINT, SIGTERM) before it was
	// done. Its counts and hosts say what it stored and archived until
	// then; the next run ingests and archives the rest.
	Interrupted bool      `json:"interrupted,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	Manifest    Manifest  `json:"manifest"`
	Workspace   string    `json:"workspace"`
	// WorkspaceID is the workspace's identity (see `handoff init`); empty
	// only in a dry run on a workspace an earlier handoff made, which
	// the run does not change.
	WorkspaceID string    `json:"workspace_id"`
	Counts      Counts    `json:"counts"`
	Hosts       []Host    `json:"hosts"`
	Handoffs    []Handoff `json:"handoffs"`
	Notify      Notify    `json:"notify"`
	// OpenClaw is what the run found of the OpenClaw that reads the
	// workspace, and what it did for it (docs/openclaw.md).
	OpenClaw *OpenClaw `json:"openclaw,omitempty"`
}

// OpenClaw is a run's view of the workspace's reader.
type OpenClaw struct {
	// Layout is "2026.9" (TOOLS.md notes land in AGENTS.md's Tools
	// section) or "pre-2026.9"; Why names the evidence.
	Layout string `json:"layout"`
	Why    string `json:"why"`
	// Config is OpenClaw's config file that was read, ConfigError why it
	// could not be.
	Config      string `json:"config,omitempty"`
	ConfigError string `json:"config_error,omitempty"`
	// CardIndex is set when the run rewrote the card index in MEMORY.md.
	CardIndex *CardIndex `json:"card_index,omitempty"`
	// MovedDrafts counts review drafts an earlier version left in
	// memory/handoff-inbox that the run moved to .handoff/review.
	MovedDrafts int `json:"moved_drafts,omitempty"`
}

// CardIndex is a rewrite of the card index in MEMORY.md.
type CardIndex struct {
	BeforeSHA256 string `json:"before_sha256"`
	AfterSHA256  string `json:"after_sha256"`
	Cards        int    `json:"cards"`
	Shown        int    `json:"shown"`
	Backup       string `json:"backup,omitempty"`
}

// Manifest identifies the manifest a run used.
type Manifest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Counts tally handoffs[].result, plus pulled: sources newly stored in the
// spool by this run.
type Counts struct {
	Pulled    int `json:"pulled"`
	Promoted  int `json:"promoted"`
	Routed    int `json:"routed"`
	Review    int `json:"review"`
	Malformed int `json:"malformed"`
	Duplicate int `json:"duplicate"`
	Rejected  int `json:"rejected"`
	Deferred  int `json:"deferred"`
	Legacy    int `json:"legacy,omitempty"` // import receipts only
}

// Host is one host's pull.
type Host struct {
	Name      string  `json:"name"`
	Transport string  `json:"transport"`
	Outcome   string  `json:"outcome"` // ok | partial | error
	Error     string  `json:"error"`
	Inboxes   []Inbox `json:"inboxes"`
	// Stored counts the sources this run recorded for the host, newly
	// stored in the spool; Archived those whose archive rename on the host
	// it recorded (an earlier run's among them, when this run finished
	// their archive). Both count what was recorded, also when the pull
	// did not finish.
	Stored   int `json:"stored"`
	Archived int `json:"archived"`
	// ItemsDropped counts rejected and deferred files left out of
	// handoffs[] because the host had too many.
	ItemsDropped int `json:"items_dropped,omitempty"`
	// QuietInboxes counts the inboxes left out of Inboxes because they
	// had nothing to say (see Inbox.Quiet); only a per-run file leaves
	// them out, latest.json lists them.
	QuietInboxes int `json:"quiet_inboxes,omitempty"`
	// Quirks are what the host's SFTP server was seen to do that others do
	// not, as stable codes (see docs/receipts.md), e.g. "follows-symlinks".
	Quirks []string `json:"quirks,omitempty"`
	// Mirror is what publishing the host's mirror did; absent for a host
	// without one.
	Mirror *Mirror `json:"mirror,omitempty"`
}

// Mirror is one host's mirror publish (see docs/mirror.md).
type Mirror struct {
	Outcome    string   `json:"outcome"` // ok | error | skipped
	Dir        string   `json:"dir,omitempty"`
	Sent       []string `json:"sent"`    // files written, relative to Dir
	Removed    []string `json:"removed"` // files removed
	Bytes      int64    `json:"bytes"`   // bytes of the files sent, MIRROR.json aside
	Generation int64    `json:"generation"`
	Error      string   `json:"error,omitempty"`
	// Interrupted: the run was stopped (SIGINT, SIGTERM) while this
	// mirror was being published; Sent and Removed are what was done,
	// and the next sync finishes it. Outcome is then error.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Inbox is one inbox of a host.
type Inbox struct {
	Path    string   `json:"path"`
	State   string   `json:"state"`
	Pending int      `json:"pending"`
	Tracked int      `json:"tracked"`
	Error   string   `json:"error,omitempty"`
	Ignored []string `json:"ignored,omitempty"`
	// IgnoredCount counts every ignored name, also those beyond the listed
	// ones.
	IgnoredCount int `json:"ignored_count,omitempty"`
	// Repo is the inbox's repository, read when the inbox held a handoff.
	Repo *Repo `json:"repo,omitempty"`
}

// Quiet reports whether an inbox has nothing to say: listed (state ok)
// with nothing pending, tracked, ignored or wrong, and no repository read.
func (in *Inbox) Quiet() bool {
	return in.State == InboxOK && in.Pending == 0 && in.Tracked == 0 && in.Error == "" &&
		len(in.Ignored) == 0 && in.IgnoredCount == 0 && in.Repo == nil
}

// Compact returns r with each host's quiet inboxes counted in
// QuietInboxes instead of listed, sharing everything else with r. A
// fleet's idle run lists every inbox of every host (289 KB for 1,600
// inboxes); its compact form is a few hundred bytes a host. It returns
// r itself when no inbox is quiet.
func Compact(r *Receipt) *Receipt {
	quiet := false
	for i := range r.Hosts {
		for j := range r.Hosts[i].Inboxes {
			if r.Hosts[i].Inboxes[j].Quiet() {
				quiet = true
				break
			}
		}
	}
	if !quiet {
		return r
	}
	c := *r
	c.Hosts = make([]Host, len(r.Hosts))
	for i, h := range r.Hosts {
		kept := make([]Inbox, 0, len(h.Inboxes))
		for _, in := range h.Inboxes {
			if in.Quiet() {
				h.QuietInboxes++
				continue
			}
			kept = append(kept, in)
		}
		h.Inboxes = kept
		c.Hosts[i] = h
	}
	return &c
}

// Repo is a repository as a pull found it: its directory on the host,
// its normalized origin remote, and why the origin could not be read.
type Repo struct {
	Path    string `json:"path"`
	Origin  string `json:"origin,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// Handoff is what became of one file.
type Handoff struct {
	Host         string `json:"host"`
	Inbox        string `json:"inbox"`
	Name         string `json:"name"`
	SHA256       string `json:"sha256"`
	Size         int64  `json:"size"`
	Result       string `json:"result"`
	Reason       string `json:"reason"`
	Action       string `json:"action"`
	Target       string `json:"target"`
	BeforeSHA256 string `json:"before_sha256"`
	AfterSHA256  string `json:"after_sha256"`
	ArchivedAs   string `json:"archived_as"`
	// Error says what went wrong with this handoff when something did:
	// its archive rename failed, or it could not be read.
	Error string `json:"error,omitempty"`
	// StoredRun is the run that stored it, when that was an earlier run
	// (interrupted or crashed) and this one finished it. Omitted otherwise.
	StoredRun string `json:"stored_run,omitempty"`
	// Decision is a person's decision about it (receipts of mode review
	// only; see review.go).
	Decision *Decision `json:"decision,omitempty"`
}

// Notify is the heartbeat ping's result.
type Notify struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// Tally recomputes every count but Pulled from Handoffs.
func (r *Receipt) Tally() {
	pulled := r.Counts.Pulled
	r.Counts = Counts{Pulled: pulled}
	for _, h := range r.Handoffs {
		switch h.Result {
		case ResultPromoted:
			r.Counts.Promoted++
		case ResultRouted:
			r.Counts.Routed++
		case ResultReview:
			r.Counts.Review++
		case ResultMalformed:
			r.Counts.Malformed++
		case ResultDuplicate:
			r.Counts.Duplicate++
		case ResultRejected:
			r.Counts.Rejected++
		case ResultDeferred:
			r.Counts.Deferred++
		case ResultLegacy:
			r.Counts.Legacy++
		}
	}
}

// NoUpdates reports whether the run neither pulled, applied nor
// published anything: no handoff stored or given a result that changes
// the workspace, and no host's mirror sent or removed a file (MIRROR.json
// alone included). In a dry run, what it would have done counts.
func (r *Receipt) NoUpdates() bool {
	c := r.Counts
	if c.Pulled != 0 || c.Promoted != 0 || c.Routed != 0 || c.Review != 0 || c.Malformed != 0 {
		return false
	}
	for _, h := range r.Hosts {
		if m := h.Mirror; m != nil && (len(m.Sent) > 0 || len(m.Removed) > 0) {
			return false
		}
	}
	return true
}

// Summary is the last line (or two) a run prints.
func (r *Receipt) Summary() string {
	c := r.Counts
	prefix := ""
	if r.Mode == ModeDryRun {
		prefix = "[dry-run] "
	}
	s := fmt.Sprintf("%sPulled %d  Promoted %d  Routed %d  Review %d  Malformed %d  Duplicate %d  Rejected %d  Deferred %d\n",
		prefix, c.Pulled, c.Promoted, c.Routed, c.Review, c.Malformed, c.Duplicate, c.Rejected, c.Deferred)
	// NO_UPDATES says all is well and nothing happened: never after a
	// run that failed somewhere, which a dashboard would read as fine.
	if r.NoUpdates() && r.Outcome == OutcomeOK {
		s += prefix + "NO_UPDATES\n"
	}
	return s
}

// Marshal renders a receipt as indented JSON with a final newline, the
// bytes json.MarshalIndent(r, "", "  ") gives. encoding/json indents in a
// second pass that took five times as long as the encoding itself (27 ms
// against 5 ms for a receipt of 8,000 handoffs), at the end of every run;
// indent does the same in one plain pass.
func Marshal(r *Receipt) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := indent(make([]byte, 0, len(b)+len(b)/2), b)
	return append(out, '\n'), nil
}

// indent appends src, compact JSON as json.Marshal writes it, to dst
// indented by two spaces a level, as json.Indent with no prefix would:
// an empty object or array stays on its line, a colon is followed by one
// space, and string contents are copied as they are.
func indent(dst, src []byte) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			// Copy the string whole, up to its closing quote.
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			dst = append(dst, src[i:min(j+1, len(src))]...)
			i = j
		case '{', '[':
			dst = append(dst, c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// Write stores <run-id>.json, then replaces latest.log and latest.json, in
// dir (created if needed). It returns the per-run file's path. The
// per-run file is [Compact] unless allInboxes; latest.json, which is
// replaced and never accumulates, lists every inbox. The three
// files are written first and fsynced together, then put in place in that
// order, and the directory is synced once: a run's end waits for one
// round of syncs, not three. A crash in between leaves temporary files,
// which the ingester's next run removes.
func Write(dir string, r *Receipt, log []byte, allInboxes bool) (string, error) {
	data, err := Marshal(r)
	if err != nil {
		return "", err
	}
	own := data
	if c := Compact(r); c != r && !allInboxes {
		if own, err = Marshal(c); err != nil {
			return "", err
		}
	}
	root, err := openDir(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	name := r.RunID + ".json"
	files := []struct {
		name string
		data []byte
	}{{name, own}, {"latest.log", log}, {"latest.json", data}}
	temps := make([]*durable.Temp, 0, len(files))
	drop := func() {
		for _, t := range temps {
			t.Remove()
		}
	}
	for _, f := range files {
		t, err := durable.OpenTemp(root, f.name, f.data, 0o600)
		if err != nil {
			drop()
			return "", fmt.Errorf("receipts: %w", err)
		}
		temps = append(temps, t)
	}
	errs := make([]error, len(temps))
	var wg sync.WaitGroup
	for i, t := range temps {
		wg.Go(func() { errs[i] = t.Sync() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		drop()
		return "", fmt.Errorf("receipts: %w", err)
	}
	for i, t := range temps {
		if err := t.Rename(); err != nil {
			drop()
			return "", fmt.Errorf("receipts: %w", err)
		}
		if i == 0 {
			failpoint.Inject("receipt.written")
		}
	}
	if err := durable.SyncDir(root, "."); err != nil {
		return "", fmt.Errorf("receipts: %w", err)
	}
	return root.Name() + "/" + name, nil
}

// WriteRun stores <run-id>.json in dir (created if needed), durably and
// atomically, and leaves latest.json and latest.log alone: they describe
// the newest sync, which doctor and the heartbeat judge the timer by. The
// receipts of `handoff import processed` and `handoff review` are written
// so. It returns the file's path.
func WriteRun(dir string, r *Receipt) (string, error) {
	data, err := Marshal(r)
	if err != nil {
		return "", err
	}
	root, err := openDir(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	name := r.RunID + ".json"
	if err := durable.WriteFile(root, name, data, 0o600); err != nil {
		return "", fmt.Errorf("receipts: %w", err)
	}
	return root.Name() + "/" + name, nil
}

// openDir creates dir if needed and opens it as a root.
func openDir(dir string) (*os.Root, error) {
	if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	return root, nil
}

// Decode parses a receipt strictly: unknown fields are errors.
func Decode(data []byte) (*Receipt, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Receipt
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("receipts: schema_version %d, this handoff reads %d", r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}

// Read reads and decodes a receipt file.
func Read(path string) (*Receipt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	return Decode(data)
}
