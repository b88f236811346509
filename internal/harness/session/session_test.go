package session

import (
	"bytes"
	"context"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func write(t *testing.T, p, body string, mt time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mt.IsZero() {
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

func touch(t *testing.T, p string, mt time.Time) {
	t.Helper()
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// writeIndex stages names (files under repo) in a v2 git index, as `git
// add` would record them: their size, modification time and blob hash.
func writeIndex(t *testing.T, repo string, names ...string) {
	t.Helper()
	idx := &index.Index{Version: 2}
	for _, n := range names {
		p := filepath.Join(repo, filepath.FromSlash(n))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(p)
		h := sha1.Sum(append([]byte("blob "+strconv.Itoa(len(data))+"\x00"), data...))
		idx.Entries = append(idx.Entries, &index.Entry{Name: n, Hash: plumbing.Hash(h), Mode: filemode.Regular,
			Size: uint32(fi.Size()), ModifiedAt: fi.ModTime(), CreatedAt: fi.ModTime()})
	}
	var b bytes.Buffer
	if err := index.NewEncoder(&b).Encode(idx); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, ".git", "index"), b.String(), time.Time{})
}

// fixture is a repository with git (README.md and src/a.go staged and
// committed on main) and a Claude Code inbox, every file an hour old.
type fixture struct {
	repo, inbox string
	old         time.Time
	store       *Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "shop"), old: time.Now().Add(-time.Hour).Truncate(time.Second)}
	f.inbox = filepath.Join(f.repo, ".claude", InboxDir)
	f.store = &Store{Dir: filepath.Join(dir, "state")}
	write(t, filepath.Join(f.repo, ".git", "HEAD"), "ref: refs/heads/main\n", time.Time{})
	write(t, filepath.Join(f.repo, ".git", "refs", "heads", "main"), strings.Repeat("a", 40)+"\n", time.Time{})
	write(t, filepath.Join(f.repo, "README.md"), "# shop\n", f.old)
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a\n", f.old)
	write(t, filepath.Join(f.repo, ".claude", "settings.local.json"), "{}\n", f.old)
	writeIndex(t, f.repo, "README.md", "src/a.go")
	if err := os.MkdirAll(f.inbox, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.inbox, "2026-01-01-0000-older.md"), "# Memory Handoff\n", f.old)
	for _, d := range []string{f.repo, filepath.Join(f.repo, "src"), filepath.Join(f.repo, ".claude"), f.inbox} {
		touch(t, d, f.old)
	}
	return f
}

func (f *fixture) start(t *testing.T, id string) *Record {
	t.Helper()
	r, err := f.store.Start(context.Background(), "claude", Input{SessionID: id, Cwd: f.repo}, f.repo)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) stop(t *testing.T, id string) Decision {
	t.Helper()
	d, err := f.store.Stop(context.Background(), "claude", Input{SessionID: id, Cwd: f.repo}, f.repo)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStopAsksOnce: a session that changed a tracked file and wrote no
// handoff is asked once, with a reason that says what to write and
// where; its next stops are not (the invariant: never twice a session).
func TestStopAsksOnce(t *testing.T) {
	f := newFixture(t)
	r := f.start(t, "s1")
	if d := f.stop(t, "s1"); d.Ask {
		t.Fatalf("asked with nothing changed: %+v", d)
	}
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a\n\nfunc A() {}\n", r.Started.Add(time.Minute))
	d := f.stop(t, "s1")
	if !d.Ask || d.Inbox != f.inbox || d.Changed != "src/a.go" {
		t.Fatalf("not asked after a change: %+v", d)
	}
	reason := Reason(d, "/home/me/.openclaw/mirror")
	for _, want := range []string{f.inbox + "/", "`handoff template`", "`handoff lint --mirror /home/me/.openclaw/mirror FILE`",
		"## Open questions", "## Next steps", "Even when told to stop now, note what you did and ruled out", "once per session"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the reason lacks %q:\n%s", want, reason)
		}
	}
	for range 2 {
		if d := f.stop(t, "s1"); d.Ask {
			t.Fatalf("asked twice in one session: %+v", d)
		}
	}
}

