package handoff

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
)

// testEnv is a workspace plus one local host with two repositories.
type testEnv struct {
	t      *testing.T
	dir    string
	ws     string
	inbox  string // repos/app/.claude/memory-handoffs
	inbox2 string // repos/lib/.codex/memory-handoffs
	m      *manifest.Manifest
	dial   Dialer
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{t: t, dir: dir, ws: filepath.Join(dir, "ws"),
		inbox:  filepath.Join(dir, "repos/app/.claude/memory-handoffs"),
		inbox2: filepath.Join(dir, "repos/lib/.codex/memory-handoffs")}
	for _, d := range []string{e.inbox, e.inbox2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yml := fmt.Sprintf(`version: 1
workspace: %s
hosts:
  - name: canonical
    transport: local
    discover: [{root: %s, max_depth: 2}]
`, e.ws, filepath.Join(dir, "repos"))
	m, err := manifest.Parse([]byte(yml), filepath.Join(dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	// Sync refuses a directory without an identity: make the workspace
	// as `handoff init` does.
	if _, _, err := Init(context.Background(), e.ws); err != nil {
		t.Fatal(err)
	}
	return e
}

// put writes a handoff old enough to be past the settle time.
func (e *testEnv) put(inbox, name, content string) string {
	e.t.Helper()
	p := filepath.Join(inbox, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *testEnv) writeWS(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) readWS(rel string) string {
	b, err := os.ReadFile(filepath.Join(e.ws, rel))
	if err != nil {
		return ""
	}
	return string(b)
}

func (e *testEnv) sync(dryRun bool) *receipts.Receipt {
	e.t.Helper()
	r, err := Sync(context.Background(), Options{Manifest: e.m, DryRun: dryRun, Dial: e.dial})
	if err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	return r
}

func handoff(pairs ...string) string { return testenv.Handoff(pairs...) }

const goodFM = "---\ntopic: x\ncategory: setup\ntags: [a]\n---\n# Card\nbody"

func base(typ, action string, rest ...string) string {
	return handoff(append([]string{"Type", typ, "Title", "t", "Summary", "s.", "Recommended memory action", action}, rest...)...)
}

func card(action, name, content string, extra ...string) string {
	return base("setup", action, append([]string{"Target card", name, "Suggested card content", content}, extra...)...)
}

func doc(target, content string) string {
	return base("workflow", "no-card", "Target document", target, "Suggested document content", content)
}

func sum(s string) string { return testenv.Sum(s) }

// TestReasonsAndRoutes has one case per routing path and per reason code of
// SPEC: each produces exactly its result and code.
func TestReasonsAndRoutes(t *testing.T) {
	existing := goodFM + "\nold\n"
	tests := []struct {
		name       string
		setup      func(e *testEnv) // prepares the workspace or inbox
		content    string           // handoff bytes ("" when setup writes the file)
		result     string
		reason     string
		target     string // expected target ("" = do not check)
		wantTarget string // expected content of target after the run
	}{
		{name: "create-card", content: card("create-card", "x.md", goodFM), result: "promoted", target: "memory/cards/x.md", wantTarget: goodFM + "\n"},
		{name: "update-card matching hash", setup: func(e *testEnv) { e.writeWS("memory/cards/x.md", existing) },
			content: card("update-card", "x.md", goodFM+"\nnew", "Expected card SHA256", sum(existing)), result: "promoted", target: "memory/cards/x.md", wantTarget: goodFM + "\nnew\n"},
		{name: "update-card stale hash", setup: func(e *testEnv) { e.writeWS("memory/cards/x.md", existing) },
			content: card("update-card", "x.md", goodFM, "Expected card SHA256", strings.Repeat("a", 64)), result: "review", reason: "hash-conflict"},
		{name: "update-card missing hash", setup: func(e *testEnv) { e.writeWS("memory/cards/x.md", existing) },
			content: card("update-card", "x.md", goodFM), result: "review", reason: "missing-expected-sha256"},
		{name: "update-card on absent card", content: card("update-card", "x.md", goodFM, "Expected card SHA256", strings.Repeat("b", 64)), result: "review", reason: "card-missing"},
		{name: "create on existing card", setup: func(e *testEnv) { e.writeWS("memory/cards/x.md", existing) },
			content: card("create-card", "x.md", goodFM), result: "review", reason: "card-exists"},
		{name: "create on a card holding exactly its content", setup: func(e *testEnv) { e.writeWS("memory/cards/x.md", goodFM+"\n") },
			content: card("create-card", "x.md", goodFM), result: "duplicate", reason: "card-identical", target: "memory/cards/x.md", wantTarget: goodFM + "\n"},
		{name: "append TOOLS.md", setup: func(e *testEnv) { e.writeWS("TOOLS.md", "# Tools\n\n\n") },
			content: doc("TOOLS.md", "\n- jq\n"), result: "routed", target: "TOOLS.md", wantTarget: "# Tools\n\n- jq\n"},
		{name: "append USER.md (absent)", content: doc("USER.md", "likes tea"), result: "routed", target: "USER.md", wantTarget: "likes tea\n"},
		{name: "append rules/go.md", content: doc("rules/go.md", "### Errors\nwrap them"), result: "routed", target: "rules/go.md", wantTarget: "### Errors\nwrap them\n"},
		{name: "append LEARNINGS", content: doc(".learnings/LEARNINGS.md", "l"), result: "routed", target: ".learnings/LEARNINGS.md", wantTarget: "l\n"},
		{name: "append ERRORS", content: doc(".learnings/ERRORS.md", "e"), result: "routed", target: ".learnings/ERRORS.md", wantTarget: "e\n"},
		{name: "append FEATURE_REQUESTS", content: doc(".learnings/FEATURE_REQUESTS.md", "f"), result: "routed", target: ".learnings/FEATURE_REQUESTS.md", wantTarget: "f\n"},
		{name: "both card and document", content: card("create-card", "x.md", goodFM, "Target document", "TOOLS.md", "Suggested document content", "x"), result: "review", reason: "both-card-and-document"},
		{name: "heading in document", content: doc("TOOLS.md", "intro\n## Setup\nmore"), result: "review", reason: "heading-in-document"},
		{name: "unsafe card ../x.md", content: card("create-card", "../x.md", goodFM), result: "review", reason: "unsafe-card-name"},
		{name: "unsafe card a/b.md", content: card("create-card", "a/b.md", goodFM), result: "review", reason: "unsafe-card-name"},
		{name: "unsafe card .x.md", content: card("create-card", ".x.md", goodFM), result: "review", reason: "unsafe-card-name"},
		{name: "unsafe card absolute", content: card("create-card", "/etc/x.md", goodFM), result: "review", reason: "unsafe-card-name"},
		{name: "missing front matter", content: card("create-card", "x.md", "# Card\nno front matter"), result: "review", reason: "missing-front-matter"},
		{name: "unparsable front matter", content: card("create-card", "x.md", "---\ntopic: [unclosed\n---\nbody"), result: "review", reason: "invalid-front-matter"},
		{name: "incomplete front matter", content: card("create-card", "x.md", "---\ntopic: x\ncategory: y\n---\nbody"), result: "review", reason: "invalid-front-matter"},
		{name: "missing section", content: handoff("Type", "setup", "Title", "t", "Recommended memory action", "no-card"), result: "review", reason: "missing-section"},
		{name: "unsafe target document", content: doc("../etc/passwd", "x"), result: "review", reason: "unsafe-target"},
		{name: "unknown action", content: base("setup", "delete-card"), result: "review", reason: "unknown-action"},
		{name: "invalid type", content: base("gossip", "no-card", "Target document", "TOOLS.md", "Suggested document content", "x"), result: "review", reason: "invalid-type"},
		{name: "secret-like content", content: doc("TOOLS.md", "key AKIA"+"IOSFODNN7EXAMPLE"), result: "review", reason: "secret-like-content"},
		{name: "hidden characters", content: doc("TOOLS.md", "safe\u202etxt.exe"), result: "review", reason: "hidden-characters"},
		{name: "no target", content: base("research", "no-card"), result: "review", reason: "no-target"},
		{name: "parse error", content: "just some notes\n", result: "malformed", reason: "parse-error"},
		{name: "target card is a symlink", setup: func(e *testEnv) {
			e.writeWS("memory/cards/.keep", "")
			os.Symlink(filepath.Join(e.dir, "outside.md"), filepath.Join(e.ws, "memory/cards/x.md"))
		}, content: card("create-card", "x.md", goodFM), result: "review", reason: "symlink"},
		{name: "target card is a directory", setup: func(e *testEnv) { os.MkdirAll(filepath.Join(e.ws, "memory/cards/x.md"), 0o755) },
			content: card("create-card", "x.md", goodFM), result: "review", reason: "not-regular"},
		{name: "handoff is a symlink", setup: func(e *testEnv) {
			os.WriteFile(filepath.Join(e.dir, "outside.md"), []byte(doc("TOOLS.md", "x")), 0o644)
			os.Symlink(filepath.Join(e.dir, "outside.md"), filepath.Join(e.inbox, "h.md"))
		}, result: "rejected", reason: "symlink"},
		{name: "handoff is a FIFO", setup: func(e *testEnv) {
			syscall.Mkfifo(filepath.Join(e.inbox, "h.md"), 0o644)
			old := time.Now().Add(-time.Hour)
			os.Chtimes(filepath.Join(e.inbox, "h.md"), old, old)
		}, result: "rejected", reason: "not-regular"},
		{name: "handoff oversize", content: doc("TOOLS.md", strings.Repeat("x", 1<<20)), result: "rejected", reason: "oversize"},
		{name: "handoff too young", setup: func(e *testEnv) {
			os.WriteFile(filepath.Join(e.inbox, "h.md"), []byte(doc("TOOLS.md", "x")), 0o644)
		}, result: "deferred", reason: "too-young"},
		{name: "handoff changing", setup: func(e *testEnv) {
			e.put(e.inbox, "h.md", doc("TOOLS.md", "x"))
			e.dial = func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
				return growingFS{}, nil
			}
		}, result: "deferred", reason: "changing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			if tc.content != "" {
				e.put(e.inbox, "h.md", tc.content)
			}
			r := e.sync(false)
			if len(r.Handoffs) != 1 {
				t.Fatalf("receipt has %d handoffs, want 1: %+v", len(r.Handoffs), r.Handoffs)
			}
			h := r.Handoffs[0]
			if h.Result != tc.result || h.Reason != tc.reason {
				t.Fatalf("result %s/%s, want %s/%s", h.Result, h.Reason, tc.result, tc.reason)
			}
			if tc.target != "" && h.Target != tc.target {
				t.Errorf("target %q, want %q", h.Target, tc.target)
			}
			if tc.wantTarget != "" {
				if got := e.readWS(tc.target); got != tc.wantTarget {
					t.Errorf("%s = %q, want %q", tc.target, got, tc.wantTarget)
				}
				if h.AfterSHA256 != sum(tc.wantTarget) {
					t.Errorf("after_sha256 %s does not hash the target", h.AfterSHA256)
				}
			}
			if h.Result == "review" {
				draft := e.readWS(h.Target)
				if !strings.HasPrefix(h.Target, ".handoff/review/h.") || draft != tc.content {
					t.Errorf("review draft %s holds %d bytes, want the handoff's %d", h.Target, len(draft), len(tc.content))
				}
			}
			if _, err := os.Lstat(filepath.Join(e.dir, "outside.md")); err == nil && tc.reason == "symlink" && h.Result == "review" {
				t.Errorf("a file appeared outside the workspace through a symlinked target")
			}
			if r.Outcome != "ok" || r.Status != statusFor(tc.result) {
				t.Errorf("outcome %s status %s", r.Outcome, r.Status)
			}
		})
	}
}

func statusFor(result string) string {
	if result == "deferred" {
		return "empty"
	}
	return "ingested"
}

// growingFS reports a file one size at listing time and another after the
// read, as a writer still appending would.
type growingFS struct{ transport.Local }

func (g growingFS) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	data, fi, err := g.Local.ReadFile(ctx, name, limit)
	fi.Size++
	return data, fi, err
}

