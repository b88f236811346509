package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/handoff-sync/handoff/manifest"
)

const syscallNoFollow = syscall.O_NOFOLLOW

// InboxDir is the name of a harness's inbox in a repository.
const InboxDir = "memory-handoffs"

// maxWalk bounds the entries a repository without git is walked through.
const maxWalk = 20000

// Inboxes lists a repository's inboxes: <repo>/<harness>/memory-handoffs
// for every harness directory handoff knows, where it is a directory.
func Inboxes(repo string) []string {
	var out []string
	for _, h := range manifest.DefaultHarnesses() {
		p := filepath.Join(repo, h, InboxDir)
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			out = append(out, p)
		}
	}
	return out
}

// pendingIn lists the handoffs waiting in an inbox (plain *.md files, no
// dotfiles), at most *budget of them; cut reports that the budget ran
// out before the list did.
func pendingIn(inbox string, budget *int) (names []string, cut bool) {
	ents, _ := os.ReadDir(inbox)
	for _, e := range ents {
		if !isHandoff(e) {
			continue
		}
		if *budget <= 0 {
			return names, true
		}
		*budget--
		names = append(names, e.Name())
	}
	return names, false
}

func isHandoff(e fs.DirEntry) bool {
	return !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".md") && e.Type().IsRegular()
}

// newHandoff returns a handoff of inbox that reached it at or after
// since ("" when none did), or ctx's error once it is done:
//   - in the inbox, one modified at or after since, or one not in known
//     (a copy that kept an older time, cp -p), unless known was cut
//     short;
//   - in processed/, one modified at or after since: written during the
//     session and archived by a sync since, as the sync's rename keeps
//     the time. An archive of a handoff that was waiting at the start is
//     not the session's, and neither is anything archived before it:
//     names are not compared there, so a processed/ of any size costs
//     the record nothing.
func newHandoff(ctx context.Context, inbox string, since time.Time, known map[string]bool, knownCut bool) (string, error) {
	for _, sub := range []string{"", "processed"} {
		ents, err := os.ReadDir(filepath.Join(inbox, sub))
		if err != nil {
			continue
		}
		for i, e := range ents {
			if i%1024 == 0 && ctx.Err() != nil {
				return "", ctx.Err()
			}
			if !isHandoff(e) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			unknown := sub == "" && !knownCut && !known[e.Name()]
			if unknown || !fi.ModTime().Before(since) {
				return path.Join(sub, e.Name()), nil
			}
		}
	}
	return "", nil
}

// Decision is a stop hook's answer.
type Decision struct {
	Ask bool // ask the agent for a handoff
	// Why says why it asks or not, for the log and tests.
	Why string
	// Inbox is where the handoff should go (when Ask).
	Inbox string
	// Changed names one changed file (when Ask).
	Changed string
}

// Stop decides whether a stop asks for a handoff, and when it does,
// records that it asked (so it never asks twice) before returning.
// It looks at the repository the session started in and, when cwdRepo
// (the repository holding the stop's cwd) is another one, the agent
// having moved there, at that one too: its state at the start is not
// known, so it is judged by time alone.
func (s *Store) Stop(ctx context.Context, harness string, in Input, cwdRepo string) (Decision, error) {
	if in.StopHookActive {
		return Decision{Why: "stop_hook_active: the agent is already going on because a stop hook asked"}, nil
	}
	r, err := s.Load(harness, in.SessionID)
	if err != nil {
		return Decision{}, err
	}
	if r == nil {
		return Decision{Why: "no record of this session's start (the SessionStart hook did not run)"}, nil
	}
	if !r.Asked.IsZero() {
		return Decision{Why: "already asked once in this session"}, nil
	}
	var scopes []scope
	if r.Repo != "" {
		scopes = append(scopes, scope{repo: r.Repo, git: r.Git, known: r.Inboxes, cut: r.InboxesCut})
	}
	if cwdRepo != "" && cwdRepo != r.Repo {
		scopes = append(scopes, scope{repo: cwdRepo, cut: true})
	}
	if len(scopes) == 0 {
		return Decision{Why: "the session is outside any repository"}, nil
	}
	var whys []string
	for _, sc := range scopes {
		d, err := sc.judge(ctx, harness, r.Since())
		if err != nil {
			return Decision{}, err
		}
		if !d.Ask {
			whys = append(whys, d.Why)
			continue
		}
		if first, err := s.claimAsk(r); err != nil {
			return Decision{}, fmt.Errorf("cannot record the ask, so it does not ask: %w", err)
		} else if !first {
			return Decision{Why: "already asked once in this session, by a stop hook running at the same time"}, nil
		}
		// The ask file is the claim; the record's time is for people
		// reading it, so a record that cannot be saved does not stop the
		// ask.
		r.Asked = s.now().UTC()
		if err := s.Save(r); err != nil {
			s.Log("stop", harness, "record the ask's time: %v", err)
		}
		return d, nil
	}
	return Decision{Why: strings.Join(whys, "; ")}, nil
}

// scope is a repository a stop looks at, with what its session's start
// knew of it: the git state and the handoffs waiting in its inboxes
// (nil for a repository the session moved to).
type scope struct {
	repo  string
	git   *GitState
	known map[string][]string
	cut   bool // known is not the whole list: judge the inboxes by time
}

