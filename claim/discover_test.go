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
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/transport"
)

type wantInbox struct {
	state   string
	cands   []string
	ignored []string // raw names; compared with claim.Quote applied
}

// TestDiscover builds a tree per case, runs Discover with one declared-inbox
// list and one discovery root "w", and compares every inbox found (paths
// relative to the tree). Discovery decides what the pull may touch, so these
// cases protect "nothing read or moved that the host did not offer as a
// handoff" and "no handoff lost" (a missing inbox stays visible).
func TestDiscover(t *testing.T) {
	t.Parallel()
	hostile := []string{"a\nb.md", "a\x1b[31mred.md", "a\xffb.md", "a\u202etxt.md"}
	tests := []struct {
		name      string
		specs     []string
		inboxes   []string // declared, relative to the tree
		depth     int      // max_depth of the root "w"; -1: no root
		harnesses []string // nil: .claude and .codex
		want      map[string]wantInbox
	}{
		{
			name:  "repo at max_depth found, one level deeper not",
			specs: []string{"w/a/b/.claude/memory-handoffs/x.md", "w/a/b/c/.claude/memory-handoffs/y.md"},
			depth: 2,
			want:  map[string]wantInbox{"w/a/b/.claude/memory-handoffs": {state: "ok", cands: []string{"x.md"}}},
		},
		{
			name:  "root is depth 0",
			specs: []string{"w/.claude/memory-handoffs/x.md", "w/a/.claude/memory-handoffs/y.md"},
			depth: 0,
			want:  map[string]wantInbox{"w/.claude/memory-handoffs": {state: "ok", cands: []string{"x.md"}}},
		},
		{
			name:  "depth 1 finds the root and its children",
			specs: []string{"w/.claude/memory-handoffs/x.md", "w/a/.claude/memory-handoffs/y.md", "w/a/b/.codex/memory-handoffs/z.md"},
			depth: 1,
			want: map[string]wantInbox{
				"w/.claude/memory-handoffs":   {state: "ok", cands: []string{"x.md"}},
				"w/a/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}},
			},
		},
		{
			name: "a symlinked directory is never followed",
			specs: []string{
				"elsewhere/r/.claude/memory-handoffs/x.md",
				"w/link -> ../elsewhere",
				"w/r/.claude/memory-handoffs/y.md",
			},
			depth: 3,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}}},
		},
		{
			name:  "dot-directories are not descended",
			specs: []string{"w/.cache/r/.claude/memory-handoffs/x.md", "w/r/.claude/memory-handoffs/y.md"},
			depth: 3,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}}},
		},
		{
			name: "opt-out marker hides the directory and everything below it",
			specs: []string{
				"w/a/.no-memory-handoffs",
				"w/a/.claude/memory-handoffs/x.md",
				"w/a/b/.claude/memory-handoffs/y.md",
				"w/c/.claude/memory-handoffs/z.md",
			},
			depth: 3,
			want:  map[string]wantInbox{"w/c/.claude/memory-handoffs": {state: "ok", cands: []string{"z.md"}}},
		},
		{
			// Directories at max_depth are probed by name, not listed:
			// their opt-out marker still hides them.
			name:  "opt-out marker in a repository at max_depth",
			specs: []string{"w/a/.no-memory-handoffs", "w/a/.claude/memory-handoffs/x.md", "w/b/.codex/memory-handoffs/y.md"},
			depth: 1,
			want:  map[string]wantInbox{"w/b/.codex/memory-handoffs": {state: "ok", cands: []string{"y.md"}}},
		},
		{
			name: "a symlink at max_depth is never followed",
			specs: []string{
				"elsewhere/.claude/memory-handoffs/x.md",
				"w/link -> ../elsewhere",
				"w/r/.claude/memory-handoffs/y.md",
			},
			depth: 1,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}}},
		},
		{
			name:  "opt-out marker at the root hides everything",
			specs: []string{"w/.no-memory-handoffs", "w/.claude/memory-handoffs/x.md", "w/a/.claude/memory-handoffs/y.md"},
			depth: 3,
			want:  map[string]wantInbox{},
		},
		{
			name:  "opt-out marker inside a discovered inbox",
			specs: []string{"w/a/.claude/memory-handoffs/.no-memory-handoffs", "w/a/.claude/memory-handoffs/x.md"},
			depth: 1,
			want:  map[string]wantInbox{"w/a/.claude/memory-handoffs": {state: "opted-out"}},
		},
		{
			name:    "declared inbox whose repository opts out",
			specs:   []string{"d/.no-memory-handoffs", "d/.claude/memory-handoffs/x.md"},
			inboxes: []string{"d/.claude/memory-handoffs"},
			depth:   -1,
			want:    map[string]wantInbox{"d/.claude/memory-handoffs": {state: "opted-out"}},
		},
		{
			name:    "declared inbox whose harness directory opts out",
			specs:   []string{"d/.claude/.no-memory-handoffs", "d/.claude/memory-handoffs/x.md"},
			inboxes: []string{"d/.claude/memory-handoffs"},
			depth:   -1,
			want:    map[string]wantInbox{"d/.claude/memory-handoffs": {state: "opted-out"}},
		},
		{
			name:    "declared inbox that opts out itself",
			specs:   []string{"d/.claude/memory-handoffs/.no-memory-handoffs", "d/.claude/memory-handoffs/x.md"},
			inboxes: []string{"d/.claude/memory-handoffs"},
			depth:   -1,
			want:    map[string]wantInbox{"d/.claude/memory-handoffs": {state: "opted-out"}},
		},
		{
			name:    "symlinked declared inbox",
			specs:   []string{"real/x.md", "d/.claude/memory-handoffs -> ../../real"},
			inboxes: []string{"d/.claude/memory-handoffs"},
			depth:   -1,
			want:    map[string]wantInbox{"d/.claude/memory-handoffs": {state: "symlink"}},
		},
		{
			name: "symlinked harness directory and symlinked inbox under a root",
			specs: []string{
				"real/memory-handoffs/x.md",
				"w/r/.claude -> ../../real",
				"w/s/.claude/memory-handoffs -> ../../../real/memory-handoffs",
			},
			depth: 2,
			want: map[string]wantInbox{
				"w/r/.claude/memory-handoffs": {state: "symlink"},
				"w/s/.claude/memory-handoffs": {state: "symlink"},
			},
		},
		{
			name:    "missing declared inbox stays listed",
			specs:   []string{"w/"},
			inboxes: []string{"gone/.claude/memory-handoffs"},
			depth:   1,
			want:    map[string]wantInbox{"gone/.claude/memory-handoffs": {state: "missing"}},
		},
		{
			name:    "declared inbox that is a file",
			specs:   []string{"d/.claude/memory-handoffs"},
			inboxes: []string{"d/.claude/memory-handoffs"},
			depth:   -1,
			want:    map[string]wantInbox{"d/.claude/memory-handoffs": {state: "error"}},
		},
		{
			name:  "harness not in the list is ignored",
			specs: []string{"w/r/.grok/memory-handoffs/x.md", "w/r/.claude/memory-handoffs/y.md"},
			depth: 1,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}}},
		},
		{
			name:      "harness in the list is found",
			specs:     []string{"w/r/.grok/memory-handoffs/x.md", "w/r/.claude/memory-handoffs/y.md"},
			depth:     1,
			harnesses: []string{".claude", ".grok"},
			want: map[string]wantInbox{
				"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"y.md"}},
				"w/r/.grok/memory-handoffs":   {state: "ok", cands: []string{"x.md"}},
			},
		},
		{
			name:  "harness directory without an inbox",
			specs: []string{"w/r/.claude/settings.json"},
			depth: 1,
			want:  map[string]wantInbox{},
		},
		{
			name: "candidates are *.md entries directly in the inbox",
			specs: []string{
				"w/r/.claude/memory-handoffs/x.md",
				"w/r/.claude/memory-handoffs/.hidden.md",
				"w/r/.claude/memory-handoffs/.md",
				"w/r/.claude/memory-handoffs/notes.txt",
				"w/r/.claude/memory-handoffs/processed/x.0123456789ab.md",
				"w/r/.claude/memory-handoffs/malformed/y.md",
				"w/r/.claude/memory-handoffs/sub/z.md",
			},
			depth: 1,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"x.md"}}},
		},
		{
			name: "hostile names are reported quoted, never candidates",
			specs: append([]string{"w/r/.claude/memory-handoffs/ok.md"},
				prefixAll("w/r/.claude/memory-handoffs/", hostile)...),
			depth: 1,
			want:  map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"ok.md"}, ignored: hostile}},
		},
		{
			name:    "an inbox both declared and discovered is listed once",
			specs:   []string{"w/r/.claude/memory-handoffs/x.md"},
			inboxes: []string{"w/r/.claude/memory-handoffs"},
			depth:   1,
			want:    map[string]wantInbox{"w/r/.claude/memory-handoffs": {state: "ok", cands: []string{"x.md"}}},
		},
		{
			name:  "missing discovery root finds nothing",
			specs: []string{"other/.claude/memory-handoffs/x.md"},
			depth: 2,
			want:  map[string]wantInbox{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := tempRoot(t)
			build(t, root, tc.specs...)
			cfg := baseConfig()
			if tc.harnesses != nil {
				cfg.Harnesses = tc.harnesses
			}
			for _, in := range tc.inboxes {
				cfg.Inboxes = append(cfg.Inboxes, path.Join(root, in))
			}
			if tc.depth >= 0 {
				cfg.Roots = []claim.Root{{Path: path.Join(root, "w"), MaxDepth: tc.depth}}
			}
			got := discover(t, transport.NewLocal(), cfg)
			seen := map[string]bool{}
			for _, in := range got {
				rel := strings.TrimPrefix(in.Path, root+"/")
				if seen[rel] {
					t.Errorf("inbox %s listed twice", rel)
				}
				seen[rel] = true
				w, ok := tc.want[rel]
				if !ok {
					t.Errorf("unexpected inbox %s (state %s, candidates %q)", rel, in.State, names(in.Candidates))
					continue
				}
				if in.State != w.state {
					t.Errorf("inbox %s: state %q, want %q (err %v)", rel, in.State, w.state, in.Err)
				}
				if !equalStrings(names(in.Candidates), w.cands) {
					t.Errorf("inbox %s: candidates %q, want %q", rel, names(in.Candidates), w.cands)
				}
				var wantIgn []string
				for _, n := range w.ignored {
					wantIgn = append(wantIgn, claim.Quote(n))
				}
				if !equalStrings(in.Ignored, wantIgn) {
					t.Errorf("inbox %s: ignored %q, want %q", rel, in.Ignored, wantIgn)
				}
				for _, q := range in.Ignored {
					if strings.ContainsFunc(q, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
						t.Errorf("inbox %s: ignored name %q is not printable ASCII", rel, q)
					}
				}
				if in.Tracked != 0 {
					t.Errorf("inbox %s: tracked %d without git", rel, in.Tracked)
				}
			}
			for rel := range tc.want {
				if !seen[rel] {
					t.Errorf("inbox %s not found", rel)
				}
			}
		})
	}
}

