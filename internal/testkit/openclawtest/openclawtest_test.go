package openclawtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Words that occur in exactly one file of the workspace, so that a hit
// names the file that holds it.
const (
	wordMemory = "quokka"    // MEMORY.md
	wordCard   = "axolotl"   // memory/cards/x.md
	wordDraft  = "zebrafish" // memory/handoff-inbox/2026-01-01-x.md
	wordHidden = "ocelot"    // memory/.hidden/h.md
	wordReview = "pangolin"  // .handoff/review/p.md
	wordText   = "capybara"  // memory/cards/y.txt
	wordRules  = "okapi"     // rules/r.md
	wordTools  = "narwhal"   // TOOLS.md
	wordUser   = "wombat"    // USER.md
)

const (
	agentsMD = "# AGENTS\n\nBe careful.\n\n## Style\n\nShort.\n"
	toolsMD  = "# Tools\n\n- run the " + wordTools + " linter before commits\n"
)

// userMD is a USER.md of 120 numbered entries, about 7,400 characters:
// well past OpenClaw's 4,000-character cap for it.
func userMD() string {
	var b strings.Builder
	b.WriteString("# User\n\nThe user keeps a " + wordUser + ".\n\n")
	for i := range 120 {
		fmt.Fprintf(&b, "- entry %03d: the user likes item number %03d very much.\n", i, i)
	}
	return b.String()
}

