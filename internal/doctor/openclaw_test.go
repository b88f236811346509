package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
)

// TestDoctorOpenClaw: doctor says what OpenClaw, the workspace's reader,
// would do with it: drafts an earlier version left under memory/ fail
// (OpenClaw reads them as trusted memory), a loaded file past its cap
// warns with the sizes, rules/ and .learnings/ that memory search does
// not index warn with the lines to add, an extraPaths entry reaching
// the drafts fails, and a layout guessed without evidence warns.
// Invariant: nothing unreviewed where OpenClaw reads memory goes
// unreported.
func TestDoctorOpenClaw(t *testing.T) {
	ws := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory/handoff-inbox/2026-04-20-x.3f9a1c2b4d5e.md", "# Memory Handoff\n")
	write("memory/handoff-inbox/notes.md", "mine\n")
	write("USER.md", strings.Repeat("u", 4100))
	write("rules/go.md", "- wrap errors\n")
	write(".learnings/LEARNINGS.md", "- x\n")
	cfg := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(cfg, []byte(`{meta: {lastTouchedVersion: "2026.9.6"}, memory: {search: {extraPaths: ["rules"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{OpenClaw: manifest.OpenClaw{Config: cfg}}
	got := map[string][]Check{}
	for _, c := range doctorOpenClaw(ws, m) {
		got[c.Name] = append(got[c.Name], c)
	}
	want := func(name, status, text string) {
		t.Helper()
		for _, c := range got[name] {
			if c.Status == status && strings.Contains(c.Message+" hint: "+c.Hint, text) {
				return
			}
		}
		t.Errorf("no %s check %s containing %q: %+v", name, status, text, got[name])
	}
	want("drafts", CheckFail, "1 review draft(s) an earlier handoff left in memory/handoff-inbox")
	want("drafts", CheckWarn, "1 other file(s)")
	want("layout", CheckOK, "OpenClaw 2026.9 layout")
	want("bootstrap", CheckWarn, "USER.md 4100/4000")
	want("extra-paths", CheckWarn, `extraPaths: ["rules", ".learnings"]`)

	// An extraPaths entry that reaches .handoff/review; no config version.
	if err := os.WriteFile(cfg, []byte(`{memory: {search: {extraPaths: ["rules", ".learnings", "."]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got = map[string][]Check{}
	for _, c := range doctorOpenClaw(ws, m) {
		got[c.Name] = append(got[c.Name], c)
	}
	want("extra-paths", CheckFail, `entry "." reaches .handoff/review`)
	want("extra-paths", CheckOK, "indexes rules/ and .learnings/")
	want("layout", CheckWarn, `pin `+"`openclaw: {layout: \"2026.9\"}`")
}
