package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// recentHolding returns the RECENT.md under a mirror's repos/ that holds
// marker, "" when none does.
func recentHolding(t *testing.T, mirrorDir, marker string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(mirrorDir, "repos", "*", "RECENT.md"))
	for _, f := range files {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), marker) {
			return string(data)
		}
	}
	return ""
}

// TestPrivacyTwoHostsOverOpenSSH is issue 46's privacy cases over two
// real OpenSSH hosts: laptop (the victim) keeps a private discover root
// and a repository whose repos entry is private; hostile, a second host,
// makes clones that forge their origins.
// Invariants:
//   - private repositories stay on their host: nothing of them (notes,
//     the entry's name and origins, paths, cards and document appends)
//     is anywhere on hostile's mirror;
//   - a clone forging one origin of a private entry learns nothing of
//     the entry: not its name (as a slug or a word), not its other
//     origins, not the laptop's notes;
//   - hostile's handoffs under a forged origin do not join the RECENT.md
//     of the laptop's private root or private entry;
//   - a private append to a shared document waits in review
//     (private-append), and the shared document keeps reaching hostile.
func TestPrivacyTwoHostsOverOpenSSH(t *testing.T) {
	srvA := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	srvB := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	needGit(t)
	root, home, ws, manifestPath := syncDirs(t)
	laptop := newContHost(root, "laptop")
	hostile := newContHost(root, "hostile")

	gitClone(t, laptop.path("code/shop"), "git@github.com:acme/shop.git")
	gitClone(t, laptop.path("clients/bank"), "git@github.com:bank/portal.git")         // under a private root
	gitClone(t, laptop.path("code/clientx"), "git@gitlab.example.com:clientx/sso.git") // a private entry
	gitClone(t, hostile.path("src/forged-entry"), "https://github.com/clientx/webapp") // the entry's other origin
	gitClone(t, hostile.path("src/forged-root"), "https://github.com/bank/portal")     // the private root's origin
	inbox := func(dir string) string { p := filepath.Join(dir, ".claude/memory-handoffs"); mustMkdir(t, p); return p }
	shopIn, bankIn, clientxIn := inbox(laptop.path("code/shop")), inbox(laptop.path("clients/bank")), inbox(laptop.path("code/clientx"))
	entryIn, rootIn := inbox(hostile.path("src/forged-entry")), inbox(hostile.path("src/forged-root"))

	note := func(title, target, text string) string {
		return handoff("Type", "decision", "Title", title, "Summary", title+" summary", "Recommended memory action", "no-card",
			"Target document", target, "Suggested document content", text, "Open questions", "- "+title+" question")
	}
	mustWrite(t, filepath.Join(shopIn, "2026-12-01-1000-shop.md"), note("SHOP-NOTE", "TOOLS.md", "- shop: the job queue"))
	mustWrite(t, filepath.Join(bankIn, "2026-12-01-1100-bank.md"), note("BANK-NOTE", "rules/bank.md", "- BANK-RULE"))
	mustWrite(t, filepath.Join(clientxIn, "2026-12-01-1200-clientx.md"), note("CLIENTX-NOTE", ".learnings/LEARNINGS.md", "- CLIENTX-LEARNING: SAML only"))
	mustWrite(t, filepath.Join(entryIn, "2026-12-01-1300-forged.md"), note("FORGED-ENTRY-NOTE", "rules/forged.md", "- forged rule"))
	mustWrite(t, filepath.Join(rootIn, "2026-12-01-1400-forged.md"), note("FORGED-ROOT-NOTE", "rules/forged2.md", "- forged rule 2"))

	writeManifest(t, manifestPath, ws,
		hostYAML("laptop", sshBlock(srvA, ""), nil, nil,
			fmt.Sprintf("discover: [{root: %s, max_depth: 1}, {root: %s, max_depth: 1, private: true}]", laptop.path("code"), laptop.path("clients")),
			fmt.Sprintf("mirror: {path: %s, include: [cards, documents, repos]}", laptop.mirror)),
		hostYAML("hostile", sshBlock(srvB, ""), nil, []string{hostile.path("src")},
			fmt.Sprintf("mirror: {path: %s, include: [cards, documents, repos]}", hostile.mirror)))
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, manifestPath, string(data)+fmt.Sprintf(`repos:
  - name: clientx-secret
    origins: [git@gitlab.example.com:clientx/sso.git, https://github.com/clientx/webapp]
    paths: [{host: laptop, path: %s}]
    private: true
`, laptop.path("code/clientx")))
	env := childEnv(home)
	if r := runHandoff(t, env, "manifest", "check", manifestPath); r.code != 0 {
		t.Fatalf("manifest check: %v", r)
	}
	rc := decodeReceipt(t, runHandoff(t, env, "sync", "--manifest", manifestPath, "--json"))
	if rc.Counts.Pulled != 5 || rc.Counts.Routed != 5 {
		t.Fatalf("first sync: %+v\n%+v", rc.Counts, rc.Handoffs)
	}

	// The second sync: the bank's agent appends to the shared TOOLS.md.
	mustWrite(t, filepath.Join(bankIn, "2026-12-02-0900-bank-tool.md"), note("BANK-TOOL-NOTE", "TOOLS.md", "- BANK-TOOL: the bank's CLI"))
	rc = decodeReceipt(t, runHandoff(t, env, "sync", "--manifest", manifestPath, "--json"))
	if rc.Counts.Pulled != 1 || rc.Counts.Review != 1 || rc.Handoffs[0].Reason != ingest.ReasonPrivateAppend {
		t.Fatalf("second sync: %+v\n%+v", rc.Counts, rc.Handoffs)
	}
	for _, h := range rc.Hosts {
		if h.Mirror == nil || h.Mirror.Outcome != mirror.OutcomeOK {
			t.Fatalf("%s: mirror %+v", h.Name, h.Mirror)
		}
	}
	if tools, _ := os.ReadFile(filepath.Join(ws, "TOOLS.md")); strings.Contains(string(tools), "BANK-TOOL") {
		t.Errorf("the private append entered the shared TOOLS.md without a person:\n%s", tools)
	}

	// Nothing of the laptop's private repositories on hostile's mirror.
	text := treeText(hostile.mirror)
	for _, leak := range []string{"BANK-NOTE", "BANK-RULE", "BANK-TOOL", "CLIENTX-NOTE", "CLIENTX-LEARNING", "rules/bank.md",
		"clientx-secret", "clientx/sso", "gitlab.example.com", laptop.path("clients"), laptop.path("code/clientx")} {
		if strings.Contains(text, leak) {
			t.Errorf("hostile's mirror holds %q of a repository private to the laptop", leak)
		}
	}
	// The shared TOOLS.md keeps reaching hostile.
	if tools, err := os.ReadFile(filepath.Join(hostile.mirror, "TOOLS.md")); err != nil || !strings.Contains(string(tools), "shop: the job queue") {
		t.Errorf("hostile's mirror lost the shared TOOLS.md (%v):\n%s", err, tools)
	}
	// Hostile sees its own notes, under its own origins.
	if r := recentHolding(t, hostile.mirror, "FORGED-ENTRY-NOTE"); r == "" || strings.Contains(r, "CLIENTX") {
		t.Errorf("hostile's forged-entry RECENT.md:\n%s", r)
	}
	// The laptop's private RECENT.md files hold its notes and none of
	// hostile's.
	for marker, forged := range map[string]string{"BANK-NOTE": "FORGED-ROOT-NOTE", "CLIENTX-NOTE": "FORGED-ENTRY-NOTE"} {
		r := recentHolding(t, laptop.mirror, marker)
		if r == "" {
			t.Errorf("the laptop's mirror lacks its own %s", marker)
			continue
		}
		if strings.Contains(r, forged) || strings.Contains(r, "hostile") {
			t.Errorf("the laptop's private RECENT.md with %s shows hostile's handoff under a forged origin:\n%s", marker, r)
		}
	}
	if _, err := os.Stat(filepath.Join(hostile.mirror, "repos", "clientx-secret")); err == nil {
		t.Error("the private entry's name is a slug on hostile's mirror")
	}
	var waits bool
	for _, h := range rc.Handoffs {
		waits = waits || h.Result == receipts.ResultReview
	}
	if !waits {
		t.Error("no handoff waits in review")
	}
}