func prefixAll(prefix string, s []string) []string {
	var out []string
	for _, x := range s {
		out = append(out, prefix+x)
	}
	return out
}

// TestDiscoverHarnessOptOut protects "a directory holding .no-memory-handoffs
// is skipped with everything below it" for discovered inboxes: a marker in
// the harness directory must hide its inbox, as it already does for a
// declared one.
func TestDiscoverHarnessOptOut(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root, "w/r/.claude/.no-memory-handoffs", "w/r/.claude/memory-handoffs/x.md")
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: filepath.Join(root, "w"), MaxDepth: 1}}
	for _, in := range discover(t, transport.NewLocal(), cfg) {
		if in.State != claim.StateOptedOut || len(in.Candidates) > 0 {
			t.Errorf("inbox %s below an opted-out harness directory: state %q, candidates %q", in.Path, in.State, names(in.Candidates))
		}
	}
}

// TestDiscoverExpandsHome checks that "~" in declared inboxes and roots is
// the transport's home directory. Not parallel: it sets HOME.
func TestDiscoverExpandsHome(t *testing.T) {
	root := tempRoot(t)
	t.Setenv("HOME", root)
	build(t, root, "d/.claude/memory-handoffs/x.md", "code/r/.codex/memory-handoffs/y.md")
	cfg := baseConfig()
	cfg.Inboxes = []string{"~/d/.claude/memory-handoffs"}
	cfg.Roots = []claim.Root{{Path: "~/code", MaxDepth: 1}}
	got := discover(t, transport.NewLocal(), cfg)
	want := []string{root + "/d/.claude/memory-handoffs", root + "/code/r/.codex/memory-handoffs"}
	var paths []string
	for _, in := range got {
		paths = append(paths, in.Path)
		if in.State != claim.StateOK || len(in.Candidates) != 1 {
			t.Errorf("inbox %s: state %q, candidates %q", in.Path, in.State, names(in.Candidates))
		}
	}
	if !equalStrings(paths, want) {
		t.Errorf("inboxes %q, want %q", paths, want)
	}
	if _, err := os.Lstat(filepath.Join(root, "~")); err == nil {
		t.Error("a directory named ~ exists")
	}
}