// TestTierHeadingStaysInCard: a "## Tier 1" line inside Suggested card
// content is not a section boundary; it lands inside the card.
func TestTierHeadingStaysInCard(t *testing.T) {
	e := newEnv(t)
	content := goodFM + "\n## Tier 1\n- keep me\n"
	e.put(e.inbox, "h.md", card("create-card", "tier.md", content, "Reviewer notes", "none"))
	r := e.sync(false)
	if r.Counts.Promoted != 1 {
		t.Fatalf("counts %+v", r.Counts)
	}
	got := e.readWS("memory/cards/tier.md")
	if !strings.Contains(got, "## Tier 1\n- keep me") || strings.Contains(got, "Reviewer notes") {
		t.Fatalf("card = %q", got)
	}
}

// TestDuplicateAcrossInboxes: the same bytes from two inboxes apply once;
// the second copy is "duplicate". Invariant: none applied twice.
func TestDuplicateAcrossInboxes(t *testing.T) {
	e := newEnv(t)
	h := doc("TOOLS.md", "- once")
	e.put(e.inbox, "a.md", h)
	e.put(e.inbox2, "b.md", h)
	r := e.sync(false)
	results := map[string]string{}
	for _, x := range r.Handoffs {
		results[x.Name] = x.Result
	}
	if len(results) != 2 || !(results["a.md"] == "routed" && results["b.md"] == "duplicate" || results["a.md"] == "duplicate" && results["b.md"] == "routed") {
		t.Fatalf("results %v, want one routed and one duplicate", results)
	}
	if got := e.readWS("TOOLS.md"); got != "- once\n" {
		t.Fatalf("TOOLS.md = %q, want the text once", got)
	}
	if r.Counts.Pulled != 2 || r.Counts.Duplicate != 1 {
		t.Fatalf("counts %+v", r.Counts)
	}
	// Both copies are archived, and a later copy is a duplicate too.
	e.put(e.inbox, "c.md", h)
	r = e.sync(false)
	if len(r.Handoffs) != 1 || r.Handoffs[0].Result != "duplicate" || e.readWS("TOOLS.md") != "- once\n" {
		t.Fatalf("third copy: %+v, TOOLS.md %q", r.Handoffs, e.readWS("TOOLS.md"))
	}
}

