package claim_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/transport"
)

// countingFS counts the calls that reach the transport, and resolves paths
// as an SFTP server's REALPATH does (transport.Local resolves nothing).
type countingFS struct {
	transport.FS
	mu    sync.Mutex
	calls map[string]int // "op path"
}

func (c *countingFS) count(op, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op+" "+name]++
}

func (c *countingFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	c.count(claim.WalkLstat, name)
	return c.FS.Lstat(ctx, name)
}

func (c *countingFS) ReadDir(ctx context.Context, name string, n int) ([]transport.FileInfo, error) {
	c.count(claim.WalkReadDir, name)
	return c.FS.ReadDir(ctx, name, n)
}

func (c *countingFS) RealPath(ctx context.Context, name string) (string, error) {
	c.count(claim.WalkRealPath, name)
	return filepath.EvalSymlinks(name) // as an SFTP REALPATH resolves

}

func (c *countingFS) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// discovered is what a discovery found, as one comparable string per inbox.
func discovered(root string, ins []*claim.Inbox) []string {
	var out []string
	for _, in := range ins {
		out = append(out, fmt.Sprintf("%s %s %q follows=%v", strings.TrimPrefix(in.Path, root+"/"), in.State, names(in.Candidates), in.FollowsSymlinks))
	}
	return out
}

// walkWith discovers the tree at root with hint, and returns what it found
// and the calls it made.
func walkWith(t *testing.T, fsys transport.FS, root string, hint []claim.WalkCall) ([]string, []claim.WalkCall) {
	t.Helper()
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: path.Join(root, "w"), MaxDepth: 2}}
	cfg.Inboxes = []string{path.Join(root, "declared/.claude/memory-handoffs")}
	cfg.Hint = claim.Hint{Calls: hint}
	var walked []claim.WalkCall
	cfg.Walked = func(h claim.Hint) { walked = h.Calls }
	got := discover(t, fsys, cfg)
	return discovered(root, got), walked
}