// TestDiscoverBoundsIgnored protects "nothing a host sends makes the run
// grow without bound": a flood of hostile names is counted, and only the
// first claim.MaxIgnored are listed.
func TestDiscoverBoundsIgnored(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	inbox := filepath.Join(root, "d", ".claude", claim.InboxDir)
	build(t, root, "d/.claude/memory-handoffs/ok.md")
	const n = claim.MaxIgnored + 5
	for i := range n {
		writeFile(t, filepath.Join(inbox, fmt.Sprintf("bad\x1b%03d.md", i)), nil, old)
	}
	cfg := baseConfig()
	cfg.Inboxes = []string{inbox}
	got := discover(t, transport.NewLocal(), cfg)
	if len(got) != 1 {
		t.Fatalf("%d inboxes", len(got))
	}
	in := got[0]
	if len(in.Ignored) != claim.MaxIgnored || in.IgnoredN != n {
		t.Errorf("ignored: %d listed, %d counted; want %d listed, %d counted", len(in.Ignored), in.IgnoredN, claim.MaxIgnored, n)
	}
	if !equalStrings(names(in.Candidates), []string{"ok.md"}) {
		t.Errorf("candidates %q", names(in.Candidates))
	}
}

// callLog records the order of Lstat, ReadDir and Mkdir calls.
type callLog struct {
	transport.FS
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func (c *callLog) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	c.add("lstat " + name)
	return c.FS.Lstat(ctx, name)
}

