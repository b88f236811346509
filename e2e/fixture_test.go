package e2e

import (
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	_ "modernc.org/sqlite"
)

// world is a canonical host with two repositories and a workspace (made
// by `handoff init`), all under one temporary directory, and a manifest
// pointing at them.
type world struct {
	t        *testing.T
	dir      string
	ws       string
	manifest string
	inboxes  []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{t: t, dir: dir, ws: filepath.Join(dir, "ws"), manifest: filepath.Join(dir, "writers.yaml"),
		inboxes: []string{filepath.Join(dir, "repos/app/.claude/memory-handoffs"), filepath.Join(dir, "repos/lib/.codex/memory-handoffs")}}
	for _, in := range w.inboxes {
		mustMkdir(t, in)
	}
	yml := fmt.Sprintf("version: 1\nworkspace: %s\ndefaults: {settle: 0s}\nhosts:\n  - name: canonical\n    transport: local\n    discover: [{root: %s, max_depth: 2}]\n",
		w.ws, filepath.Join(dir, "repos"))
	mustWrite(t, w.manifest, yml)
	initWorkspace(t, w.ws)
	return w
}

// initWorkspace makes ws a workspace with the built binary's `handoff
// init`: every command that writes refuses a directory without one.
func initWorkspace(t *testing.T, ws string) {
	t.Helper()
	out, err := exec.Command(binary(), "init", "--workspace", ws, "--new-memory").CombinedOutput()
	if err != nil {
		t.Fatalf("handoff init --workspace %s: %v\n%s", ws, err, out)
	}
}