// TestSpeculativeWalkFindsWhatAWalkFinds: a hint recorded on one tree,
// used on a tree changed since in each way a host's tree changes between
// runs, finds exactly what a walk without a hint finds there. Invariant:
// a hint never makes discovery miss an inbox or a handoff, see one that
// is not there, or follow a symlink; it only asks the questions earlier.
func TestSpeculativeWalkFindsWhatAWalkFinds(t *testing.T) {
	t.Parallel()
	base := []string{
		"w/g1/r1/.claude/memory-handoffs/a.md",
		"w/g1/r2/.codex/memory-handoffs/b.md",
		"w/g1/r3/.claude/memory-handoffs/",
		"w/g2/r4/.claude/memory-handoffs/c.md",
		"w/r5/.claude/memory-handoffs/d.md",
		"w/r6/",
		"declared/.claude/memory-handoffs/e.md",
		"elsewhere/r9/.claude/memory-handoffs/x.md",
		"elsewhere/.claude/memory-handoffs/y.md",
	}
	changes := []struct {
		name   string
		change func(t *testing.T, root string)
	}{
		{"nothing", func(t *testing.T, root string) {}},
		{"a new handoff", func(t *testing.T, root string) { build(t, root, "w/g1/r3/.claude/memory-handoffs/new.md") }},
		{"a handoff gone", func(t *testing.T, root string) { rm(t, root, "w/g1/r1/.claude/memory-handoffs/a.md") }},
		{"a new repository", func(t *testing.T, root string) { build(t, root, "w/g1/r7/.claude/memory-handoffs/n.md") }},
		{"a new group", func(t *testing.T, root string) { build(t, root, "w/g3/r8/.codex/memory-handoffs/n.md") }},
		{"a repository gone", func(t *testing.T, root string) { rm(t, root, "w/g1/r2") }},
		{"a harness gone", func(t *testing.T, root string) { rm(t, root, "w/r5/.claude") }},
		{"a new harness", func(t *testing.T, root string) { build(t, root, "w/r5/.codex/memory-handoffs/n.md") }},
		{"a group now a symlink", func(t *testing.T, root string) {
			rm(t, root, "w/g2")
			build(t, root, "w/g2 -> ../elsewhere")
		}},
		{"a repository now a symlink", func(t *testing.T, root string) {
			rm(t, root, "w/g1/r1")
			build(t, root, "w/g1/r1 -> ../../elsewhere")
		}},
		{"an inbox now a symlink", func(t *testing.T, root string) {
			rm(t, root, "w/g1/r1/.claude/memory-handoffs")
			build(t, root, "w/g1/r1/.claude/memory-handoffs -> ../../../../elsewhere/.claude/memory-handoffs")
		}},
		{"a repository opts out", func(t *testing.T, root string) { build(t, root, "w/g1/r1/.no-memory-handoffs") }},
		{"the root opts out", func(t *testing.T, root string) { build(t, root, "w/.no-memory-handoffs") }},
		{"an inbox opts out", func(t *testing.T, root string) { build(t, root, "w/r5/.claude/memory-handoffs/.no-memory-handoffs") }},
		{"the declared inbox gone", func(t *testing.T, root string) { rm(t, root, "declared") }},
		{"the root gone", func(t *testing.T, root string) { rm(t, root, "w") }},
	}
	for _, tc := range changes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := tempRoot(t)
			build(t, root, base...)
			_, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
			if len(hint) == 0 {
				t.Fatal("the first walk recorded no calls")
			}
			tc.change(t, root)
			want, _ := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
			fsys := &countingFS{FS: transport.NewLocal()}
			got, _ := walkWith(t, fsys, root, hint)
			if !slices.Equal(got, want) {
				t.Errorf("with the hint:\n  %s\nwithout:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// TestSpeculativeWalkAsksEachQuestionOnce: with an up-to-date hint every
// question the walk asks was asked early, and none is asked twice; a hint
// for another tree costs its own calls but changes nothing found.
func TestSpeculativeWalkAsksEachQuestionOnce(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root, "w/g1/r1/.claude/memory-handoffs/a.md", "w/g2/r2/.codex/memory-handoffs/", "declared/.claude/memory-handoffs/")
	want, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)

	fsys := &countingFS{FS: transport.NewLocal()}
	got, again := walkWith(t, fsys, root, hint)
	if !slices.Equal(got, want) {
		t.Fatalf("with the hint found %q, want %q", got, want)
	}
	if !slices.Equal(again, hint) && len(again) != len(hint) {
		t.Errorf("the walk with a hint made %d calls, the one before %d", len(again), len(hint))
	}
	for k, n := range fsys.calls {
		if n != 1 {
			t.Errorf("%s reached the transport %d times, want once", k, n)
		}
	}
	if fsys.total() != len(hint) {
		t.Errorf("%d calls reached the transport, the hint holds %d", fsys.total(), len(hint))
	}

	other := tempRoot(t)
	build(t, other, "w/x/y/.claude/memory-handoffs/z.md")
	_, otherHint := walkWith(t, &countingFS{FS: transport.NewLocal()}, other, nil)
	got, _ = walkWith(t, &countingFS{FS: transport.NewLocal()}, root, otherHint)
	if !slices.Equal(got, want) {
		t.Fatalf("with another tree's hint found %q, want %q", got, want)
	}
}

// linkSafeFS is a countingFS that vouches for its LSTAT, as
// transport.Local and OpenSSH's sftp-server do.
type linkSafeFS struct{ *countingFS }

func (linkSafeFS) LstatNoFollow() bool { return true }

// TestLinkSafeAsksNoRealPath: a transport that vouches its LSTAT follows
// no symlink is asked no REALPATH, with or without a hint that holds
// some, and discovery finds the same, symlinked inboxes included.
// Invariant: leaving out the check never makes discovery follow a
// symlink where LSTAT is lstat(2).
func TestLinkSafeAsksNoRealPath(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root,
		"w/g1/r1/.claude/memory-handoffs/a.md",
		"w/g1/r2/.claude/memory-handoffs -> ../../../../elsewhere",
		"w/g1/r3/.codex -> ../../../elsewhere",
		"elsewhere/x.md",
		"declared/.claude/memory-handoffs/e.md")
	want, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
	if !slices.ContainsFunc(hint, func(c claim.WalkCall) bool { return c.Op == claim.WalkRealPath }) {
		t.Fatalf("a walk over a resolving transport asked no REALPATH: %v", hint)
	}
	for _, h := range [][]claim.WalkCall{nil, hint} {
		fsys := &countingFS{FS: transport.NewLocal()}
		got, walked := walkWith(t, linkSafeFS{fsys}, root, h)
		if !slices.Equal(got, want) {
			t.Errorf("hint of %d calls: found %q, want %q", len(h), got, want)
		}
		for k := range fsys.calls {
			if strings.HasPrefix(k, claim.WalkRealPath+" ") {
				t.Errorf("hint of %d calls: %s reached a transport that vouches for its LSTAT", len(h), k)
			}
		}
		if slices.ContainsFunc(walked, func(c claim.WalkCall) bool { return c.Op == claim.WalkRealPath }) {
			t.Errorf("hint of %d calls: the walk recorded a REALPATH", len(h))
		}
	}
}