// TestSymlinkedWorkspaceDirs: a target through a symlinked memory/cards or
// rules is refused and a sentinel outside stays untouched. Invariant:
// nothing is written outside the workspace.
func TestSymlinkedWorkspaceDirs(t *testing.T) {
	for _, tc := range []struct{ dir, content, sentinel string }{
		{"memory/cards", card("create-card", "x.md", goodFM), "x.md"},
		{"rules", doc("rules/x.md", "text"), "x.md"},
		{".learnings", doc(".learnings/LEARNINGS.md", "text"), "LEARNINGS.md"},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			e := newEnv(t)
			outside := filepath.Join(e.dir, "outside")
			os.MkdirAll(outside, 0o755)
			sentinel := filepath.Join(outside, tc.sentinel)
			os.WriteFile(sentinel, []byte("sentinel"), 0o644)
			os.MkdirAll(filepath.Dir(filepath.Join(e.ws, tc.dir)), 0o755)
			if err := os.Symlink(outside, filepath.Join(e.ws, tc.dir)); err != nil {
				t.Fatal(err)
			}
			e.put(e.inbox, "h.md", tc.content)
			r := e.sync(false)
			if len(r.Handoffs) != 1 || r.Handoffs[0].Result != "review" || r.Handoffs[0].Reason != "symlink" {
				t.Fatalf("handoffs %+v, want review/symlink", r.Handoffs)
			}
			if b, _ := os.ReadFile(sentinel); string(b) != "sentinel" {
				t.Fatalf("sentinel outside the workspace changed to %q", b)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("%d files outside the workspace, want only the sentinel", len(ents))
			}
		})
	}
}

