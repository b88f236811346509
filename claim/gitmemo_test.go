package claim_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/transport"
)

// indexFS counts the whole reads and the tail reads of git indexes.
type indexFS struct {
	transport.Local
	mu          sync.Mutex
	whole, tail int
}

func isIndex(name string) bool { return strings.HasSuffix(name, "/.git/index") }

func (f *indexFS) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	if isIndex(name) {
		f.mu.Lock()
		f.whole++
		f.mu.Unlock()
	}
	return f.Local.ReadFile(ctx, name, limit)
}

func (f *indexFS) ReadTail(ctx context.Context, name string, listed transport.FileInfo, n int64) ([]byte, error) {
	if isIndex(name) {
		f.mu.Lock()
		f.tail++
		f.mu.Unlock()
	}
	return f.Local.ReadTail(ctx, name, listed, n)
}

func (f *indexFS) reads() (whole, tail int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, t := f.whole, f.tail
	f.whole, f.tail = 0, 0
	return w, t
}

// TestIndexMemo: a git index that has not changed since the last run is
// checked by its last 20 bytes instead of being read and decoded, and
// discovery finds exactly what reading it finds. Invariant: a memo never
// makes discovery take a file git tracks, nor pass over a handoff git
// does not track, unless the index holds the bytes the memo was made
// from; a memo that lies about its sum or its tracked files is read past.
func TestIndexMemo(t *testing.T) {
	t.Parallel()
	git := gitCmd(t)
	root := tempRoot(t)
	repo := filepath.Join(root, "code", "r")
	inbox := filepath.Join(repo, ".claude", "memory-handoffs")
	build(t, root, "code/r/.claude/memory-handoffs/tracked.md")
	git(repo, "init", "-q")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "a tracked handoff")
	build(t, root, "code/r/.claude/memory-handoffs/new.md")
	index := filepath.Join(repo, ".git", "index")

	fsys := &indexFS{}
	run := func(hint claim.Hint) ([]string, int, claim.Hint) {
		t.Helper()
		ins, walked := discoverHinted(t, fsys, filepath.Join(root, "code"), hint)
		if len(ins) != 1 || ins[0].Path != inbox || ins[0].State != claim.StateOK {
			t.Fatalf("found %+v, want the inbox %s", ins, inbox)
		}
		return names(ins[0].Candidates), ins[0].Tracked, walked
	}
	// check runs discovery with hint and compares what it found, and how
	// the index was read, with what is wanted.
	check := func(what string, hint claim.Hint, cands []string, tracked, whole, tail int) claim.Hint {
		t.Helper()
		gotCands, gotTracked, walked := run(hint)
		if !slices.Equal(gotCands, cands) || gotTracked != tracked {
			t.Errorf("invariant violated (a memo never hides a handoff nor takes a tracked file): %s: candidates %q, %d tracked; want %q and %d", what, gotCands, gotTracked, cands, tracked)
		}
		if w, tl := fsys.reads(); w != whole || tl != tail {
			t.Errorf("%s: the index was read whole %d times and its tail %d; want %d and %d", what, w, tl, whole, tail)
		}
		return walked
	}
	want := []string{"new.md"}

	first := check("first run", claim.Hint{}, want, 1, 1, 0)
	if len(first.Indexes) != 1 {
		t.Fatalf("first run kept %d index memos, want 1: %+v", len(first.Indexes), first.Indexes)
	}
	m := first.Indexes[0]
	fi, err := os.Lstat(index)
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != index || m.Size != fi.Size() || !m.ModTime.Equal(fi.ModTime()) || !slices.Equal(m.Tracked, []string{".claude/memory-handoffs/tracked.md"}) || len(m.Sum) != 40 {
		t.Errorf("memo %+v; want %s, %d bytes, its time, the tracked handoff", m, index, fi.Size())
	}

	// Unchanged: only the tail is read, and the answer is the same.
	if second := check("with the memo", first, want, 1, 0, 1); !slices.EqualFunc(second.Indexes, first.Indexes, memoEqual) {
		t.Errorf("memo not kept as it was: %+v, want %+v", second.Indexes, first.Indexes)
	}

	// A memo that matches the lstat but not the bytes (an index rewritten
	// within the same second, or an edited hint) is read past, even when
	// it claims the new handoff is tracked.
	lie := first
	lie.Indexes = []claim.IndexMemo{m}
	lie.Indexes[0].Sum = strings.Repeat("0", 40)
	lie.Indexes[0].Tracked = []string{".claude/memory-handoffs/new.md", ".claude/memory-handoffs/tracked.md"}
	if third := check("with a wrong sum", lie, want, 1, 1, 1); !slices.EqualFunc(third.Indexes, first.Indexes, memoEqual) {
		t.Errorf("after a wrong sum the memo is %+v, want the real one %+v", third.Indexes, first.Indexes)
	}

	// Changed: git now tracks new.md too.
	git(repo, "add", ".")
	if fourth := check("after git add", first, nil, 2, 1, 0); len(fourth.Indexes) != 1 || len(fourth.Indexes[0].Tracked) != 2 {
		t.Errorf("memo after git add: %+v, want one that tracks 2 files", fourth.Indexes)
	}
}