// workspace writes the handmade workspace every test here reads.
func workspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	files := map[string]string{
		"AGENTS.md":                            agentsMD,
		"MEMORY.md":                            "# Memory\n\nThe team builds with " + wordMemory + ".\n",
		"USER.md":                              userMD(),
		"TOOLS.md":                             toolsMD,
		"memory/cards/x.md":                    "---\ntopic: x\n---\nCard about " + wordCard + " pipelines.\n",
		"memory/cards/y.txt":                   "Plain text about " + wordText + ".\n",
		"memory/handoff-inbox/2026-01-01-x.md": "Draft about " + wordDraft + " uploads.\n",
		"memory/.hidden/h.md":                  "Hidden note about " + wordHidden + ".\n",
		".handoff/review/p.md":                 "Review draft about " + wordReview + ".\n",
		"rules/r.md":                           "Rule about " + wordRules + ".\n",
	}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func hitPaths(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		if !slices.Contains(out, h.Path) {
			out = append(out, h.Path)
		}
	}
	slices.Sort(out)
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSessionStartAndDoctor runs OpenClaw's own session-start loader
// over the workspace before and after `openclaw doctor --fix`, and pins
// what handoff has to defend against (docs/openclaw.md). The tests here
// run in parallel: each OpenClaw command costs 10 to 15 s of CPU.
func TestSessionStartAndDoctor(t *testing.T) {
	t.Parallel()
	oc := Find(t)
	ws := workspace(t)
	env := oc.Env(t, ws, Options{})
	ctx := context.Background()

	// Invariant: the session-start context is OpenClaw's six bootstrap
	// files in its order, TOOLS.md is not among them, and USER.md is cut
	// to 4,000 characters, its middle dropped.
	t.Run("bootstrap", func(t *testing.T) {
		b, err := env.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range b.Files {
			names = append(names, f.Name)
		}
		want := []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md", "MEMORY.md"}
		if !slices.Equal(names, want) {
			t.Errorf("bootstrap files %v, want %v", names, want)
		}
		if strings.Contains(b.Text(), wordTools) {
			t.Errorf("the TOOLS.md note is in the session context; 2026.9 retired TOOLS.md")
		}
		if f, _ := b.File("AGENTS.md"); f.Content != strings.TrimRight(agentsMD, "\n") {
			t.Errorf("AGENTS.md injected as %q, want it whole", f.Content)
		}
		u, ok := b.File("USER.md")
		if !ok || !u.Injected {
			t.Fatalf("USER.md not injected: %+v", u)
		}
		if u.Chars != len(userMD()) || u.Chars <= 4000 {
			t.Errorf("USER.md counted as %d chars, want %d (> 4000)", u.Chars, len(userMD()))
		}
		if !u.Truncated || u.InjectedChars > 4000 || u.InjectedChars < 3900 {
			t.Errorf("USER.md injected %d chars (truncated %v), want cut to at most 4,000", u.InjectedChars, u.Truncated)
		}
		for _, s := range []string{"- entry 000:", "[...truncated, read USER.md for full content...]", "…(truncated USER.md: kept ", "- entry 119:"} {
			if !strings.Contains(u.Content, s) {
				t.Errorf("injected USER.md lacks %q", s)
			}
		}
		if strings.Contains(u.Content, "- entry 060:") {
			t.Errorf("injected USER.md holds entry 060, from the middle OpenClaw drops")
		}
		if len(b.Warnings) == 0 || !strings.Contains(b.Warnings[0], "USER.md") {
			t.Errorf("no truncation warning for USER.md: %q", b.Warnings)
		}
	})

	// Invariant: doctor --fix deletes TOOLS.md, archives it under the
	// state directory, puts its text under "## Tools" / "### Local notes
	// (migrated from TOOLS.md)" at the end of AGENTS.md, and stamps the
	// config with its version; the note then reaches the session.
	t.Run("doctor", func(t *testing.T) {
		if _, err := env.DoctorFix(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(ws, "TOOLS.md")); !os.IsNotExist(err) {
			t.Errorf("TOOLS.md after doctor --fix: %v, want it gone", err)
		}
		wantAgents := agentsMD + "\n## Tools\n\n### Local notes (migrated from TOOLS.md)\n\n" + toolsMD
		if got := read(t, filepath.Join(ws, "AGENTS.md")); got != wantAgents {
			t.Errorf("AGENTS.md after doctor --fix:\n%q\nwant\n%q", got, wantAgents)
		}
		sum := sha256.Sum256([]byte(toolsMD))
		archive := filepath.Join(env.StateDir, "backups", "tools-md-migration", "main-"+hex.EncodeToString(sum[:])+".md")
		if got := read(t, archive); got != toolsMD {
			t.Errorf("archive %s holds %q, want the original TOOLS.md", archive, got)
		}
		var cfg struct {
			Meta struct {
				LastTouchedVersion string `json:"lastTouchedVersion"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(read(t, env.Config)), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Meta.LastTouchedVersion != Version {
			t.Errorf("config meta.lastTouchedVersion %q after doctor --fix, want %q", cfg.Meta.LastTouchedVersion, Version)
		}
		b, err := env.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := b.File("AGENTS.md"); !strings.Contains(f.Content, "- run the "+wordTools+" linter") {
			t.Errorf("the migrated TOOLS.md note is not in the session's AGENTS.md:\n%s", f.Content)
		}
	})
}

// TestMemorySearchAndPromotion indexes the workspace, searches it and
// promotes what the search recalled, as an agent's memory_search and the
// nightly dreaming sweep would.
func TestMemorySearchAndPromotion(t *testing.T) {
	t.Parallel()
	oc := Find(t)
	ws := workspace(t)
	env := oc.Env(t, ws, Options{})
	ctx := context.Background()

	// Invariant: memory search finds every *.md under memory/ (drafts,
	// hidden directories), MEMORY.md and USER.md; it never finds
	// .handoff/, a name not ending in .md, or rules/ without extraPaths.
	// One query names every word: OpenClaw's text search matches any.
	t.Run("search", func(t *testing.T) {
		if err := env.Index(ctx); err != nil {
			t.Fatal(err)
		}
		hits, err := env.Search(ctx, strings.Join([]string{wordMemory, wordUser, wordCard, wordDraft, wordHidden, wordReview, wordText, wordRules, wordTools}, " "))
		if err != nil {
			t.Fatal(err)
		}
		got := hitPaths(hits)
		want := []string{"MEMORY.md", "USER.md", "memory/.hidden/h.md", "memory/cards/x.md", "memory/handoff-inbox/2026-01-01-x.md"}
		if !slices.Equal(got, want) {
			t.Errorf("search hits %v, want %v", got, want)
		}
		for _, h := range hits {
			if h.Path == "memory/handoff-inbox/2026-01-01-x.md" && h.Provenance.OriginClass != "agent" {
				t.Errorf("the draft's origin class is %q; OpenClaw 2026.9.6 calls files under memory/ %q", h.Provenance.OriginClass, "agent")
			}
		}
	})

	// Invariant: a recalled file under memory/ whose name starts with a
	// date is a short-term note that promotion copies into MEMORY.md; an
	// undated card is not.
	t.Run("promote", func(t *testing.T) {
		cands, err := env.PromoteCandidates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, c := range cands {
			paths = append(paths, c.Path)
		}
		if !slices.Equal(paths, []string{"memory/handoff-inbox/2026-01-01-x.md"}) {
			t.Errorf("promotion candidates %v, want only the dated draft", paths)
		}
		p, err := env.PromoteApply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.Appended != 1 || filepath.Clean(p.MemoryPath) != filepath.Join(ws, "MEMORY.md") {
			t.Errorf("promote --apply appended %d to %q, want 1 to MEMORY.md", p.Appended, p.MemoryPath)
		}
		if m := read(t, filepath.Join(ws, "MEMORY.md")); !strings.Contains(m, wordDraft) {
			t.Errorf("MEMORY.md after promote --apply lacks the draft's text:\n%s", m)
		}
	})
}

// TestExtraPathsAreSearchedAsUntrusted pins memory.search.extraPaths:
// a directory listed there is indexed (its *.md only) and its hits are
// labelled untrusted, unlike the workspace's own memory files.
func TestExtraPathsAreSearchedAsUntrusted(t *testing.T) {
	t.Parallel()
	oc := Find(t)
	ws := workspace(t)
	env := oc.Env(t, ws, Options{ExtraPaths: []string{"rules"}})
	ctx := context.Background()
	if err := env.Index(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err := env.Search(ctx, wordRules+" "+wordCard)
	if err != nil {
		t.Fatal(err)
	}
	origin := map[string]string{}
	for _, h := range hits {
		origin[h.Path] = h.Provenance.OriginClass
	}
	want := map[string]string{"rules/r.md": "untrusted", "memory/cards/x.md": "agent"}
	if len(origin) != len(want) || origin["rules/r.md"] != want["rules/r.md"] || origin["memory/cards/x.md"] != want["memory/cards/x.md"] {
		t.Errorf("hits with origin classes %v, want %v", origin, want)
	}
}
