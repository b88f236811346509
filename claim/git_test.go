package claim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// gitCmd returns a function running the real git in a clean environment:
// no system or user configuration, a throw-away HOME.
func gitCmd(t *testing.T) func(dir string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("HANDOFF_E2E_REQUIRED") != "" {
			t.Fatalf("git not found and HANDOFF_E2E_REQUIRED is set: %v", err)
		}
		t.Skipf("git not found: %v", err)
	}
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	return func(dir string, args ...string) string {
		t.Helper()
		full := append([]string{
			"-c", "user.name=Handoff Test", "-c", "user.email=handoff@example.invalid",
			"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false",
		}, args...)
		cmd := exec.Command(bin, full...)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// TestGitTracked runs discovery and a pull on repositories made by the real
// git. A handoff file that git tracks belongs to the repository, not to the
// inbox: it must never be read, moved or counted as pending. An index that
// cannot be decoded must fail closed (inbox skipped, nothing touched).
// Invariants: nothing on the host changed that was not a handoff; no handoff
// lost (an unreadable index defers the whole inbox rather than guessing).
func TestGitTracked(t *testing.T) {
	t.Parallel()
	const inboxRel = ".claude/memory-handoffs"
	type repo struct {
		dir   string // the repository the inbox lives in
		inbox string
	}
	tests := []struct {
		name string
		// setup builds a repository below root and returns it.
		setup       func(t *testing.T, git func(string, ...string) string, root string) repo
		wantState   string
		wantCands   []string
		wantTracked int
		// untouched are inbox files a pull must leave exactly as they are.
		untouched []string
	}{
		{
			name: "committed file is tracked, untracked one is a candidate",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"new.md"}, wantTracked: 1,
			untouched: []string{"tracked.md"},
		},
		{
			name: "staged but not committed is tracked",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/staged.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"new.md"}, wantTracked: 1,
			untouched: []string{"staged.md"},
		},
		{
			name: "worktree (.git is a file) with a tracked handoff",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				main := filepath.Join(root, "main")
				build(t, root, "main/.claude/memory-handoffs/tracked.md")
				git(main, "init", "-q")
				git(main, "add", ".")
				git(main, "commit", "-q", "-m", "tracked handoff")
				git(main, "worktree", "add", "-q", filepath.Join(root, "wt"))
				// The main checkout's inbox must not be the one found: drop it.
				if err := os.RemoveAll(filepath.Join(main, ".claude")); err != nil {
					t.Fatal(err)
				}
				r := repo{dir: filepath.Join(root, "wt")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				if fi, err := os.Lstat(filepath.Join(r.dir, ".git")); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("precondition: worktree .git is not a file: %v", err)
				}
				if err := os.Chtimes(filepath.Join(r.inbox, "tracked.md"), old, old); err != nil {
					t.Fatal(err)
				}
				build(t, root, "wt/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"new.md"}, wantTracked: 1,
			untouched: []string{"tracked.md"},
		},
		{
			name: "relative gitdir file",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				git(r.dir, "init", "-q", "--separate-git-dir", filepath.Join(root, "store.git"))
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				if err := os.WriteFile(filepath.Join(r.dir, ".git"), []byte("gitdir: ../store.git\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"new.md"}, wantTracked: 1,
			untouched: []string{"tracked.md"},
		},
		{
			name: "index version 4",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md", "r/.claude/memory-handoffs/tracked-too.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoffs")
				git(r.dir, "update-index", "--index-version", "4")
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"new.md"}, wantTracked: 2,
			untouched: []string{"tracked.md", "tracked-too.md"},
		},
		{
			name: "git init without a commit tracks nothing",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/a.md", "r/.claude/memory-handoffs/b.md")
				git(r.dir, "init", "-q")
				if _, err := os.Lstat(filepath.Join(r.dir, ".git", "index")); err == nil {
					t.Fatal("precondition: git init wrote an index")
				}
				return r
			},
			wantState: claim.StateOK, wantCands: []string{"a.md", "b.md"},
		},
		{
			name: "corrupt index (garbage) is git-unreadable",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				if err := os.WriteFile(filepath.Join(r.dir, ".git", "index"), fixture(t, "git/garbage-index"), 0o644); err != nil {
					t.Fatal(err)
				}
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateGitUnreadable,
			untouched: []string{"tracked.md", "new.md"},
		},
		{
			name: "index with a bad checksum is git-unreadable",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				breakIndexChecksum(t, r.dir)
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateGitUnreadable,
			untouched: []string{"tracked.md", "new.md"},
		},
		{
			name: "split index (entries elsewhere) fails closed",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				git(r.dir, "update-index", "--split-index")
				build(t, root, "r/.claude/memory-handoffs/new.md")
				return r
			},
			wantState: claim.StateGitUnreadable,
			untouched: []string{"tracked.md", "new.md"},
		},
		{
			name: "a .git file that is not a gitdir file is git-unreadable",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/a.md")
				if err := os.WriteFile(filepath.Join(r.dir, ".git"), []byte("not a gitdir line\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return r
			},
			wantState: claim.StateGitUnreadable,
			untouched: []string{"a.md"},
		},
		{
			// Symlinks are never followed, so a symlinked .git cannot be
			// read: the inbox is skipped rather than guessed untracked.
			name: "a symlinked .git is git-unreadable",
			setup: func(t *testing.T, git func(string, ...string) string, root string) repo {
				r := repo{dir: filepath.Join(root, "r")}
				r.inbox = filepath.Join(r.dir, inboxRel)
				build(t, root, "r/.claude/memory-handoffs/tracked.md")
				git(r.dir, "init", "-q")
				git(r.dir, "add", ".")
				git(r.dir, "commit", "-q", "-m", "tracked handoff")
				if err := os.Rename(filepath.Join(r.dir, ".git"), filepath.Join(root, ".real-git")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Join(root, ".real-git"), filepath.Join(r.dir, ".git")); err != nil {
					t.Fatal(err)
				}
				return r
			},
			wantState: claim.StateGitUnreadable,
			untouched: []string{"tracked.md"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			git := gitCmd(t)
			root := tempRoot(t)
			r := tc.setup(t, git, root)
			cfg := baseConfig()
			cfg.Roots = []claim.Root{{Path: root, MaxDepth: 1}}

			// Discovery alone.
			fsys := &guardFS{t: t, within: r.inbox, max: mib}
			ins := discover(t, fsys, cfg)
			if len(ins) != 1 || ins[0].Path != r.inbox {
				var got []string
				for _, in := range ins {
					got = append(got, in.Path)
				}
				t.Fatalf("inboxes %q, want only %s", got, r.inbox)
			}
			in := ins[0]
			if in.State != tc.wantState || !equalStrings(names(in.Candidates), tc.wantCands) || in.Tracked != tc.wantTracked {
				t.Errorf("inbox: state %q candidates %q tracked %d (err %v); want %q %q %d",
					in.State, names(in.Candidates), in.Tracked, in.Err, tc.wantState, tc.wantCands, tc.wantTracked)
			}

			// A full pull: tracked (and unreadable-index) files stay as they are.
			type kept struct {
				data  []byte
				mtime int64
			}
			before := map[string]kept{}
			for _, n := range tc.untouched {
				p := filepath.Join(r.inbox, n)
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				before[n] = kept{data, fi.ModTime().UnixNano()}
			}
			spool := openSpool(t)
			rec := newRecorder()
			fsys = &guardFS{t: t, spool: spool, rec: rec, within: r.inbox, max: mib}
			rep := pull(t, fsys, cfg, spool, rec)
			if rep.Outcome != "ok" {
				t.Errorf("outcome %q (%s), want ok", rep.Outcome, rep.Error)
			}
			if len(rep.Inboxes) != 1 {
				t.Fatalf("report inboxes %+v", rep.Inboxes)
			}
			ir := rep.Inboxes[0]
			if ir.State != tc.wantState || ir.Tracked != tc.wantTracked || ir.Pending != len(tc.wantCands) {
				t.Errorf("inbox report %+v; want state %q tracked %d pending %d", ir, tc.wantState, tc.wantTracked, len(tc.wantCands))
			}
			if rep.Stored != len(tc.wantCands) {
				t.Errorf("stored %d, want %d", rep.Stored, len(tc.wantCands))
			}
			for n, k := range before {
				p := filepath.Join(r.inbox, n)
				if fsys.wasRead(p) {
					t.Errorf("%s was read", n)
				}
				data, err := os.ReadFile(p)
				if err != nil {
					t.Errorf("%s no longer in the inbox: %v", n, err)
					continue
				}
				fi, _ := os.Lstat(p)
				if string(data) != string(k.data) || fi.ModTime().UnixNano() != k.mtime {
					t.Errorf("%s changed", n)
				}
			}
			for _, n := range tc.wantCands {
				if _, err := os.Lstat(filepath.Join(r.inbox, n)); err == nil {
					t.Errorf("candidate %s still in the inbox after the pull", n)
				}
				rec.assertOrder(t, n)
			}
			if tc.wantState != claim.StateOK {
				for _, d := range []string{claim.ProcessedDir, claim.MalformedDir} {
					if _, err := os.Lstat(filepath.Join(r.inbox, d)); err == nil {
						t.Errorf("%s/ created in a skipped inbox", d)
					}
				}
				if rec.count() != 0 {
					t.Errorf("%d sources recorded from a skipped inbox", rec.count())
				}
			}
		})
	}
}