// TestIndexMemoKeptWhileIdle: a run whose inbox has nothing to take asks
// nothing of git and keeps the index's memo, so that the run after it,
// with a new handoff, reads only the tail; a memo kept so is checked
// before it is trusted.
func TestIndexMemoKeptWhileIdle(t *testing.T) {
	t.Parallel()
	git := gitCmd(t)
	root := tempRoot(t)
	repo := filepath.Join(root, "code", "r")
	build(t, root, "code/r/README.md", "code/r/.claude/memory-handoffs/")
	git(repo, "init", "-q")
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "init")
	handoff := filepath.Join(repo, ".claude", "memory-handoffs", "new.md")

	fsys := &indexFS{}
	run := func(hint claim.Hint) ([]string, claim.Hint) {
		t.Helper()
		ins, walked := discoverHinted(t, fsys, filepath.Join(root, "code"), hint)
		if len(ins) != 1 {
			t.Fatalf("found %d inboxes, want 1", len(ins))
		}
		return names(ins[0].Candidates), walked
	}
	build(t, root, "code/r/.claude/memory-handoffs/new.md")
	cands, h := run(claim.Hint{})
	if !slices.Equal(cands, []string{"new.md"}) || len(h.Indexes) != 1 {
		t.Fatalf("first run: candidates %q, memos %+v", cands, h.Indexes)
	}
	fsys.reads()
	if err := os.Remove(handoff); err != nil {
		t.Fatal(err)
	}
	cands, idle := run(h)
	if len(cands) != 0 {
		t.Fatalf("idle run: candidates %q", cands)
	}
	if w, tl := fsys.reads(); w != 0 || tl != 0 {
		t.Errorf("an idle run read the index whole %d times and its tail %d; want neither", w, tl)
	}
	if !slices.EqualFunc(idle.Indexes, h.Indexes, memoEqual) {
		t.Errorf("idle run kept memos %+v, want %+v", idle.Indexes, h.Indexes)
	}
	build(t, root, "code/r/.claude/memory-handoffs/new.md")
	if cands, _ := run(idle); !slices.Equal(cands, []string{"new.md"}) {
		t.Errorf("after the idle run: candidates %q, want new.md", cands)
	}
	if w, tl := fsys.reads(); w != 0 || tl != 1 {
		t.Errorf("after the idle run the index was read whole %d times and its tail %d; want 0 and 1", w, tl)
	}

	// An idle run asks nothing of git, so it carries the memo of an index
	// git rewrote meanwhile; the next run with a handoff finds the index
	// changed and reads it whole rather than trust the memo.
	if err := os.Remove(handoff); err != nil {
		t.Fatal(err)
	}
	build(t, root, "code/r/other.txt")
	git(repo, "add", ".")
	_, again := run(idle)
	if !slices.EqualFunc(again.Indexes, h.Indexes, memoEqual) {
		t.Errorf("an idle run kept memos %+v, want the last run's %+v", again.Indexes, h.Indexes)
	}
	fsys.reads()
	build(t, root, "code/r/.claude/memory-handoffs/new.md")
	cands, next := run(again)
	if !slices.Equal(cands, []string{"new.md"}) {
		t.Errorf("after git add: candidates %q, want new.md", cands)
	}
	if w, _ := fsys.reads(); w != 1 {
		t.Errorf("an index changed since its memo was read whole %d times, want once", w)
	}
	if len(next.Indexes) != 1 || next.Indexes[0].Size == h.Indexes[0].Size {
		t.Errorf("after git add the memo is %+v, want one of the new index", next.Indexes)
	}
}

// TestParseHintIndexes: index memos in a hint file are local state, but
// an edited one must not hold what no run writes; a hint from before the
// memos (a bare list of calls) still reads.
func TestParseHintIndexes(t *testing.T) {
	t.Parallel()
	sum := strings.Repeat("ab", 20)
	h, err := claim.ParseHint([]byte(`{"calls":[{"op":"lstat","path":"/a"}],"indexes":[
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `","tracked":[".claude/memory-handoffs/a.md"]},
		{"path":"r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `"},
		{"path":"/r/.git/index","size":10,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `"},
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + strings.ToUpper(sum) + `"},
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"abc"},
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `","tracked":["../x/memory-handoffs/a.md"]},
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `","tracked":["src/a.md"]},
		{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `","tracked":["/memory-handoffs/a.md"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Calls) != 1 || len(h.Indexes) != 1 || h.Indexes[0].Path != "/r/.git/index" || len(h.Indexes[0].Tracked) != 1 {
		t.Errorf("kept %+v; want the one call and the one well-formed memo", h)
	}
	data, err := claim.MarshalHint(h)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := claim.ParseHint(data); err != nil || !slices.EqualFunc(back.Indexes, h.Indexes, memoEqual) || !slices.Equal(back.Calls, h.Calls) {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, h)
	}
	old, err := claim.ParseHint([]byte(`[{"op":"lstat","path":"/a"}]`))
	if err != nil || len(old.Calls) != 1 || len(old.Indexes) != 0 {
		t.Errorf("a hint in the old format: %+v, %v; want its one call", old, err)
	}
}

// discoverHinted walks codeRoot one level deep with hint, and returns
// what it found and the hint it left for the next run.
func discoverHinted(t *testing.T, fsys transport.FS, codeRoot string, hint claim.Hint) ([]*claim.Inbox, claim.Hint) {
	t.Helper()
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: codeRoot, MaxDepth: 1}}
	cfg.Hint = hint
	var walked claim.Hint
	cfg.Walked = func(h claim.Hint) { walked = h }
	return discover(t, fsys, cfg), walked
}

func memoEqual(a, b claim.IndexMemo) bool {
	return a.Path == b.Path && a.Size == b.Size && a.ModTime.Equal(b.ModTime) && a.Sum == b.Sum && slices.Equal(a.Tracked, b.Tracked)
}