// TestDryRunWritesNothing: --dry-run leaves inboxes, workspace and .handoff
// byte-for-byte unchanged, both on a new workspace and after real runs.
func TestDryRunWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.put(e.inbox, "a.md", card("create-card", "x.md", goodFM))
	e.put(e.inbox, "b.md", "not a handoff")
	e.put(e.inbox2, "c.md", doc("TOOLS.md", "t"))
	os.Symlink("/etc/passwd", filepath.Join(e.inbox, "l.md"))

	before := treeHash(t, e.dir)
	r := e.sync(true)
	if after := treeHash(t, e.dir); after != before {
		t.Fatalf("dry run on a new workspace changed the tree")
	}
	if r.Mode != "dry-run" || r.Counts.Promoted != 1 || r.Counts.Routed != 1 || r.Counts.Malformed != 1 || r.Counts.Rejected != 1 {
		t.Fatalf("dry run predicted %+v", r.Counts)
	}
	if !strings.HasPrefix(r.Summary(), "[dry-run] Pulled 3") {
		t.Fatalf("summary %q", r.Summary())
	}

	e.sync(false)
	e.put(e.inbox, "d.md", doc("TOOLS.md", "more"))
	before = treeHash(t, e.dir)
	r = e.sync(true)
	if after := treeHash(t, e.dir); after != before {
		t.Fatalf("dry run after real runs changed the tree")
	}
	if r.Counts.Routed != 1 {
		t.Fatalf("dry run predicted %+v", r.Counts)
	}
}