// TestStopSeesChangeInStartTick: the kernel stamps files from a clock
// that lags time.Now by up to a tick, so a file written just after the
// start can carry a time before Started. Such a change, stamped in the
// tick the record was saved in, still asks (the invariant: a session
// that changed files is asked for its handoff), for a tracked file, a
// new file's directory and a tree without git alike. CI met this once:
// TestHookStopFlow/codex wrote main.go 20 ms after the start.
func TestStopSeesChangeInStartTick(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, f *fixture, stamp time.Time)
	}{
		{"tracked file", func(t *testing.T, f *fixture, stamp time.Time) {
			write(t, filepath.Join(f.repo, "src", "a.go"), "package a // changed\n", stamp)
		}},
		{"new file", func(t *testing.T, f *fixture, stamp time.Time) {
			write(t, filepath.Join(f.repo, "src", "b.go"), "package a\n", f.old)
			touch(t, filepath.Join(f.repo, "src"), stamp)
		}},
		{"no git", func(t *testing.T, f *fixture, stamp time.Time) {
			write(t, filepath.Join(f.repo, "README.md"), "# shop, changed\n", stamp)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.name == "no git" {
				if err := os.RemoveAll(filepath.Join(f.repo, ".git")); err != nil {
					t.Fatal(err)
				}
				touch(t, f.repo, f.old)
			}
			r := f.start(t, "s1")
			// What the coarse clock gave the record and the change, both
			// in the tick before Started's reading.
			stamp := r.Started.Add(-3 * time.Millisecond)
			touch(t, filepath.Join(f.store.sessionsDir(), recordName("claude", "s1")), stamp)
			tc.do(t, f, stamp)
			if d := f.stop(t, "s1"); !d.Ask {
				t.Fatalf("a change stamped in the start's tick did not ask: %+v", d)
			}
		})
	}
}

// TestStopAsksOnceAtTheSameTime: eight stop hooks of one session that
// changed a file, run at once (the hook installed twice, say), ask once
// between them (the invariant: never twice a session).
func TestStopAsksOnceAtTheSameTime(t *testing.T) {
	f := newFixture(t)
	r := f.start(t, "s1")
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a // changed\n", r.Started.Add(time.Minute))
	var (
		wg   sync.WaitGroup
		asks atomic.Int32
	)
	for range 8 {
		wg.Go(func() {
			d, err := f.store.Stop(context.Background(), "claude", Input{SessionID: "s1", Cwd: f.repo}, f.repo)
			if err != nil {
				t.Error(err)
			}
			if d.Ask {
				asks.Add(1)
			}
		})
	}
	wg.Wait()
	if n := asks.Load(); n != 1 {
		t.Fatalf("%d of 8 stops at once asked, want 1", n)
	}
	if d := f.stop(t, "s1"); d.Ask {
		t.Fatalf("asked again after the stops at once: %+v", d)
	}
	// The ask file alone is the claim: a record that lost the ask's time
	// (its save failed) still asks no more.
	rec, err := f.store.Load("claude", "s1")
	if err != nil || rec == nil {
		t.Fatalf("load: %v, %v", rec, err)
	}
	rec.Asked = time.Time{}
	if err := f.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	if d := f.stop(t, "s1"); d.Ask {
		t.Fatalf("asked again with the ask file there: %+v", d)
	}
	// The ask file goes with its record (the state directory stays
	// bounded).
	asked := filepath.Join(f.store.sessionsDir(), askedName("claude", "s1"))
	for _, p := range []string{asked, filepath.Join(f.store.sessionsDir(), recordName("claude", "s1"))} {
		touch(t, p, time.Now().Add(-MaxAge-time.Hour))
	}
	f.start(t, "s2")
	if _, err := os.Stat(asked); !os.IsNotExist(err) {
		t.Errorf("an old ask file was not pruned: %v", err)
	}
}

// TestStopAfterHandoff: a session that wrote a handoff into the inbox
// (or one a sync already moved to processed/, keeping its time) is not
// asked, whatever it changed; a draft (a dotfile) is not a handoff.
func TestStopAfterHandoff(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
	}{
		{"2026-12-05-0900-queue.md", false},
		// A copy that keeps an old time (cp -p) counts too: its name is new.
		{"2026-12-05-0900-queue.md", true},
		{"processed/2026-12-05-0900-queue.0123456789ab.md", false},
	} {
		f := newFixture(t)
		r := f.start(t, "s1")
		write(t, filepath.Join(f.repo, "README.md"), "# shop, changed\n", r.Started.Add(time.Minute))
		write(t, filepath.Join(f.inbox, ".draft-queue.md"), "# Memory Handoff\n", r.Started.Add(time.Minute))
		mt := r.Started.Add(time.Minute)
		if tc.old {
			mt = f.old
		}
		write(t, filepath.Join(f.inbox, filepath.FromSlash(tc.name)), "# Memory Handoff\n", mt)
		if d := f.stop(t, "s1"); d.Ask {
			t.Errorf("%s (old time %v): asked although a handoff was written: %+v", tc.name, tc.old, d)
		}
	}
}