func mustMkdir(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(s string) string { return testenv.Sum(s) }

func handoff(pairs ...string) string { return testenv.Handoff(pairs...) }

func cardHandoff(action, name, body string, extra ...string) string {
	return handoff(append([]string{"Type", "setup", "Title", "t " + name, "Summary", "s", "Recommended memory action", action,
		"Target card", name, "Suggested card content", "---\ntopic: " + name + "\ncategory: c\ntags: [x]\n---\n" + body}, extra...)...)
}

func docHandoff(target, text string) string {
	return handoff("Type", "workflow", "Title", "t", "Summary", "s", "Recommended memory action", "no-card",
		"Target document", target, "Suggested document content", text)
}

// mixedResults is the result every source of mixed() must end with.
var mixedResults = map[string]string{
	"c1.md": "promoted", "c2.md": "promoted", "u1.md": "promoted",
	"d1.md": "routed", "d2.md": "routed", "d3.md": "routed", "d4.md": "routed",
	"dup.md": "duplicate", "r1.md": "review", "m1.md": "malformed",
}

// mixed fills the inboxes with one handoff of every kind. It returns the
// document markers that must each appear exactly once after ingest.
func (w *world) mixed() map[string][]string {
	existing := "---\ntopic: e\ncategory: c\ntags: [x]\n---\nold\n"
	mustWrite(w.t, filepath.Join(w.ws, "memory/cards/existing.md"), existing)
	mustWrite(w.t, filepath.Join(w.ws, "TOOLS.md"), "# Tools\n")
	a, b := w.inboxes[0], w.inboxes[1]
	mustWrite(w.t, filepath.Join(a, "c1.md"), cardHandoff("create-card", "alpha.md", "A"))
	mustWrite(w.t, filepath.Join(a, "c2.md"), cardHandoff("create-card", "beta.md", "B"))
	mustWrite(w.t, filepath.Join(a, "u1.md"), cardHandoff("update-card", "existing.md", "new", "Expected card SHA256", sum(existing)))
	mustWrite(w.t, filepath.Join(a, "d1.md"), docHandoff("TOOLS.md", "- marker-D1"))
	mustWrite(w.t, filepath.Join(a, "d2.md"), docHandoff("TOOLS.md", "- marker-D2"))
	mustWrite(w.t, filepath.Join(a, "d3.md"), docHandoff("rules/go.md", "- marker-D3"))
	mustWrite(w.t, filepath.Join(a, "r1.md"), docHandoff("../outside.md", "- review me"))
	mustWrite(w.t, filepath.Join(a, "m1.md"), "not a handoff\n")
	mustWrite(w.t, filepath.Join(b, "dup.md"), docHandoff("TOOLS.md", "- marker-D1"))
	mustWrite(w.t, filepath.Join(b, "d4.md"), docHandoff(".learnings/LEARNINGS.md", "- marker-D4"))
	return map[string][]string{
		"TOOLS.md":                {"marker-D1", "marker-D2"},
		"rules/go.md":             {"marker-D3"},
		".learnings/LEARNINGS.md": {"marker-D4"},
	}
}

// run executes handoff with extra environment and returns its exit code
// (-9 when killed by SIGKILL) and combined output.
func (w *world) run(env []string, args ...string) (int, string) {
	w.t.Helper()
	cmd := exec.Command(binary(), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0, string(out)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok {
		w.t.Fatalf("run handoff: %v", err)
	}
	if ee.ProcessState.ExitCode() == -1 {
		return -9, string(out)
	}
	return ee.ExitCode(), string(out)
}

func (w *world) sync(env ...string) (int, string) {
	return w.run(env, "sync", "--manifest", w.manifest)
}

// checkConverged asserts the invariants every finished workspace must hold,
// whatever crashed before: every source has exactly one terminal result, no
// source is left in an inbox, every document marker appears exactly once,
// every card was promoted once, no temporary file remains, and the ledger
// passes integrity_check.
func (w *world) checkConverged(markers map[string][]string, results map[string]string) {
	t := w.t
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
	got := map[string]string{}
	rows, err := db.Query(`SELECT name, result FROM sources`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, result string
		rows.Scan(&name, &result)
		if _, dup := got[name]; dup {
			t.Errorf("source %s recorded twice", name)
		}
		got[name] = result
	}
	rows.Close()
	if len(got) != len(results) {
		t.Errorf("ledger has %d sources, want %d", len(got), len(results))
	}
	for name, want := range results {
		if got[name] != want {
			t.Errorf("%s ended %q, want %q", name, got[name], want)
		}
	}
	var unacked int
	db.QueryRow(`SELECT count(*) FROM sources WHERE acked = 0`).Scan(&unacked)
	if unacked != 0 {
		t.Errorf("%d sources archived on their host but not confirmed in the ledger", unacked)
	}
	var open int
	db.QueryRow(`SELECT count(*) FROM plans WHERE state = 'planned'`).Scan(&open)
	if open != 0 {
		t.Fatalf("%d plans left unfinished", open)
	}
	rows, _ = db.Query(`SELECT target, count(*) FROM handoffs WHERE result = 'promoted' GROUP BY target`)
	for rows.Next() {
		var target string
		var c int
		rows.Scan(&target, &c)
		if c != 1 {
			t.Errorf("card %s promoted %d times", target, c)
		}
	}
	rows.Close()
	for file, ms := range markers {
		b, _ := os.ReadFile(filepath.Join(w.ws, file))
		for _, m := range ms {
			if c := strings.Count(string(b), m); c != 1 {
				t.Errorf("%s holds %s %d times, want exactly once:\n%s", file, m, c, b)
			}
		}
	}
	for _, in := range w.inboxes {
		ents, _ := os.ReadDir(in)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".md") {
				t.Errorf("%s still in its inbox: not archived", filepath.Join(in, e.Name()))
			}
		}
	}
	filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".handoff-tmp.") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(w.dir, "outside.md")); err == nil {
		t.Errorf("a file was written outside the workspace")
	}
}

// stored returns every content the workspace holds, by SHA-256: the
// ledger's store (its contents table, read-only) and any spool file an
// earlier version left. A row or file whose bytes do not hash to its
// name fails the test: the store never holds a partial or foreign
// content.
func stored(t *testing.T, ws string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(ws, ".handoff/ledger.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT sha256, data FROM contents`)
	if err == nil {
		for rows.Next() {
			var sha string
			var data []byte
			if err := rows.Scan(&sha, &data); err != nil {
				t.Fatal(err)
			}
			if sum(string(data)) != sha {
				t.Errorf("the ledger's store holds bytes under another content's hash: %s (%d bytes)", sha, len(data))
				continue
			}
			out[sha] = data
		}
		rows.Close()
	}
	dir := filepath.Join(ws, ".handoff/spool")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".handoff-tmp.") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || sum(string(b))+".md" != e.Name() {
			t.Errorf("partial or foreign file in the legacy spool: %s (%d bytes, %v)", e.Name(), len(b), err)
			continue
		}
		out[strings.TrimSuffix(e.Name(), ".md")] = b
	}
	return out
}
