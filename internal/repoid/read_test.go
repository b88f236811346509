package repoid

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff-sync/handoff/transport"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

const originCfg = "[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n"

// TestRead: the origin of a plain clone, a worktree (a .git file and a
// commondir) and a submodule (a .git file into the superproject); no
// origin for a directory without git or a remote; and for each hostile
// shape a bounded, reported result: nothing followed, nothing big read,
// nothing binary parsed.
func TestRead(t *testing.T) {
	ctx := context.Background()
	fsys := transport.NewLocal()
	dir := t.TempDir()
	repo := func(name string) string { return filepath.Join(dir, name) }

	write(t, repo("clone/.git/config"), originCfg)
	write(t, repo("main/.git/config"), originCfg)
	write(t, repo("main/.git/worktrees/wt/commondir"), "../..\n")
	write(t, repo("wt/.git"), "gitdir: "+repo("main/.git/worktrees/wt")+"\n")
	write(t, repo("super/.git/modules/sub/config"), "[remote \"origin\"]\n\turl = https://github.com/acme/sub\n")
	write(t, repo("super/sub/.git"), "gitdir: ../.git/modules/sub\n")
	write(t, repo("plain/README"), "no git here\n")
	write(t, repo("noremote/.git/config"), "[core]\n\tbare = false\n")
	write(t, repo("local/.git/config"), "[remote \"origin\"]\n\turl = /srv/git/app.git\n")
	write(t, repo("nocfg/.git/HEAD"), "ref: refs/heads/main\n")

	// Hostile shapes.
	write(t, repo("elsewhere/.git/config"), originCfg)
	if err := os.MkdirAll(repo("symlinked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo("elsewhere/.git"), repo("symlinked/.git")); err != nil {
		t.Fatal(err)
	}
	write(t, repo("cfglink/.git/HEAD"), "x\n")
	if err := os.Symlink(repo("elsewhere/.git/config"), repo("cfglink/.git/config")); err != nil {
		t.Fatal(err)
	}
	write(t, repo("huge/.git/config"), "")
	if err := os.Truncate(repo("huge/.git/config"), 1<<30); err != nil { // sparse: 1 GiB claimed
		t.Fatal(err)
	}
	write(t, repo("binary/.git/config"), "[remote \"origin\"]\n\turl = https://x/a\x00\x01\x02\n")
	write(t, repo("notutf8/.git/config"), "[remote \"origin\"]\n\turl = https://x/\xff\xfe\n")
	write(t, repo("control/.git/config"), "[remote \"origin\"]\n\turl = \"https://x/a\\b\\bevil\"\n")
	write(t, repo("escape/.git/config"), "[remote \"origin\"]\n\turl = https://x/\x1b]0;owned\x07\n")
	write(t, repo("biggitfile/.git"), "gitdir: "+strings.Repeat("a", 8<<10)+"\n")
	write(t, repo("badgitfile/.git"), "not a pointer\n")
	if err := os.MkdirAll(repo("fifo/.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(repo("fifo/.git/config"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		repo, origin, problem string
	}{
		{"clone", "github.com/acme/app", ""},
		{"wt", "github.com/acme/app", ""},
		{"super/sub", "github.com/acme/sub", ""},
		{"plain", "", ""},
		{"noremote", "", ""},
		{"local", "", ""},
		{"nocfg", "", ""},
		{"symlinked", "", "is a symlink; it is not followed"},
		{"cfglink", "", "read "},
		{"huge", "", "is larger than 65536 bytes; not read"},
		{"binary", "", "is not a text file"},
		{"notutf8", "", "is not a text file"},
		{"control", "", "origin: remote URL holds control or invisible characters"},
		{"escape", "", "origin: remote URL holds control or invisible characters"},
		{"biggitfile", "", "is larger than 4096 bytes; not read"},
		{"badgitfile", "", "does not name a directory"},
		{"fifo", "", "read "},
	} {
		id := Read(ctx, fsys, repo(tc.repo))
		if id.Path != repo(tc.repo) || id.Origin != tc.origin || !strings.Contains(id.Problem, tc.problem) || tc.problem == "" && id.Problem != "" {
			t.Errorf("%s: %+v; want origin %q, problem containing %q", tc.repo, id, tc.origin, tc.problem)
		}
		if strings.ContainsFunc(id.Problem, badRune) || len(id.Problem) > maxProblem+len("…") {
			t.Errorf("%s: problem %q holds control characters or is too long", tc.repo, id.Problem)
		}
	}
}

// TestReadDone: a cancelled context ends Read with a problem, not a hang.
func TestReadDone(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".git/config"), originCfg)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id := Read(ctx, cancelledFS{transport.NewLocal()}, dir)
	if id.Origin != "" || id.Problem == "" {
		t.Fatalf("%+v; want a problem", id)
	}
}

// cancelledFS fails every call whose context is done, as the SSH
// transport does.
type cancelledFS struct{ transport.Local }

func (c cancelledFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return transport.FileInfo{}, err
	}
	return c.Local.Lstat(ctx, name)
}