// TestStopAfterSyncArchivedAnOlderHandoff: a handoff that waited in the
// inbox when the session started, and that a sync archives during it as
// processed/<stem>.<sha12>.md, is not this session's: a session that
// changed files is still asked. So is one in a repository whose
// processed/ holds more handoffs than a record lists, and one whose
// inbox does (the invariant: a session that changed files and wrote no
// handoff is asked for one).
func TestStopAfterSyncArchivedAnOlderHandoff(t *testing.T) {
	f := newFixture(t)
	r := f.start(t, "s1")
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a // changed\n", r.Started.Add(time.Minute))
	if err := os.MkdirAll(filepath.Join(f.inbox, "processed"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The sync's rename keeps the file's time.
	if err := os.Rename(filepath.Join(f.inbox, "2026-01-01-0000-older.md"),
		filepath.Join(f.inbox, "processed", "2026-01-01-0000-older.0123456789ab.md")); err != nil {
		t.Fatal(err)
	}
	if d := f.stop(t, "s1"); !d.Ask {
		t.Fatalf("the archive of a handoff from before the session kept the ask: %+v", d)
	}

	for _, dir := range []string{"processed", "."} {
		g := newFixture(t)
		for i := range maxNames + 10 {
			write(t, filepath.Join(g.inbox, dir, fmt.Sprintf("2025-01-01-0000-h%04d.md", i)), "# Memory Handoff\n", g.old)
		}
		touch(t, g.inbox, g.old)
		r := g.start(t, "s1")
		if dir == "." && !r.InboxesCut {
			t.Errorf("%d waiting handoffs, and the record's list is not cut", maxNames+11)
		}
		write(t, filepath.Join(g.repo, "src", "a.go"), "package a // changed\n", r.Started.Add(time.Minute))
		if d := g.stop(t, "s1"); !d.Ask {
			t.Errorf("%s: %d old handoffs kept the ask: %+v", dir, maxNames+10, d)
		}
	}
}

// TestStopWhereTheAgentMoved: a session that started outside any
// repository, or in another one, and stops in a repository it changed
// is asked for a handoff there; one that changed nothing there, or left
// a handoff there, is not (the invariant: a session that changed files
// is asked for its handoff, in the repository it changed).
func TestStopWhereTheAgentMoved(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	stop := func(id string) Decision {
		t.Helper()
		d, err := f.store.Stop(ctx, "claude", Input{SessionID: id, Cwd: filepath.Join(f.repo, "src")}, f.repo)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	other := newFixture(t)
	for _, tc := range []struct{ id, startRepo string }{{"from-outside", ""}, {"from-another", other.repo}} {
		cwd := t.TempDir()
		if tc.startRepo != "" {
			cwd = tc.startRepo
		}
		if _, err := f.store.Start(ctx, "claude", Input{SessionID: tc.id, Cwd: cwd}, tc.startRepo); err != nil {
			t.Fatal(err)
		}
	}
	if d := stop("from-outside"); d.Ask {
		t.Fatalf("asked with nothing changed where the agent moved: %+v", d)
	}
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a // changed\n", time.Now().Add(time.Minute))
	for _, id := range []string{"from-outside", "from-another"} {
		if d := stop(id); !d.Ask || d.Inbox != f.inbox || d.Changed != "src/a.go" {
			t.Errorf("%s: not asked in the repository the agent moved to and changed: %+v", id, d)
		}
	}

	g := newFixture(t)
	if _, err := g.store.Start(ctx, "claude", Input{SessionID: "s1", Cwd: t.TempDir()}, ""); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(g.repo, "src", "a.go"), "package a // changed\n", time.Now().Add(time.Minute))
	write(t, filepath.Join(g.inbox, "2026-12-05-0900-queue.md"), "# Memory Handoff\n", time.Now().Add(time.Minute))
	if d, _ := g.store.Stop(ctx, "claude", Input{SessionID: "s1", Cwd: g.repo}, g.repo); d.Ask {
		t.Errorf("asked although a handoff was written where the agent moved: %+v", d)
	}
}

// TestStopNever: stop_hook_active, no record of the start, a session
// outside any repository, a repository without an inbox, and changes
// only in the harness's own directory never ask.
func TestStopNever(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.start(t, "s1")
	write(t, filepath.Join(f.repo, "src", "a.go"), "package a // changed\n", r.Started.Add(time.Minute))
	if d, _ := f.store.Stop(ctx, "claude", Input{SessionID: "s1", Cwd: f.repo, StopHookActive: true}, f.repo); d.Ask {
		t.Error("asked with stop_hook_active")
	}
	if d := f.stop(t, "unknown-session"); d.Ask {
		t.Error("asked for a session whose start it has no record of")
	}
	if d, _ := f.store.Stop(ctx, "codex", Input{SessionID: "s1", Cwd: f.repo}, f.repo); d.Ask {
		t.Error("asked for another harness's session of the same id")
	}
	// stop_hook_active did not use up the one ask.
	if d := f.stop(t, "s1"); !d.Ask {
		t.Errorf("not asked after stop_hook_active: %+v", d)
	}

	outside := t.TempDir()
	out, err := f.store.Start(ctx, "claude", Input{SessionID: "s2", Cwd: outside}, "")
	if err != nil || out.Repo != "" {
		t.Fatal(err)
	}
	if d, _ := f.store.Stop(ctx, "claude", Input{SessionID: "s2", Cwd: outside}, ""); d.Ask || !strings.Contains(d.Why, "outside") {
		t.Errorf("a session outside any repository: %+v", d)
	}

	g := newFixture(t)
	if err := os.RemoveAll(g.inbox); err != nil {
		t.Fatal(err)
	}
	r = g.start(t, "s3")
	write(t, filepath.Join(g.repo, "README.md"), "changed\n", r.Started.Add(time.Minute))
	if d := g.stop(t, "s3"); d.Ask || !strings.Contains(d.Why, "no inbox") {
		t.Errorf("a repository without an inbox: %+v", d)
	}

	h := newFixture(t)
	r = h.start(t, "s4")
	write(t, filepath.Join(h.repo, ".claude", "settings.local.json"), `{"permissions":{}}`, r.Started.Add(time.Minute))
	touch(t, filepath.Join(h.repo, ".claude"), r.Started.Add(time.Minute))
	if d := h.stop(t, "s4"); d.Ask {
		t.Errorf("asked for a change in the harness's directory: %+v", d)
	}
}

// TestChanged: each way a session changes a repository is seen (an
// edit, a new file, a removed file, something staged, a commit), and a
// refreshed index stat cache (`git status`) or an edit that came before
// the start is not.
func TestChanged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, f *fixture, at time.Time)
		want string
	}{
		{"nothing", func(*testing.T, *fixture, time.Time) {}, ""},
		{"an edit before the start", func(t *testing.T, f *fixture, at time.Time) {
			write(t, filepath.Join(f.repo, "README.md"), "edited before\n", at.Add(-time.Minute))
		}, ""},
		{"git status refreshed the index", func(t *testing.T, f *fixture, at time.Time) {
			touch(t, filepath.Join(f.repo, "src", "a.go"), at.Add(time.Minute))
			writeIndex(t, f.repo, "README.md", "src/a.go")
		}, ""},
		{"an edit", func(t *testing.T, f *fixture, at time.Time) {
			write(t, filepath.Join(f.repo, "README.md"), "# shop\n\nmore\n", at.Add(time.Minute))
		}, "README.md"},
		{"a new file", func(t *testing.T, f *fixture, at time.Time) {
			write(t, filepath.Join(f.repo, "src", "b.go"), "package a\n", at.Add(time.Minute))
			touch(t, filepath.Join(f.repo, "src"), at.Add(time.Minute))
		}, "src/ (a file created, removed or renamed in it)"},
		{"a removed file", func(t *testing.T, f *fixture, at time.Time) {
			os.Remove(filepath.Join(f.repo, "src", "a.go"))
			touch(t, filepath.Join(f.repo, "src"), at.Add(time.Minute))
		}, "src/ (a file created, removed or renamed in it)"},
		{"something staged", func(t *testing.T, f *fixture, at time.Time) {
			write(t, filepath.Join(f.repo, "src", "a.go"), "package b\n", f.old)
			writeIndex(t, f.repo, "README.md", "src/a.go")
		}, "the git index (something staged)"},
		{"a commit", func(t *testing.T, f *fixture, at time.Time) {
			write(t, filepath.Join(f.repo, ".git", "refs", "heads", "main"), strings.Repeat("b", 40)+"\n", time.Time{})
		}, "HEAD (a commit or a checkout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.start(t, "s")
			tc.do(t, f, r.Started)
			got, err := Changed(ctx, f.repo, r.Started, r.Git)
			if err != nil || got != tc.want {
				t.Errorf("Changed = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	// Without git, the tree is walked.
	dir := t.TempDir()
	start := time.Now()
	write(t, filepath.Join(dir, "notes.txt"), "x", start.Add(-time.Hour))
	touch(t, dir, start.Add(-time.Hour))
	if got, _ := Changed(ctx, dir, start, nil); got != "" {
		t.Errorf("an old tree without git: %q", got)
	}
	write(t, filepath.Join(dir, "notes.txt"), "y", start.Add(time.Minute))
	if got, _ := Changed(ctx, dir, start, nil); got != "notes.txt" {
		t.Errorf("a changed tree without git: %q", got)
	}
}

// TestPayloads: the recorded payloads of both harnesses (testdata, from
// their documentation) read as the hooks need them; input without a
// session or an absolute cwd, or larger than MaxInput, is refused.
func TestPayloads(t *testing.T) {
	for _, name := range []string{"claude-session-start.json", "claude-stop.json", "codex-session-start.json", "codex-stop.json",
		"claude-2.1.197-session-start.json", "codex-0.171.0-session-start.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "payloads", name))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("@CWD@"), []byte("/home/me/code/shop")), []byte("@SESSION@"), []byte("s-1"))
		in, err := ReadInput(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if in.SessionID != "s-1" || in.Cwd != "/home/me/code/shop" || in.StopHookActive {
			t.Errorf("%s: %+v", name, in)
		}
		if strings.Contains(name, "start") != (in.HookEventName == "SessionStart" && in.Source == "startup") {
			t.Errorf("%s: event %q source %q", name, in.HookEventName, in.Source)
		}
	}
	for _, bad := range []string{`{}`, `{"session_id":"s"}`, `{"session_id":"s","cwd":"rel"}`, `not json`,
		`{"session_id":"s","cwd":"/x","pad":"` + strings.Repeat("a", MaxInput) + `"}`} {
		if _, err := ReadInput(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %.60s", bad)
		}
	}
}

// TestStoreBounds: records older than MaxAge are pruned at a start, a
// resumed session keeps its first start, and the log starts afresh past
// MaxLog (the invariant: the state directory stays bounded).
func TestStoreBounds(t *testing.T) {
	f := newFixture(t)
	first := f.start(t, "s1")
	old := filepath.Join(f.store.sessionsDir(), recordName("claude", "s1"))
	touch(t, old, time.Now().Add(-MaxAge-time.Hour))
	if again := f.start(t, "s1"); !again.Started.Equal(first.Started) {
		t.Error("a resumed session got a new start")
	}
	f.start(t, "s2") // prunes s1's record, now too old
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("an old record was not pruned: %v", err)
	}
	for range MaxLog/1000 + 2 {
		f.store.Log("stop", "claude", "%s", strings.Repeat("x", 1200))
	}
	fi, err := os.Stat(f.store.LogFile())
	if err != nil || fi.Size() > MaxLog+2048 {
		t.Errorf("log: %v, %v", fi.Size(), err)
	}
	if _, err := os.Stat(f.store.LogFile() + ".1"); err != nil {
		t.Errorf("no older log generation: %v", err)
	}
	f.store.Log("stop", "claude", "a line\nwith a newline\x1b[31m")
	data, _ := os.ReadFile(f.store.LogFile())
	if bytes.Contains(data, []byte("\x1b")) || bytes.Contains(data, []byte("a line\nwith")) {
		t.Error("a control character reached the log")
	}
}
