package continuity

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeMirror(t *testing.T, dir string, idx mirror.Index, recent map[string]string) {
	t.Helper()
	info, _ := json.Marshal(mirror.Info{Format: 1, Host: "laptop", Generation: 3, Complete: true})
	writeFile(t, filepath.Join(dir, mirror.InfoFile), string(info))
	data, _ := json.Marshal(idx)
	writeFile(t, filepath.Join(dir, "repos/INDEX.json"), string(data))
	for slug, text := range recent {
		writeFile(t, filepath.Join(dir, "repos", slug, "RECENT.md"), text)
	}
}

// TestContext: a clone is found from below its top and looked up by its
// origin, a clone without one by this host's name and its path; each way
// there is nothing to print is its own error with a hint; hostile mirror
// contents (a symlinked RECENT.md, a slug that is a path, a huge index)
// give an error, never a read through them.
func TestContext(t *testing.T) {
	ctx := context.Background()
	fsys := transport.NewLocal()
	dir := t.TempDir()
	app, notes, other := filepath.Join(dir, "app"), filepath.Join(dir, "notes"), filepath.Join(dir, "other")
	writeFile(t, filepath.Join(app, ".git/config"), "[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n")
	writeFile(t, filepath.Join(notes, ".claude/memory-handoffs/.keep"), "")
	writeFile(t, filepath.Join(other, ".git/config"), "[remote \"origin\"]\n\turl = https://github.com/acme/other\n")
	m := filepath.Join(dir, "mirror")
	writeMirror(t, m, mirror.Index{Format: 1, Repos: []mirror.IndexRepo{
		{Slug: "app", Origins: []string{"github.com/acme/app"}, Newest: time.Now()},
		{Slug: "notes", Paths: []manifest.RepoPath{{Host: "laptop", Path: notes}}},
	}}, map[string]string{"app": "# Recent handoffs: app\n", "notes": "# Recent handoffs: notes\n"})

	sub := filepath.Join(app, "src/deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Context(ctx, fsys, sub, m)
	if err != nil || res.Slug != "app" || res.Text != "# Recent handoffs: app\n" || !res.Complete || res.Generation != 3 || res.Repo.Path != app {
		t.Fatalf("app: %+v, %v", res, err)
	}
	if res, err := Context(ctx, fsys, notes, m); err != nil || res.Slug != "notes" {
		t.Fatalf("notes by path: %+v, %v", res, err)
	}
	for _, tc := range []struct {
		name, dir, mirror string
		want              error
	}{
		{"not in the mirror", other, m, ErrNotInMirror},
		{"not a repository", "/", m, ErrNotRepository},
		{"no mirror", app, filepath.Join(dir, "nowhere"), ErrNoMirror},
	} {
		_, err := Context(ctx, fsys, tc.dir, tc.mirror)
		var ce *ContextError
		if !errors.Is(err, tc.want) || !errors.As(err, &ce) || ce.Hint == "" {
			t.Errorf("%s: %v; want %v with a hint", tc.name, err, tc.want)
		}
	}
	if err := os.Remove(filepath.Join(m, "repos/INDEX.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Context(ctx, fsys, app, m); !errors.Is(err, ErrNoRepos) {
		t.Errorf("no repos/: %v", err)
	}

	// Hostile mirrors.
	h := filepath.Join(dir, "hostile")
	writeFile(t, filepath.Join(dir, "secret.txt"), "SECRET")
	writeMirror(t, h, mirror.Index{Format: 1, Repos: []mirror.IndexRepo{{Slug: "app", Origins: []string{"github.com/acme/app"}}}}, nil)
	if err := os.MkdirAll(filepath.Join(h, "repos/app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(h, "repos/app/RECENT.md")); err != nil {
		t.Fatal(err)
	}
	if res, err := Context(ctx, fsys, app, h); err == nil || res != nil && strings.Contains(res.Text, "SECRET") {
		t.Errorf("symlinked RECENT.md followed: %+v, %v", res, err)
	}
	writeMirror(t, h, mirror.Index{Format: 1, Repos: []mirror.IndexRepo{{Slug: "../../secret.txt", Origins: []string{"github.com/acme/app"}}}}, nil)
	if res, err := Context(ctx, fsys, app, h); !errors.Is(err, ErrNoRepos) || res != nil && res.Text != "" {
		t.Errorf("a slug that is a path: %+v, %v", res, err)
	}
	writeFile(t, filepath.Join(h, "repos/INDEX.json"), "")
	if err := os.Truncate(filepath.Join(h, "repos/INDEX.json"), 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := Context(ctx, fsys, app, h); !errors.Is(err, ErrNoRepos) {
		t.Errorf("a 1 GiB index: %v", err)
	}
}