func (c *callLog) ReadDir(ctx context.Context, name string, max int) ([]transport.FileInfo, error) {
	c.add("readdir " + name)
	return c.FS.ReadDir(ctx, name, max)
}

func (c *callLog) Mkdir(ctx context.Context, name string) error {
	c.add("mkdir " + name)
	return c.FS.Mkdir(ctx, name)
}

// count returns how many calls were s.
func (c *callLog) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.calls {
		if x == s {
			n++
		}
	}
	return n
}

// TestDiscoverAsksGitOnlyForCandidates: an idle tick asks nothing of a
// repository's git, and leaves a walk hint without it; once the inbox
// holds a candidate, .git and its index are asked about (files git tracks
// are never taken) after the listing and once, and the hint that run
// leaves holds them, so that the next run asks them in its first wave.
func TestDiscoverAsksGitOnlyForCandidates(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root, "w/r/.claude/memory-handoffs/", "w/r/.git/HEAD")
	repo := filepath.Join(root, "w/r")
	gitCalls := []claim.WalkCall{{Op: claim.WalkLstat, Path: repo + "/.git"}, {Op: claim.WalkLstat, Path: repo + "/.git/index"}}
	run := func() ([]*claim.Inbox, *callLog, claim.Hint) {
		t.Helper()
		cfg := baseConfig()
		cfg.Roots = []claim.Root{{Path: filepath.Join(root, "w"), MaxDepth: 1}}
		var walked claim.Hint
		cfg.Walked = func(h claim.Hint) { walked = h }
		log := &callLog{FS: transport.NewLocal()}
		return discover(t, log, cfg), log, walked
	}

	ins, log, hint := run()
	if len(ins) != 1 || ins[0].State != claim.StateOK || len(ins[0].Candidates) != 0 {
		t.Fatalf("idle: inboxes %+v, want one, empty", ins)
	}
	for _, c := range gitCalls {
		if n := log.count("lstat " + c.Path); n != 0 {
			t.Errorf("an idle walk asked about %s %d times, want never\n%s", c.Path, n, strings.Join(log.calls, "\n"))
		}
		if slices.Contains(hint.Calls, c) {
			t.Errorf("an idle walk left a hint that asks about %s", c.Path)
		}
	}

	build(t, root, "w/r/.claude/memory-handoffs/x.md")
	ins, log, hint = run()
	if len(ins) != 1 || len(ins[0].Candidates) != 1 {
		t.Fatalf("inboxes %+v, want one with x.md", ins)
	}
	listAt := slices.Index(log.calls, "readdir "+repo+"/.claude/memory-handoffs")
	for _, c := range gitCalls {
		if at := slices.Index(log.calls, "lstat "+c.Path); at < listAt {
			t.Errorf("%s asked about at call %d, the inbox listed at %d: want it after the listing", c.Path, at, listAt)
		}
		if !slices.Contains(hint.Calls, c) {
			t.Errorf("the walk that read the index left a hint without %s: %v", c.Path, hint.Calls)
		}
	}
	if n := log.count("lstat " + repo + "/.git"); n != 1 {
		t.Errorf(".git asked about %d times, want once", n)
	}
}

