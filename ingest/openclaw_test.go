package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/openclaw"
)

// newerConfig writes an OpenClaw config that OpenClaw 2026.9.6 last
// wrote, and returns its path.
func newerConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "openclaw.json")
	if err := os.WriteFile(p, []byte(`{meta: {lastTouchedVersion: "2026.9.6"}, memory: {search: {provider: "none"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runReader ingests with the given OpenClaw options.
func (r *rig) runReader(oc OpenClawOptions) (*Ingester, []Entry) {
	r.t.Helper()
	in, err := New(Options{Workspace: r.ws, RunID: "run", OpenClaw: oc}, r.led, r.spool)
	if err != nil {
		r.t.Fatal(err)
	}
	defer in.Close()
	entries, err := in.Run(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	in.UpdateCardIndex()
	return in, entries
}

// TestToolsNotesOnOpenClaw2026_9: on a workspace read by OpenClaw 2026.9,
// which no longer loads TOOLS.md, a TOOLS.md note lands at the end of
// AGENTS.md's "## Tools" section, hash-guarded and backed up like any
// append, and TOOLS.md is never made again. Invariant: a routed note is
// where OpenClaw reads it; nothing is written that OpenClaw retired.
func TestToolsNotesOnOpenClaw2026_9(t *testing.T) {
	r := newRig(t)
	agents := "# Agents\n\n## Tools\n\n" + openclaw.MigratedHeading + "\n\n- rg for search\n\n## Safety\n\nNever force-push.\n"
	r.writeWS("AGENTS.md", agents)
	r.store([2]string{"a.md", docH("TOOLS.md", "- jq for receipts")}, [2]string{"b.md", docH("TOOLS.md", "- fd for files")})
	in, entries := r.runReader(OpenClawOptions{Config: newerConfig(t)})
	for _, e := range entries {
		if e.Result != ResultRouted || e.Target != "AGENTS.md" {
			t.Errorf("%s: %s → %s, want routed to AGENTS.md", e.Name, e.Result, e.Target)
		}
	}
	want := "# Agents\n\n## Tools\n\n" + openclaw.MigratedHeading + "\n\n- rg for search\n\n- jq for receipts\n\n- fd for files\n\n## Safety\n\nNever force-push.\n"
	if got := r.readWS("AGENTS.md"); got != want {
		t.Errorf("AGENTS.md =\n%s\nwant\n%s", got, want)
	}
	if _, err := os.Lstat(filepath.Join(r.ws, "TOOLS.md")); err == nil {
		t.Error("TOOLS.md was made on a 2026.9 layout")
	}
	if rd := in.Reader(); rd.Layout != "2026.9" || !strings.Contains(rd.Why, "migration") {
		t.Errorf("reader %+v", rd)
	}
	r.checkBackups()
	r.checkClean()

	// The layout sticks: without the config or the migration heading,
	// the next TOOLS.md note still goes to AGENTS.md.
	r.writeWS("AGENTS.md", "# Agents\n")
	r.store([2]string{"c.md", docH("TOOLS.md", "- bat for reading")})
	_, entries = r.runReader(OpenClawOptions{Config: "/nonexistent/openclaw.json"})
	if len(entries) != 1 || entries[0].Target != "AGENTS.md" || r.readWS("AGENTS.md") != "# Agents\n\n## Tools\n\n- bat for reading\n" {
		t.Errorf("after the layout was seen: %+v, AGENTS.md %q", entries, r.readWS("AGENTS.md"))
	}
}

// TestCrashInsertingToolsNote kills the ingester after it replaced
// AGENTS.md and before its bookkeeping, and at every other step, then
// runs it again. Invariant: a note inserted into the middle of AGENTS.md
// is there exactly once (none applied twice, none lost).
func TestCrashInsertingToolsNote(t *testing.T) {
	cfg := newerConfig(t)
	t.Setenv(childReaderEnv, cfg)
	for _, fp := range ingestPoints {
		if fp == "review.written" {
			continue // no draft on this path
		}
		t.Run(fp, func(t *testing.T) {
			r := newRig(t)
			r.writeWS("AGENTS.md", "## Tools\n\n- rg\n\n## Safety\n\nNo.\n")
			var named [][2]string
			for i := range 3 {
				named = append(named, [2]string{fmt.Sprintf("n%d.md", i), docH("TOOLS.md", fmt.Sprintf("- marker-%d", i))})
			}
			r.store(named...)
			if !r.runChild(fp, 2) {
				t.Fatalf("failpoint %s was not reached", fp)
			}
			r.runReader(OpenClawOptions{Config: cfg})
			got := r.readWS("AGENTS.md")
			for i := range 3 {
				if n := strings.Count(got, fmt.Sprintf("- marker-%d\n", i)); n != 1 {
					t.Errorf("marker-%d is in AGENTS.md %d times:\n%s", i, n, got)
				}
			}
			if !strings.HasSuffix(got, "## Safety\n\nNo.\n") {
				t.Errorf("the notes left the Tools section:\n%s", got)
			}
			r.checkClean()
		})
	}
}

// TestBootstrapCap: USER.md notes are routed while USER.md stays within
// the 4,000 characters OpenClaw loads of it; the one that would take it
// past waits in review with the sizes, and USER.md is left whole.
// Invariant: a routed note is never cut from the session.
func TestBootstrapCap(t *testing.T) {
	r := newRig(t)
	var named [][2]string
	for i := range 40 {
		named = append(named, [2]string{fmt.Sprintf("u%02d.md", i), docH("USER.md", fmt.Sprintf("- preference %02d: %s", i, strings.Repeat("x", 100)))})
	}
	r.store(named...)
	cfg := newerConfig(t)
	_, entries := r.runReader(OpenClawOptions{Config: cfg})
	routed, capped := 0, 0
	for _, e := range entries {
		switch {
		case e.Result == ResultRouted:
			routed++
		case e.Result == ResultReview && e.Reason == ReasonBootstrapCap:
			capped++
		default:
			t.Errorf("%s: %s/%s", e.Name, e.Result, e.Reason)
		}
	}
	user := r.readWS("USER.md")
	if n := openclaw.Chars([]byte(user)); n > 4000 || routed == 0 || capped == 0 || routed+capped != 40 {
		t.Errorf("USER.md is %d characters; %d routed, %d capped", n, routed, capped)
	}
	for _, e := range entries {
		if e.Result == ResultRouted && !strings.Contains(user, fmt.Sprintf("- preference %s", e.Name[1:3])) {
			t.Errorf("routed %s is not whole in USER.md", e.Name)
		}
	}
	src := r.sourceOf(entries[len(entries)-1].Name)
	in, err := New(Options{Workspace: r.ws, DryRun: true, OpenClaw: OpenClawOptions{Config: cfg}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	pr, err := in.Inspect(src, []byte(named[39][1]), Override{})
	if err != nil || len(pr.Blocking) != 1 || !strings.Contains(pr.Blocking[0].Message, "OpenClaw loads 4000 of it") {
		t.Errorf("inspect: %+v %v", pr.Blocking, err)
	}
}

// TestCardIndex: promoted cards are named in MEMORY.md's index, newest
// first, between handoff's markers; OpenClaw's own text in MEMORY.md is
// kept; a run that changes no card leaves MEMORY.md alone; a dated card
// name waits in review. Invariant: every session knows which cards
// exist; nothing of OpenClaw's is lost.
func TestCardIndex(t *testing.T) {
	r := newRig(t)
	r.writeWS("MEMORY.md", "# Memory\n\n- promoted by OpenClaw\n")
	r.store([2]string{"a.md", cardH("create-card", "go-errors.md", cardContent("go errors", "wrap"))},
		[2]string{"b.md", cardH("create-card", "2026-04-20-standup.md", cardContent("standup", "x"))})
	oc := OpenClawOptions{Config: newerConfig(t), CardIndex: true}
	in, entries := r.runReader(oc)
	if res := r.results(); res["a.md"] != "promoted" || res["b.md"] != "review/"+ReasonDatedCardName {
		t.Errorf("results %v", res)
	}
	_ = entries
	mem := r.readWS("MEMORY.md")
	if !strings.Contains(mem, "- go-errors.md: go errors\n") || !strings.HasSuffix(mem, "- promoted by OpenClaw\n") || strings.Contains(mem, "standup") {
		t.Errorf("MEMORY.md:\n%s", mem)
	}
	if rd := in.Reader(); rd.CardIndex == nil || rd.CardIndex.Cards != 1 || rd.CardIndex.Shown != 1 || rd.CardIndex.Backup == "" {
		t.Errorf("index result %+v", rd.CardIndex)
	}
	if b, err := os.ReadFile(filepath.Join(r.ws, layout.BackupsDir, in.Reader().CardIndex.Backup)); err != nil || string(b) != "# Memory\n\n- promoted by OpenClaw\n" {
		t.Errorf("backup of MEMORY.md: %q %v", b, err)
	}
	// OpenClaw appends; a run without card changes keeps MEMORY.md as it is.
	mem += "- another OpenClaw note\n"
	r.writeWS("MEMORY.md", mem)
	in, _ = r.runReader(oc)
	if got := r.readWS("MEMORY.md"); got != mem || in.Reader().CardIndex != nil {
		t.Errorf("an idle run rewrote MEMORY.md:\n%s", got)
	}
	// A new card: the index names both, newest first, and keeps
	// OpenClaw's text.
	r.store([2]string{"c.md", cardH("create-card", "jq.md", cardContent("jq", "use jq"))})
	r.runReader(oc)
	mem = r.readWS("MEMORY.md")
	if i, j := strings.Index(mem, "- jq.md"), strings.Index(mem, "- go-errors.md"); i < 0 || j < 0 || !strings.Contains(mem, "- another OpenClaw note\n") {
		t.Errorf("MEMORY.md after a second card:\n%s", mem)
	}
	r.checkClean()
}
