package claim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// heldConfigs holds every read of a .git/config until want of them are
// waiting at once, and records the most that ever waited together. A
// pull that reads fewer at once would wait forever: after 5 s the reads
// go on, so that the test fails instead of hanging.
type heldConfigs struct {
	transport.FS
	want    int
	mu      sync.Mutex
	waiting int
	most    int
	release chan struct{}
	once    sync.Once
}

func (h *heldConfigs) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	if strings.HasSuffix(name, "/.git/config") {
		h.mu.Lock()
		h.waiting++
		h.most = max(h.most, h.waiting)
		if h.waiting == h.want {
			h.once.Do(func() { close(h.release) })
		}
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-time.After(5 * time.Second):
			h.once.Do(func() { close(h.release) })
		}
		h.mu.Lock()
		h.waiting--
		h.mu.Unlock()
	}
	return h.FS.ReadFile(ctx, name, limit)
}

// TestPullReadsRepoIdentitiesAtOnce: the identities of 100 repositories
// with handoffs are read together, not 32 at a time: each is a chain of
// round trips, and the pull waits for the last (at 100 ms a round trip,
// 32 at once left a tail of half a second after the claims).
func TestPullReadsRepoIdentitiesAtOnce(t *testing.T) {
	t.Parallel()
	const repos = 100
	root := tempRoot(t)
	for i := range repos {
		r := fmt.Sprintf("code/r%03d", i)
		build(t, root, r+"/.claude/memory-handoffs/a.md", r+"/.git/HEAD")
		writeFile(t, filepath.Join(root, r, ".git/config"), []byte("[remote \"origin\"]\n\turl = https://h/"+r+"\n"), old)
	}
	cfg := baseConfig()
	cfg.Roots = []claim.Root{{Path: filepath.Join(root, "code"), MaxDepth: 1}}
	cfg.Repos = true
	fsys := &heldConfigs{FS: transport.NewLocal(), want: repos, release: make(chan struct{})}
	rep := pull(t, fsys, cfg, openSpool(t), newRecorder())
	if rep.Outcome != claim.OutcomeOK || rep.Stored != repos {
		t.Fatalf("%+v", rep)
	}
	if fsys.most != repos {
		t.Errorf("at most %d of %d repositories' configs were read at once", fsys.most, repos)
	}
}