// batchFS takes LSTATs in batches (transport.Batcher) and vouches for its
// LSTAT, as the SSH transport does against OpenSSH; it counts the LSTATs
// asked one by one and the batches.
type batchFS struct {
	transport.FS
	mu             sync.Mutex
	single, batchN int
}

func (b *batchFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	b.mu.Lock()
	b.single++
	b.mu.Unlock()
	return b.FS.Lstat(ctx, name)
}

func (b *batchFS) LstatAll(ctx context.Context, names []string) ([]transport.FileInfo, []error) {
	b.mu.Lock()
	b.batchN++
	b.mu.Unlock()
	fis := make([]transport.FileInfo, len(names))
	errs := make([]error, len(names))
	for i, n := range names {
		fis[i], errs[i] = b.FS.Lstat(ctx, n)
	}
	return fis, errs
}

func (*batchFS) LstatNoFollow() bool { return true }

// TestDiscoverBatchesLstats: over a transport that takes LSTATs in
// batches, discovery asks them so, the inbox and its markers included;
// only a discovery root is asked about alone. A repository at max_depth
// costs three batches: its harness directories; their markers, their
// inboxes and its own marker; and, with a candidate, its .git.
func TestDiscoverBatchesLstats(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	build(t, root, "w/g/r1/.claude/memory-handoffs/a.md", "w/g/r2/.codex/memory-handoffs/b.md", "w/g/r2/.claude/memory-handoffs/")
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: filepath.Join(root, "w"), MaxDepth: 2}}
	fsys := &batchFS{FS: transport.NewLocal()}
	ins := discover(t, fsys, cfg)
	if len(ins) != 3 {
		t.Fatalf("found %d inboxes, want 3", len(ins))
	}
	if fsys.single != 1 {
		t.Errorf("%d LSTATs asked one by one, want 1 (the root)", fsys.single)
	}
	if fsys.batchN != 6 {
		t.Errorf("%d batches of LSTATs for two repositories, want 6", fsys.batchN)
	}
}