// TestSpeculativeWalkBoundsEarlyListings: listings that came early are
// held only up to a bound of entries; past it they are dropped and asked
// again when the walk gets to them, and what is found is the same.
// Invariant: a hint cannot make discovery hold more than the bound.
func TestSpeculativeWalkBoundsEarlyListings(t *testing.T) {
	root := tempRoot(t)
	var specs []string
	for i := range 20 {
		specs = append(specs, fmt.Sprintf("w/g%02d/r/.claude/memory-handoffs/h.md", i))
	}
	build(t, root, specs...)
	want, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
	defer claim.SetMaxEarlyEntries(3)()
	fsys := &countingFS{FS: transport.NewLocal()}
	got, _ := walkWith(t, fsys, root, hint)
	if !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
	again := 0
	for k, n := range fsys.calls {
		if strings.HasPrefix(k, claim.WalkReadDir) && n > 1 {
			again++
		}
	}
	if again == 0 {
		t.Error("no early listing was dropped and asked again with a bound of 3 entries")
	}
}

// TestParseHint: a hint file is local state, but a damaged or edited one
// must not make discovery ask for what no walk asks: relative or unclean
// paths, unknown operations, listings without a bound or over it, more
// than MaxHint calls.
func TestParseHint(t *testing.T) {
	t.Parallel()
	if _, err := claim.ParseHint([]byte("{not json")); err == nil {
		t.Error("damaged JSON parsed")
	}
	hint, err := claim.ParseHint([]byte(`[
		{"op":"lstat","path":"/a"},
		{"op":"lstat","path":"a"},
		{"op":"lstat","path":"/a/../b"},
		{"op":"readdir","path":"/a","n":512},
		{"op":"readdir","path":"/a","n":0},
		{"op":"readdir","path":"/a","n":100000},
		{"op":"realpath","path":"/a","n":7},
		{"op":"remove","path":"/a"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []claim.WalkCall{{Op: "lstat", Path: "/a"}, {Op: "readdir", Path: "/a", N: 512}, {Op: "realpath", Path: "/a"}}
	if !slices.Equal(hint.Calls, want) {
		t.Errorf("kept %+v, want %+v", hint.Calls, want)
	}
	var b strings.Builder
	b.WriteString("[")
	for i := range claim.MaxHint + 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"op":"lstat","path":"/d%d"}`, i)
	}
	b.WriteString("]")
	if h, err := claim.ParseHint([]byte(b.String())); err != nil || len(h.Calls) != claim.MaxHint {
		t.Errorf("a hint of %d calls kept %d (%v), want %d", claim.MaxHint+10, len(h.Calls), err, claim.MaxHint)
	}
	data, err := claim.MarshalHint(claim.Hint{Calls: want})
	if err != nil {
		t.Fatal(err)
	}
	if back, err := claim.ParseHint(data); err != nil || !slices.Equal(back.Calls, want) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func rm(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
}

// holdingFS holds an lstat of hold until release is closed, and records
// whether the call's context ended meanwhile.
type holdingFS struct {
	countingFS
	hold     string
	release  chan struct{}
	canceled atomic.Bool
}

func (h *holdingFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	if name == h.hold {
		select {
		case <-h.release:
		case <-ctx.Done():
			h.canceled.Store(true)
			return transport.FileInfo{}, ctx.Err()
		}
	}
	return h.countingFS.Lstat(ctx, name)
}

// TestSpeculativeWalkDoesNotWaitForUnusedAnswers: an early call the walk
// never needs (a path of the last run's tree gone since) on a server that
// does not answer it does not hold discovery up once the walk is done,
// and is abandoned, not cancelled: over SSH a call whose context ends
// closes the connection, which the pull after discovery needs.
// Invariants: a hint cannot make a run hang, nor a host's pull fail.
func TestSpeculativeWalkDoesNotWaitForUnusedAnswers(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root, "w/g1/r1/.claude/memory-handoffs/a.md", "declared/.claude/memory-handoffs/")
	want, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
	stale := path.Join(root, "w/gone")
	hint = append([]claim.WalkCall{{Op: claim.WalkLstat, Path: stale}}, hint...)
	fsys := &holdingFS{countingFS: countingFS{FS: transport.NewLocal()}, hold: stale, release: make(chan struct{})}
	defer close(fsys.release)
	done := make(chan []string, 1)
	go func() {
		got, _ := walkWith(t, fsys, root, hint)
		done <- got
	}()
	select {
	case got := <-done:
		if !slices.Equal(got, want) {
			t.Fatalf("found %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("discovery waited for an early answer nobody needed")
	}
	if fsys.canceled.Load() {
		t.Error("discovery's end canceled an early call still under way")
	}
}

// contentFS counts the reads that went through ReadContent.
type contentFS struct {
	countingFS
	content atomic.Int64
}

func (c *contentFS) ReadContent(ctx context.Context, name string, limit int64) ([]byte, error) {
	c.content.Add(1)
	return transport.ReadContent(ctx, c.countingFS.FS, name, limit)
}

// TestSpeculativeWalkKeepsContentReader: discovery reads a git index with
// the transport's ReadContent when it has one (fewer round trips than
// ReadFile over SFTP); walking through the hint's wrapper must not hide it.
func TestSpeculativeWalkKeepsContentReader(t *testing.T) {
	t.Parallel()
	git := gitCmd(t)
	root := tempRoot(t)
	build(t, root, "w/g1/r1/.claude/memory-handoffs/tracked.md", "declared/.claude/memory-handoffs/")
	repo := filepath.Join(root, "w/g1/r1")
	git(repo, "init", "-q")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "x")
	build(t, root, "w/g1/r1/.claude/memory-handoffs/new.md")
	_, hint := walkWith(t, &countingFS{FS: transport.NewLocal()}, root, nil)
	for _, h := range [][]claim.WalkCall{nil, hint} {
		fsys := &contentFS{countingFS: countingFS{FS: transport.NewLocal()}}
		got, _ := walkWith(t, fsys, root, h)
		if want := "w/g1/r1/.claude/memory-handoffs ok [\"new.md\"] follows=false"; !slices.Contains(got, want) {
			t.Errorf("hint of %d calls: found %q, want %q", len(h), got, want)
		}
		if fsys.content.Load() == 0 {
			t.Errorf("hint of %d calls: the git index was not read with ReadContent", len(h))
		}
	}
}

// jitterFS answers each LSTAT and listing after a delay of its own, so
// that a concurrent walk asks and finishes its questions in another order
// each time.
type jitterFS struct {
	transport.FS
	n atomic.Int64
}

func (j *jitterFS) wait() {
	time.Sleep(time.Duration(j.n.Add(7)%5) * 300 * time.Microsecond)
}

func (j *jitterFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	j.wait()
	return j.FS.Lstat(ctx, name)
}

func (j *jitterFS) ReadDir(ctx context.Context, name string, max int) ([]transport.FileInfo, error) {
	j.wait()
	return j.FS.ReadDir(ctx, name, max)
}

// TestWalkHintStable: walks of an unchanged tree leave the same hint,
// byte for byte, whatever order their answers came in, so that an idle
// tick does not rewrite it; and the calls go shallow before deep.
func TestWalkHintStable(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	var files []string
	for i := range 12 {
		files = append(files, fmt.Sprintf("w/g%d/r%d/.claude/memory-handoffs/", i%3, i), fmt.Sprintf("w/g%d/r%d/.codex/memory-handoffs/", i%3, i))
	}
	build(t, root, append(files, "declared/.claude/memory-handoffs/")...)
	var first []byte
	var hint []claim.WalkCall
	for run := range 4 {
		fsys := &jitterFS{FS: transport.NewLocal()}
		fsys.n.Store(int64(run))
		_, walked := walkWith(t, fsys, root, hint)
		data, err := claim.MarshalHint(claim.Hint{Calls: walked})
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			first = data
			for i := 1; i < len(walked); i++ {
				if strings.Count(walked[i].Path, "/") < strings.Count(walked[i-1].Path, "/") {
					t.Fatalf("call %d (%s) is shallower than the one before it (%s)", i, walked[i].Path, walked[i-1].Path)
				}
			}
		} else if !slices.Equal(data, first) {
			t.Fatalf("walk %d left another hint than the first (%d and %d bytes)", run, len(data), len(first))
		}
		if run%2 == 0 {
			hint = walked // with and without a hint, alternately
		} else {
			hint = nil
		}
	}
}
