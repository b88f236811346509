package claim_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/transport"
)

// TestPullReadsRepoIdentity: with Config.Repos, the report gives each
// inbox that held a handoff its repository's identity (the origin,
// normalized; a huge config reported, not read), and the host's
// home; an inbox without a handoff is not asked about (nothing of its
// .git is touched), and without Config.Repos nothing is read.
func TestPullReadsRepoIdentity(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		root := tempRoot(t)
		build(t, root,
			"code/app/.claude/memory-handoffs/a.md",
			"code/app/.git/HEAD",
			"code/idle/.claude/memory-handoffs/",
			"code/idle/.git/HEAD",
			"code/huge/.codex/memory-handoffs/b.md",
			"code/huge/.git/HEAD",
			"code/plain/.claude/memory-handoffs/c.md",
		)
		writeFile(t, filepath.Join(root, "code/app/.git/config"), []byte("[remote \"origin\"]\n\turl = git@GitHub.com:acme/app.git\n"), old)
		writeFile(t, filepath.Join(root, "code/idle/.git/config"), []byte("[remote \"origin\"]\n\turl = https://h/idle\n"), old)
		writeFile(t, filepath.Join(root, "code/huge/.git/config"), nil, old)
		if err := os.Truncate(filepath.Join(root, "code/huge/.git/config"), 1<<30); err != nil {
			t.Fatal(err)
		}
		cfg := baseConfig()
		cfg.Roots = []claim.Root{{Path: filepath.Join(root, "code"), MaxDepth: 2}}
		cfg.Repos = on
		fsys := &countingFS{FS: transport.NewLocal()}
		rep := pull(t, fsys, cfg, openSpool(t), newRecorder())
		if rep.Outcome != claim.OutcomeOK || rep.Stored != 3 {
			t.Fatalf("repos %v: %+v", on, rep)
		}
		got := map[string]claim.InboxReport{}
		for _, in := range rep.Inboxes {
			rel, _ := filepath.Rel(root, in.Path)
			got[rel] = in
		}
		if !on {
			for rel, in := range got {
				if in.Repo != nil {
					t.Errorf("repos off: %s has a repo %+v", rel, in.Repo)
				}
			}
			if rep.Home != "" || fsys.calls[claim.WalkLstat+" "+filepath.Join(root, "code/app/.git")] > 1 {
				t.Errorf("repos off: home %q, calls %v", rep.Home, fsys.calls)
			}
			continue
		}
		home, _ := os.UserHomeDir()
		if rep.Home != home {
			t.Errorf("home %q; want %q", rep.Home, home)
		}
		app := got["code/app/.claude/memory-handoffs"].Repo
		if app == nil || app.Path != filepath.Join(root, "code/app") || app.Origin != "github.com/acme/app" || app.Problem != "" {
			t.Errorf("app: %+v", app)
		}
		if r := got["code/idle/.claude/memory-handoffs"].Repo; r != nil {
			t.Errorf("idle inbox read: %+v", r)
		}
		huge := got["code/huge/.codex/memory-handoffs"].Repo
		if huge == nil || huge.Origin != "" || huge.Problem == "" {
			t.Errorf("a 1 GiB config: %+v; want a problem and no origin", huge)
		}
		plain := got["code/plain/.claude/memory-handoffs"].Repo
		if plain == nil || plain.Origin != "" || plain.Problem != "" {
			t.Errorf("plain: %+v", plain)
		}
	}
}
