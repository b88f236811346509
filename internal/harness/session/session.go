package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
)

// Bounds on what the hooks read and keep.
const (
	// MaxInput bounds the hook's JSON read from stdin.
	MaxInput = 1 << 20
	// MaxRecords bounds the session records kept.
	MaxRecords = 500
	// MaxAge is how long a session record is kept.
	MaxAge = 14 * 24 * time.Hour
	// MaxLog bounds the log; past it the log starts afresh, the old one
	// kept as hooks.log.1.
	MaxLog = 256 << 10
	// maxNames bounds the inbox names a record lists (handoffs waiting
	// for a sync, in all the repository's inboxes).
	maxNames = 2000
)

// Input is what a harness sends a command hook on stdin, the fields both
// Claude Code and Codex send that handoff reads.
type Input struct {
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	Source         string `json:"source"`           // SessionStart: startup, resume, clear, compact
	StopHookActive bool   `json:"stop_hook_active"` // Stop: the agent goes on because a stop hook asked
}

// ReadInput reads the hook's JSON from r, at most MaxInput bytes. It
// needs a session id and an absolute cwd.
func ReadInput(r io.Reader) (Input, error) {
	var in Input
	data, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return in, fmt.Errorf("read the hook's input: %w", err)
	}
	if len(data) > MaxInput {
		return in, fmt.Errorf("the hook's input is larger than %d KiB", MaxInput>>10)
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return in, fmt.Errorf("the hook's input is not JSON: %w", err)
	}
	if in.SessionID == "" {
		return in, errors.New("the hook's input has no session_id")
	}
	if !filepath.IsAbs(in.Cwd) {
		return in, fmt.Errorf("the hook's input has no absolute cwd (%q)", in.Cwd)
	}
	return in, nil
}

// Store is the hooks' place in the state directory.
type Store struct {
	Dir string // harness.StateDir()
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) sessionsDir() string { return filepath.Join(s.Dir, "sessions") }

// LogFile is the hooks' log.
func (s *Store) LogFile() string { return filepath.Join(s.Dir, "hooks.log") }

// Log appends one line to the hooks' log, starting it afresh past
// MaxLog. It never fails: a hook has nowhere else to say anything.
func (s *Store) Log(hook, harness, format string, args ...any) {
	if s.Dir == "" {
		return
	}
	if err := durable.MkdirAllPath(s.Dir, 0o700); err != nil {
		return
	}
	name := s.LogFile()
	if fi, err := os.Lstat(name); err == nil && fi.Size() > MaxLog {
		os.Rename(name, name+".1")
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscallNoFollow, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	msg := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, fmt.Sprintf(format, args...))
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	fmt.Fprintf(f, "%s %s %s: %s\n", s.now().UTC().Format(time.RFC3339), hook, harness, msg)
}

// Record is what a session's start left for its stop.
type Record struct {
	Harness   string    `json:"harness"`
	SessionID string    `json:"session_id"`
	Cwd       string    `json:"cwd"`
	Repo      string    `json:"repo"` // "" outside a repository
	Started   time.Time `json:"started"`
	// Inboxes lists, per inbox of the repository, the handoffs waiting
	// in it at the start (not its processed/, which the stop judges by
	// time alone); InboxesCut says the list reached maxNames.
	Inboxes    map[string][]string `json:"inboxes"`
	InboxesCut bool                `json:"inboxes_cut,omitempty"`
	// Git is the repository's commit and staged content at the start;
	// nil without git or when it could not be read.
	Git *GitState `json:"git,omitempty"`
	// Asked is when the stop hook asked for a handoff; zero until then.
	Asked time.Time `json:"asked,omitzero"`

	// saved is the record file's modification time, as Load found it.
	saved time.Time
}

// Since is the time a file modified after the session started has at
// least. Started is read from the clock, but the kernel stamps files
// from a coarser one that lags it by up to a tick (4 ms at HZ=250), so a
// file written just after Started can be stamped before it. The record
// was saved after Started and before the agent went on, and the file
// system stamped it from that same coarse clock: the earlier of the two
// is a bound no later change falls under. Changes are those stamped at
// or after Since; a file changed in the same tick just before the start
// counts as changed, which at worst asks once for nothing.
func (r *Record) Since() time.Time {
	if !r.saved.IsZero() && r.saved.Before(r.Started) {
		return r.saved
	}
	return r.Started
}