// judge decides for one repository: ask when it changed since since and
// no handoff reached its inboxes.
func (sc scope) judge(ctx context.Context, harness string, since time.Time) (Decision, error) {
	inboxes := Inboxes(sc.repo)
	if len(inboxes) == 0 {
		return Decision{Why: sc.repo + ": the repository has no inbox"}, nil
	}
	for _, ib := range inboxes {
		known := map[string]bool{}
		for _, n := range sc.known[ib] {
			known[n] = true
		}
		got, err := newHandoff(ctx, ib, since, known, sc.cut)
		if err != nil {
			return Decision{}, err
		}
		if got != "" {
			return Decision{Why: "a handoff was written since the session started: " + filepath.Join(ib, got)}, nil
		}
	}
	changed, err := Changed(ctx, sc.repo, since, sc.git)
	if err != nil {
		return Decision{}, fmt.Errorf("what changed in %s: %w", sc.repo, err)
	}
	if changed == "" {
		return Decision{Why: sc.repo + ": nothing changed in the repository since the session started"}, nil
	}
	return Decision{Ask: true, Why: "changed: " + changed, Changed: changed, Inbox: PickInbox(inboxes, harness)}, nil
}

// PickInbox is the inbox of the harness in use, else the first one:
// where that harness's agent should write its handoff.
func PickInbox(inboxes []string, harness string) string {
	for _, ib := range inboxes {
		if filepath.Base(filepath.Dir(ib)) == "."+harness {
			return ib
		}
	}
	return inboxes[0]
}

// Changed returns one file of repo that changed at or after since (""
// when none did), measured against start, the repository's git state
// then:
//
//   - HEAD or the commit it names is not what it was (a commit, a
//     checkout), or the index's entries are not (something staged);
//   - a tracked file's modification time is not before since, and its
//     size or time is not what the index records;
//   - a directory holding tracked files (the top one included) was
//     modified at or after since: a file was created, removed or
//     renamed in it (a new untracked file, a deleted one).
//
// Paths under a harness's directory (.claude, .codex, …) do not count:
// the harness and the inbox live there. A repository without git is
// walked instead (at most maxWalk entries, dot-directories skipped) for
// anything modified at or after since.
func Changed(ctx context.Context, repo string, since time.Time, start *GitState) (string, error) {
	st, idx, err := readGit(ctx, repo)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(filepath.Join(repo, ".git")); errors.Is(lerr, fs.ErrNotExist) {
			return walkChanged(ctx, repo, since)
		}
	}
	if err != nil {
		return "", err
	}
	if start != nil {
		if st.Head != start.Head {
			return "HEAD (a commit or a checkout)", nil
		}
		if st.Entries != start.Entries {
			return "the git index (something staged)", nil
		}
	}
	if idx == nil {
		return walkChanged(ctx, repo, since)
	}
	return trackedChanged(ctx, repo, since, idx)
}

func harnessPath(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return slices.Contains(manifest.DefaultHarnesses(), first)
}

func trackedChanged(ctx context.Context, repo string, since time.Time, idx *index.Index) (string, error) {
	dirs := map[string]bool{".": true}
	for i, e := range idx.Entries {
		if i%1024 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		// A merged entry decodes as stage 0 (go-git's index.Merged is 1);
		// the stages of a conflict are skipped.
		if e.Stage != 0 || e.SkipWorktree || harnessPath(e.Name) {
			continue
		}
		for d := path.Dir(e.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		fi, err := os.Lstat(filepath.Join(repo, filepath.FromSlash(e.Name)))
		if err != nil {
			continue // removed: its directory's time says so
		}
		mt := fi.ModTime()
		if !mt.Before(since) && (uint32(fi.Size()) != e.Size || !mt.Equal(e.ModifiedAt)) {
			return e.Name, nil
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	slices.Sort(names)
	for i, d := range names {
		if i%1024 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		fi, err := os.Lstat(filepath.Join(repo, filepath.FromSlash(d)))
		if err == nil && !fi.ModTime().Before(since) {
			return d + "/ (a file created, removed or renamed in it)", nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return d + "/ (removed)", nil
		}
	}
	return "", nil
}

// errWalkDone stops a walk that found what it looked for.
var errWalkDone = errors.New("done")

func walkChanged(ctx context.Context, repo string, since time.Time) (string, error) {
	found, n := "", 0
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if n++; n > maxWalk {
			return errWalkDone
		}
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(repo, p)
		if p != repo && d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if harnessPath(filepath.ToSlash(rel)) {
			return nil
		}
		if fi, err := d.Info(); err == nil && !fi.ModTime().Before(since) {
			found = filepath.ToSlash(rel)
			return errWalkDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWalkDone) {
		return "", err
	}
	return found, nil
}

// Reason is what a stop that asks tells the agent: what to write, where,
// and how to check it; short, as the agent reads it at every such stop.
// mirror is the host's mirror directory ("" when it has none).
func Reason(d Decision, mirror string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Before you stop: this session changed files in this repository (%s) and wrote no memory handoff. ", d.Changed)
	fmt.Fprintf(&b, "Write one now into %s/ so the next agent here, on any host, knows what you did: ", d.Inbox)
	b.WriteString("start from `handoff template`, save it as .draft-<slug>.md in that directory, ")
	if mirror != "" {
		fmt.Fprintf(&b, "check it with `handoff lint --mirror %s FILE`, ", mirror)
	} else {
		b.WriteString("check it with `handoff lint FILE`, ")
	}
	b.WriteString("then mv it to YYYY-MM-DD-HHMM-<slug>.md. ")
	b.WriteString("Fill ## Open questions and ## Next steps. ")
	b.WriteString("Even when told to stop now, note what you did and ruled out. ")
	b.WriteString("This is asked once per session; if there is truly nothing worth handing off, say so and stop.")
	return b.String()
}
