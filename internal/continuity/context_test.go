package continuity

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/repoid"
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

// TestContextNotReached: a repository the canonical host's sync does not
// reach (deeper than max_depth below every discover root, inside a
// dot-directory, or under none; its inbox in a harness directory the
// host leaves out; an opt-out marker) is said to be unreached, with the
// manifest change that reaches it, never promised to the next agent;
// a reached one, or a mirror that does not say its reach, keeps the
// usual answer; and Build puts each host's reach in its index.
// Invariant: context never promises that a handoff reaches the next
// agent when the mirror says no sync reads its inbox.
func TestContextNotReached(t *testing.T) {
	ctx := context.Background()
	fsys := transport.NewLocal()
	dir := t.TempDir()
	code := filepath.Join(dir, "code")
	deep, near, declared := filepath.Join(code, "a/b/deep"), filepath.Join(code, "near"), filepath.Join(dir, "elsewhere/decl")
	hidden, outside, listed := filepath.Join(code, ".cache/x"), filepath.Join(dir, "outside"), filepath.Join(code, "a/b/listed")
	for _, r := range []string{deep, near, declared, hidden, outside, listed} {
		writeFile(t, filepath.Join(r, ".git/config"), "[remote \"origin\"]\n\turl = https://github.com/acme/"+filepath.Base(r)+"\n")
	}
	reach := &mirror.Reach{Inboxes: []string{filepath.Join(declared, ".claude/memory-handoffs")},
		Discover: []mirror.ReachRoot{{Root: code, MaxDepth: 1}}, Harnesses: []string{".claude"}}
	m := filepath.Join(dir, "mirror")
	writeMirror(t, m, mirror.Index{Format: 1, Reach: reach, Repos: []mirror.IndexRepo{
		{Slug: "listed", Origins: []string{"github.com/acme/listed"}},
	}}, map[string]string{"listed": "# Recent handoffs: listed\n"})

	promise := "the next agent here gets it"
	for _, tc := range []struct {
		name, dir string
		why, fix  string // "" when reached
	}{
		{"too deep", deep, "3 directory levels below the discover root " + code + ", whose max_depth is 1", "raise that root's max_depth to 3"},
		{"dot-directory", hidden, "starts with a dot", "add a discover root"},
		{"under no root", outside, "under no discover root", "add a discover root at or above " + outside},
		{"reached", near, "", ""},
		{"declared inbox", declared, "", ""},
	} {
		_, err := Context(ctx, fsys, tc.dir, m)
		var ce *ContextError
		if !errors.As(err, &ce) || !errors.Is(err, ErrNotInMirror) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.why == "" {
			if !strings.Contains(ce.Hint, promise) || strings.Contains(ce.Msg, "no sync reaches") {
				t.Errorf("%s: a reached repository: %s / %s", tc.name, ce.Msg, ce.Hint)
			}
			continue
		}
		if !strings.Contains(ce.Msg, tc.why) || !strings.Contains(ce.Hint, tc.fix) || strings.Contains(ce.Hint, promise) {
			t.Errorf("%s: %s\nhint: %s\nwant %q and %q, and no promise", tc.name, ce.Msg, ce.Hint, tc.why, tc.fix)
		}
	}
	// What the repository holds decides too: an inbox only in a harness
	// directory the host's harnesses leave out, an opt-out marker in it
	// or between it and its root (a marker above the root does not
	// count), and a declared inbox that opts out.
	grok, marked, markedDecl := filepath.Join(code, "grok"), filepath.Join(code, "marked"), filepath.Join(dir, "elsewhere/decl2")
	writeFile(t, filepath.Join(grok, ".git/config"), "")
	writeFile(t, filepath.Join(grok, ".grok/memory-handoffs/.keep"), "")
	writeFile(t, filepath.Join(marked, ".git/config"), "")
	writeFile(t, filepath.Join(marked, ".claude/memory-handoffs/.no-memory-handoffs"), "")
	writeFile(t, filepath.Join(markedDecl, ".git/config"), "")
	writeFile(t, filepath.Join(markedDecl, ".no-memory-handoffs"), "")
	writeFile(t, filepath.Join(dir, ".no-memory-handoffs"), "") // above every root
	reach.Inboxes = append(reach.Inboxes, filepath.Join(markedDecl, ".claude/memory-handoffs"))
	writeMirror(t, m, mirror.Index{Format: 1, Reach: reach, Repos: []mirror.IndexRepo{
		{Slug: "listed", Origins: []string{"github.com/acme/listed"}},
	}}, map[string]string{"listed": "# Recent handoffs: listed\n"})
	for _, tc := range []struct{ name, dir, why, fix string }{
		{"harness left out", grok, "its inbox is in .grok, and this host's harnesses (.claude) leave that directory out", "add .grok to this host's harnesses"},
		{"opted out", marked, filepath.Join(marked, ".claude/memory-handoffs") + " holds .no-memory-handoffs", "remove " + filepath.Join(marked, ".claude/memory-handoffs/.no-memory-handoffs")},
		{"declared, opted out", markedDecl, markedDecl + " holds .no-memory-handoffs", "remove"},
	} {
		res, err := Context(ctx, fsys, tc.dir, m)
		var ce *ContextError
		if !errors.As(err, &ce) || !strings.Contains(ce.Msg, tc.why) || !strings.Contains(ce.Hint, tc.fix) || strings.Contains(ce.Hint, promise) {
			t.Errorf("%s: %v\nwant %q and %q", tc.name, err, tc.why, tc.fix)
		} else if res == nil || !strings.Contains(res.NotReached, tc.why) {
			t.Errorf("%s: the result does not say it is not reached: %+v", tc.name, res)
		}
	}
	if _, err := Context(ctx, fsys, near, m); err == nil || !strings.Contains(err.(*ContextError).Hint, promise) {
		t.Errorf("a marker above every root hides a reached repository: %v", err)
	}

	// In the mirror from an earlier depth, but no longer reached.
	res, err := Context(ctx, fsys, listed, m)
	if err != nil || res.Slug != "listed" || !strings.Contains(res.NotReached, "max_depth is 1") {
		t.Errorf("listed but unreached: %+v, %v", res, err)
	}
	// A mirror that does not say its reach: the usual answer.
	writeMirror(t, m, mirror.Index{Format: 1, Repos: []mirror.IndexRepo{}}, nil)
	if _, err := Context(ctx, fsys, deep, m); err == nil || !strings.Contains(err.(*ContextError).Hint, promise) {
		t.Errorf("no reach: %v", err)
	}

	// Build says each host's reach, its "~" roots with the home a pull
	// found.
	w := newWorld(t)
	inbox := "/home/me/code/app/.claude/memory-handoffs"
	w.store(t, "laptop", inbox, "a.md", handoffText("Pick the queue"), "routed", "", "TOOLS.md")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{inbox: {Path: "/home/me/code/app", Origin: "github.com/acme/app"}}),
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now()}, w.m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]mirror.Reach{
		"laptop": {Home: "/home/me", Inboxes: []string{}, Discover: []mirror.ReachRoot{{Root: "/home/me/code", MaxDepth: 3}}},
		"vps":    {Inboxes: []string{}, Discover: []mirror.ReachRoot{{Root: "/srv", MaxDepth: 3}, {Root: "/srv/clients", MaxDepth: 3}}},
	} {
		var idx mirror.Index
		if err := json.Unmarshal([]byte(fileOf(t, files[host], "repos/INDEX.json")), &idx); err != nil {
			t.Fatal(err)
		}
		if idx.Reach == nil || idx.Reach.Home != want.Home || !slices.Equal(idx.Reach.Discover, want.Discover) || len(idx.Reach.Harnesses) == 0 {
			t.Errorf("%s: reach %+v; want %+v", host, idx.Reach, want)
		}
	}
}