func treeHash(t *testing.T, dir string) string { return testenv.TreeHash(t, dir) }

// Errors that vanish are errors that repeat: a handoff whose archive
// fails carries the reason in its receipt entry. Here a file sits where
// malformed/ would be, so neither the rejected symlink nor the malformed
// handoff can be moved; both stay in the inbox (nothing lost) and both
// entries say why.
func TestReceiptCarriesArchiveErrors(t *testing.T) {
	e := newEnv(t)
	e.put(e.inbox, "malformed", "not a directory")
	bad := e.put(e.inbox, "bad.md", "not a handoff")
	if err := os.Symlink(filepath.Join(e.dir, "elsewhere.md"), filepath.Join(e.inbox, "y.md")); err != nil {
		t.Fatal(err)
	}
	r := e.sync(false)
	got := map[string]receipts.Handoff{}
	for _, h := range r.Handoffs {
		got[h.Name] = h
	}
	y, b := got["y.md"], got["bad.md"]
	if y.Result != "rejected" || y.ArchivedAs != "" || !strings.Contains(y.Error, "not a directory") {
		t.Errorf("rejected symlink entry %+v: want archived_as empty and an error naming the cause", y)
	}
	if b.Result != "malformed" || !strings.Contains(b.Error, "not a directory") {
		t.Errorf("malformed entry %+v: want the archive error", b)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Errorf("bad.md left its inbox though its archive failed: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(e.inbox, "y.md")); err != nil {
		t.Errorf("y.md left its inbox though its archive failed: %v", err)
	}
}

// TestSyncRefusesNoWorkspace: a workspace path without an identity (a
// typo, a scratch path) is refused, applied or dry run, with a
// *NoWorkspaceError naming the real workspace nearby, and nothing is
// written anywhere: no directory, no spool, no renames on the host. A
// workspace that has one is named in the receipt by its id.
func TestSyncRefusesNoWorkspace(t *testing.T) {
	e := newEnv(t)
	e.put(e.inbox, "a.md", doc("TOOLS.md", "t"))
	id, err := workspace.Read(e.ws)
	if err != nil {
		t.Fatal(err)
	}
	typo := e.ws + "s"
	before := treeHash(t, e.dir)
	for _, dry := range []bool{false, true} {
		_, err := Sync(context.Background(), Options{Manifest: e.m, Workspace: typo, DryRun: dry})
		var nw *NoWorkspaceError
		if !errors.As(err, &nw) || nw.Path != typo || len(nw.Near) != 1 || nw.Near[0] != e.ws {
			t.Fatalf("Sync(dry %v) into %s = %v; want a NoWorkspaceError naming %s", dry, typo, err, e.ws)
		}
	}
	if treeHash(t, e.dir) != before {
		t.Fatal("a refused sync changed something")
	}
	if r := e.sync(false); r.WorkspaceID != id.ID || r.Counts.Routed != 1 {
		t.Fatalf("receipt workspace_id %q, counts %+v; want %s and the handoff routed", r.WorkspaceID, r.Counts, id.ID)
	}
}

// TestSyncRetainsReceipts: sync applies the receipts retention by itself.
// An idle run's receipt goes once it is older than keep_idle (7d by
// default), the newest stays, and the idle per-run receipt counts its
// quiet inboxes where latest.json lists them. Invariant: the timer alone
// bounds the receipts directory and never removes the newest receipt.
func TestSyncRetainsReceipts(t *testing.T) {
	e := newEnv(t)
	first := e.sync(false)
	own, err := receipts.Read(filepath.Join(e.ws, layout.ReceiptsDir, first.RunID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if h := own.Hosts[0]; len(h.Inboxes) != 0 || h.QuietInboxes != 2 {
		t.Errorf("idle receipt lists %d inboxes, counts %d quiet; want 0 and 2", len(h.Inboxes), h.QuietInboxes)
	}
	if latest, err := receipts.Read(filepath.Join(e.ws, layout.ReceiptsDir, "latest.json")); err != nil || len(latest.Hosts[0].Inboxes) != 2 {
		t.Fatalf("latest.json must list both inboxes: %+v, %v", latest, err)
	}
	later := time.Now().Add(8 * 24 * time.Hour)
	second, err := Sync(context.Background(), Options{Manifest: e.m, Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, layout.ReceiptsDir, first.RunID+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the 8-day-old idle receipt is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.ws, layout.ReceiptsDir, second.RunID+".json")); err != nil {
		t.Errorf("the newest receipt is gone: %v", err)
	}
}

// TestSyncRetainsBackups: sync applies the backups retention by itself,
// once a day: a finished plan's backup older than backups.keep (90d by
// default) goes at the first run a day after the last pass, the newest
// backup of the target and another writer's late edit stay, and a
// backups directory that is a symlink is left alone without failing the
// run. Invariants: the timer alone bounds the backups; a person's undo of
// each target's last change stays; retention never fails a run or
// removes anything below a symlink.
func TestSyncRetainsBackups(t *testing.T) {
	e := newEnv(t)
	e.writeWS("TOOLS.md", "# Tools\n")
	e.put(e.inbox, "a.md", doc("TOOLS.md", "one"))
	e.sync(false)
	e.put(e.inbox, "b.md", doc("TOOLS.md", "two"))
	e.sync(false)
	dir := filepath.Join(e.ws, layout.BackupsDir)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 2 {
		t.Fatalf("backups: %v, %v; want two, one per sync", ents, err)
	}
	now := time.Now()
	age := func(name string, ago time.Duration) {
		if err := os.Chtimes(filepath.Join(dir, name), now.Add(-ago), now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	older, newer := ents[0].Name(), ents[1].Name()
	if strings.Contains(e.readWS(layout.BackupsDir+"/"+older), "two") {
		older, newer = newer, older
	}
	age(older, 101*24*time.Hour)
	age(newer, 100*24*time.Hour)
	late := "late.0123456789ab.0123456789abcdef"
	e.writeWS(layout.BackupsDir+"/"+late, "another writer's text\n")
	age(late, 400*24*time.Hour)

	at := func(d time.Duration) *receipts.Receipt {
		r, err := Sync(context.Background(), Options{Manifest: e.m, Now: func() time.Time { return now.Add(d) }})
		if err != nil || r.Outcome != receipts.OutcomeOK {
			t.Fatalf("sync %v later: %v, %v", d, r, err)
		}
		return r
	}
	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(dir, name))
		return err == nil
	}
	at(time.Hour) // the stamp is an hour old: no pass
	if !exists(older) {
		t.Fatal("a pass ran within a day of the last")
	}
	at(25 * time.Hour)
	if exists(older) || !exists(newer) || !exists(late) {
		t.Fatalf("a day later: older %v, newer %v, late %v; want only the older gone", exists(older), exists(newer), exists(late))
	}

	// A symlinked backups directory: the run is ok, the other side intact.
	outside := filepath.Join(e.dir, "outside")
	if err := os.Rename(dir, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	// Two backups of one target: followed, the symlink would lose the older.
	for i, name := range []string{"0123456789ab.0.0123456789abcdef.x", "0123456789ac.0.0123456789abcdef.x"} {
		ago := time.Duration(300-i) * 24 * time.Hour
		if err := os.WriteFile(filepath.Join(outside, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(outside, name), now.Add(-ago), now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	at(50 * time.Hour)
	if ents, err := os.ReadDir(outside); err != nil || len(ents) != 4 {
		t.Errorf("behind the symlink: %v, %v; want the four files untouched", ents, err)
	}
}

// TestDownHostHoldsUpNoOther: with the default fan-out, a host whose
// connection hangs does not hold up the others: both other hosts finish
// their pulls while it still hangs, and the run reports it failed and
// them ok. Invariant: one host that is down never delays the rest of the
// fleet's handoffs.
func TestDownHostHoldsUpNoOther(t *testing.T) {
	e := newEnv(t)
	e.put(e.inbox, "a.md", doc("TOOLS.md", "from a"))
	e.put(e.inbox2, "b.md", doc("TOOLS.md", "from b"))
	yml := fmt.Sprintf(`version: 1
workspace: %s
hosts:
  - {name: down, transport: local, inboxes: [%s]}
  - {name: a, transport: local, inboxes: [%s]}
  - {name: b, transport: local, inboxes: [%s]}
`, e.ws, e.inbox, e.inbox, e.inbox2)
	m, err := manifest.Parse([]byte(yml), filepath.Join(e.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	dial := func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		if h.Name == "down" {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, errors.New("host is down")
		}
		return transport.NewLocal(), nil
	}
	var mu sync.Mutex
	done := map[string]bool{}
	progress := func(p HostProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.State == "done" && !done[p.Host] {
			done[p.Host] = true
			if done["a"] && done["b"] {
				close(release)
			}
		}
	}
	got := make(chan *receipts.Receipt, 1)
	go func() {
		r, err := Sync(context.Background(), Options{Manifest: m, Dial: dial, Progress: progress})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	var r *receipts.Receipt
	select {
	case r = <-got:
	case <-time.After(2 * time.Minute): // a failure detector, not a margin: the run needs a and b to finish first
		t.Fatal("the run waited on the down host: hosts a and b never finished while it hung")
	}
	if r == nil {
		t.FailNow()
	}
	want := []string{"down error", "a ok", "b ok"}
	for i, h := range r.Hosts {
		if s := h.Name + " " + h.Outcome; s != want[i] {
			t.Errorf("host %d: %s, want %s", i, s, want[i])
		}
	}
	if r.Counts.Routed != 2 {
		t.Errorf("routed %d, want both handoffs of the hosts that are up", r.Counts.Routed)
	}
}