// TestIndexTracksNoInbox checks the shortcut that spares decoding an index
// in the usual case. It may say "nothing in an inbox is tracked" only when
// that is certain; a wrong yes would let a pull move a file git tracks
// (invariant: nothing on the host changed that was not a handoff).
func TestIndexTracksNoInbox(t *testing.T) {
	t.Parallel()
	git := gitCmd(t)
	tests := []struct {
		name  string
		setup func(dir string)
		want  bool
	}{
		{"version 2, no inbox file tracked", func(dir string) {}, true},
		{"version 3, no inbox file tracked", func(dir string) { git(dir, "update-index", "--index-version", "3") }, true},
		{"an inbox file tracked", func(dir string) {
			build(t, dir, ".claude/memory-handoffs/tracked.md")
			git(dir, "add", ".")
		}, false},
		{"an inbox file staged in a nested repository path", func(dir string) {
			build(t, dir, "sub/.codex/memory-handoffs/x.md")
			git(dir, "add", ".")
		}, false},
		{"version 4 (prefix-compressed paths)", func(dir string) { git(dir, "update-index", "--index-version", "4") }, false},
		{"split index (entries in another file)", func(dir string) { git(dir, "update-index", "--split-index") }, false},
		{"bad checksum", func(dir string) { breakIndexChecksum(t, dir) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(tempRoot(t), "r")
			build(t, dir, "src/main.go", "docs/notes.md", ".claude/settings.md")
			git(dir, "init", "-q")
			git(dir, "add", ".")
			git(dir, "commit", "-q", "-m", "files")
			tc.setup(dir)
			data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			if got := claim.IndexTracksNoInbox(data); got != tc.want {
				t.Errorf("IndexTracksNoInbox = %v, want %v (index version %d)", got, tc.want, data[7])
			}
		})
	}
}

// breakIndexChecksum flips a bit of the SHA-1 trailer of repo's git index.
func breakIndexChecksum(t *testing.T, repo string) {
	t.Helper()
	idx := filepath.Join(repo, ".git", "index")
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(idx, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