// recordName is a session's record file: a hash, as the id is the
// harness's and may hold anything.
func recordName(harness, id string) string {
	sum := sha256.Sum256([]byte(harness + "\x00" + id))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// askedName is the file whose creation claims a session's one ask.
func askedName(harness, id string) string { return askedOf(recordName(harness, id)) }

// askedOf is the ask file beside the record file record.
func askedOf(record string) string { return strings.TrimSuffix(record, ".json") + ".asked" }

// claimAsk creates the session's ask file, which only one process can
// do: it reports whether this one did. Two stop hooks of one session at
// the same time (the hook installed twice, say) both find the record
// without an ask; only the one that creates the file asks.
func (s *Store) claimAsk(r *Record) (bool, error) {
	if err := durable.MkdirAllPath(s.sessionsDir(), 0o700); err != nil {
		return false, err
	}
	root, err := os.OpenRoot(s.sessionsDir())
	if err != nil {
		return false, err
	}
	defer root.Close()
	f, err := root.OpenFile(askedName(r.Harness, r.SessionID), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// Load reads a session's record; nil when there is none.
func (s *Store) Load(harness, id string) (*Record, error) {
	root, err := os.OpenRoot(s.sessionsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	data, err := durable.ReadRegular(root, recordName(harness, id), 1<<20)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("session record: %w", err)
	}
	if r.Harness != harness || r.SessionID != id {
		return nil, nil
	}
	if fi, err := root.Lstat(recordName(harness, id)); err == nil {
		r.saved = fi.ModTime()
	}
	return &r, nil
}

// Save writes a session's record durably.
func (s *Store) Save(r *Record) error {
	if err := durable.MkdirAllPath(s.sessionsDir(), 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(s.sessionsDir())
	if err != nil {
		return err
	}
	defer root.Close()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return durable.WriteFile(root, recordName(r.Harness, r.SessionID), data, 0o600)
}

// Prune removes records older than MaxAge, then the oldest past
// MaxRecords, each with its ask file, and temporary files a crash left.
func (s *Store) Prune() {
	ents, err := os.ReadDir(s.sessionsDir())
	if err != nil {
		return
	}
	type rec struct {
		name string
		mod  time.Time
	}
	var recs []rec
	cutoff := s.now().Add(-MaxAge)
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.ModTime().Before(cutoff) || durable.IsTemp(e.Name()) && fi.ModTime().Before(s.now().Add(-time.Hour)) {
			os.Remove(filepath.Join(s.sessionsDir(), e.Name()))
			continue
		}
		if strings.HasSuffix(e.Name(), ".json") && !durable.IsTemp(e.Name()) {
			recs = append(recs, rec{e.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return a.mod.Compare(b.mod) })
	for len(recs) > MaxRecords {
		os.Remove(filepath.Join(s.sessionsDir(), recs[0].name))
		os.Remove(filepath.Join(s.sessionsDir(), askedOf(recs[0].name)))
		recs = recs[1:]
	}
}

// Start records a session's start: its repository (the nearest directory
// from cwd up holding .git or an inbox; repo "" when none), the handoffs
// waiting in the repository's inboxes and its git state. A session already
// recorded (resumed, compacted) keeps its first record. It returns the
// record in force.
func (s *Store) Start(ctx context.Context, harness string, in Input, repo string) (*Record, error) {
	if r, err := s.Load(harness, in.SessionID); err == nil && r != nil {
		return r, nil
	}
	r := &Record{Harness: harness, SessionID: in.SessionID, Cwd: in.Cwd, Repo: repo, Started: s.now().UTC(), Inboxes: map[string][]string{}}
	if repo != "" {
		budget := maxNames
		for _, ib := range Inboxes(repo) {
			names, cut := pendingIn(ib, &budget)
			r.Inboxes[ib] = names
			r.InboxesCut = r.InboxesCut || cut
		}
		if g, _, err := readGit(ctx, repo); err == nil {
			r.Git = g
		}
	}
	s.Prune()
	return r, s.Save(r)
}
