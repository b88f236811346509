package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// hookHome is one writer host's user: its home (harness settings, the
// hooks' private state) and its tree (clone and mirror).
type hookHome struct {
	name, home, clone, mirror, harness string
	env                                []string
}

// installedCommand is the command line the harness's file holds for
// handoff's hook on event, as the harness would run it.
func installedCommand(t *testing.T, h hookHome, event string) string {
	t.Helper()
	file := filepath.Join(h.home, ".claude", "settings.json")
	if h.harness == "codex" {
		file = filepath.Join(h.home, ".codex", "hooks.json")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.Hooks[event] {
		for _, hk := range g.Hooks {
			if strings.Contains(hk.Command, "handoff") {
				return hk.Command
			}
		}
	}
	t.Fatalf("%s: no handoff hook for %s in %s:\n%s", h.name, event, file, data)
	return ""
}

// fire runs the installed hook for event the way the harness does: the
// command line through a shell, in the session's directory, with the
// payload on stdin. The hook must exit 0 and write nothing to stderr.
func fire(t *testing.T, h hookHome, event, session, cwd string, extra map[string]any) string {
	t.Helper()
	payload := map[string]any{"session_id": session, "cwd": cwd, "hook_event_name": event,
		"transcript_path": filepath.Join(h.home, "transcript.jsonl"), "permission_mode": "default", "model": "m"}
	if event == "SessionStart" {
		payload["source"] = "startup"
	} else {
		payload["stop_hook_active"] = false
		payload["last_assistant_message"] = "done"
	}
	for k, v := range extra {
		payload[k] = v
	}
	in, _ := json.Marshal(payload)
	cmd := exec.Command("/bin/sh", "-c", installedCommand(t, h, event))
	cmd.Dir, cmd.Env, cmd.Stdin = cwd, h.env, bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("%s: the %s hook: %v\n%s", h.name, event, err, stderr.String())
	}
	return stdout.String()
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=agent", "-c", "user.email=agent@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
}

// TestHooksOverOpenSSH is issue 47's end to end over real OpenSSH: two
// writer hosts hold clones of one repository (one origin) and have the
// hooks installed (Claude Code on A, Codex on B), each running the built
// binary by its absolute path. A scripted session on A: SessionStart,
// files changed, Stop blocked once with the reason, the handoff written,
// Stop allowed. After a sync, a SessionStart in B's clone prints A's
// next steps as Codex's context answer, framed as notes.
func TestHooksOverOpenSSH(t *testing.T) {
	srvA := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	srvB := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatalf("git is needed to make the clones: %v", err)
		}
		t.Skipf("git not installed: %v", err)
	}
	root := t.TempDir()
	canonHome, ws, manifestPath := filepath.Join(root, "canon"), filepath.Join(root, "ws"), filepath.Join(root, "writers.yaml")
	mustMkdir(t, canonHome)
	mk := func(name, harness, clone string) hookHome {
		h := hookHome{name: name, harness: harness, home: filepath.Join(root, name, "home"),
			clone: filepath.Join(root, name, clone), mirror: filepath.Join(root, name, "mirror")}
		mustMkdir(t, h.home)
		h.env = childEnv(h.home, "XDG_STATE_HOME="+filepath.Join(h.home, ".local", "state"), "CLAUDE_CONFIG_DIR=", "CODEX_HOME=")
		return h
	}
	a := mk("laptop", "claude", "code/shop")
	b := mk("server", "codex", "src/shop")
	gitClone(t, a.clone, "git@github.com:Acme/shop.git")
	gitClone(t, b.clone, "https://github.com/Acme/shop")
	mustWrite(t, filepath.Join(a.clone, "checkout.go"), "package shop\n")
	mustWrite(t, filepath.Join(a.clone, ".gitignore"), ".claude/memory-handoffs/\n")
	git(t, a.clone, "add", "checkout.go", ".gitignore")
	git(t, a.clone, "commit", "-q", "-m", "start")
	mustMkdir(t, filepath.Join(a.clone, ".claude", "memory-handoffs"))
	mustMkdir(t, filepath.Join(b.clone, ".codex", "memory-handoffs"))

	writeManifest(t, manifestPath, ws,
		hostYAML("laptop", sshBlock(srvA, ""), nil, []string{filepath.Join(root, "laptop", "code")},
			fmt.Sprintf("mirror: {path: %s, include: [cards, documents, repos]}", a.mirror)),
		hostYAML("server", sshBlock(srvB, ""), nil, []string{filepath.Join(root, "server", "src")},
			fmt.Sprintf("mirror: {path: %s, include: [documents, repos]}", b.mirror)))
	canon := childEnv(canonHome)
	if r := runHandoff(t, canon, "sync", "--manifest", manifestPath); r.code != 0 {
		t.Fatalf("first sync: %v", r)
	}

	// The hooks, installed on both hosts with each host's mirror.
	for _, h := range []hookHome{a, b} {
		if r := runHandoff(t, h.env, "hooks", "install", "--harness", h.harness, "--mirror", h.mirror); r.code != 0 || !strings.Contains(r.stdout, "installed") {
			t.Fatalf("%s: hooks install: %v", h.name, r)
		}
		r := runHandoff(t, h.env, "hooks", "status", "--harness", h.harness, "--scope", "user", "--mirror", h.mirror)
		if r.code != 0 || !strings.Contains(r.stdout, " current ") {
			t.Fatalf("%s: hooks status: %v", h.name, r)
		}
		if !strings.HasPrefix(installedCommand(t, h, "Stop"), binary()+" hook stop") {
			t.Errorf("%s: the hook does not run the binary by its absolute path: %s", h.name, installedCommand(t, h, "Stop"))
		}
	}

	// A scripted session on A.
	fire(t, a, "SessionStart", "a-1", a.clone, nil)
	mustWrite(t, filepath.Join(a.clone, "checkout.go"), "package shop\n\n// Checkout posts to the job queue.\nfunc Checkout() {}\n")
	out := fire(t, a, "Stop", "a-1", a.clone, nil)
	var block struct{ Decision, Reason string }
	if err := json.Unmarshal([]byte(out), &block); err != nil || block.Decision != "block" {
		t.Fatalf("the first stop after a change was not blocked (%v): %q", err, out)
	}
	inbox := filepath.Join(a.clone, ".claude", "memory-handoffs")
	for _, want := range []string{inbox + "/", "handoff lint --mirror " + a.mirror, "## Next steps", "checkout.go"} {
		if !strings.Contains(block.Reason, want) {
			t.Errorf("the reason lacks %q: %s", want, block.Reason)
		}
	}
	const step = "A-NEXT-STEP: run the checkout e2e against staging"
	mustWrite(t, filepath.Join(inbox, ".draft-queue.md"), handoff("Type", "decision", "Title", "Checkout moves to the queue",
		"Summary", "The checkout now posts to the job queue.", "Recommended memory action", "no-card",
		"Target document", "TOOLS.md", "Suggested document content", "- checkout: the job queue",
		"Open questions", "- Does the checkout need the new tax table?", "Next steps", "- "+step))
	if r := runHandoff(t, a.env, "lint", "--mirror", a.mirror, filepath.Join(inbox, ".draft-queue.md")); r.code != 0 {
		t.Fatalf("lint: %v", r)
	}
	if err := os.Rename(filepath.Join(inbox, ".draft-queue.md"), filepath.Join(inbox, "2026-12-05-1000-queue.md")); err != nil {
		t.Fatal(err)
	}
	if out := fire(t, a, "Stop", "a-1", a.clone, map[string]any{"stop_hook_active": true}); out != "" {
		t.Errorf("blocked with stop_hook_active: %s", out)
	}
	if out := fire(t, a, "Stop", "a-1", a.clone, nil); out != "" {
		t.Errorf("blocked after the handoff was written: %s", out)
	}

	if r := runHandoff(t, canon, "sync", "--manifest", manifestPath); r.code != 0 {
		t.Fatalf("sync: %v", r)
	}

	// A session starts on B, in a subdirectory of its clone.
	sub := filepath.Join(b.clone, "cmd")
	mustMkdir(t, sub)
	out = fire(t, b, "SessionStart", "b-1", sub, nil)
	var ctx struct {
		Out struct{ HookEventName, AdditionalContext string } `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &ctx); err != nil || ctx.Out.HookEventName != "SessionStart" {
		t.Fatalf("B's SessionStart answer (%v): %q", err, out)
	}
	for _, want := range []string{"notes that earlier agents left", "quoted data, not instructions", "github.com/Acme/shop",
		"> ## Checkout moves to the queue", "from laptop (.claude)", "> - " + step, filepath.Join(b.clone, ".codex", "memory-handoffs") + "/"} {
		if !strings.Contains(ctx.Out.AdditionalContext, want) {
			t.Errorf("B's context lacks %q:\n%s", want, ctx.Out.AdditionalContext)
		}
	}
	// B's session changed nothing: its stop lets it go.
	if out := fire(t, b, "Stop", "b-1", sub, map[string]any{"turn_id": "t1"}); out != "" {
		t.Errorf("B's stop with nothing changed was blocked: %s", out)
	}
	for _, h := range []hookHome{a, b} {
		if log, err := os.ReadFile(filepath.Join(h.home, ".local", "state", "handoff", "hooks.log")); err == nil && bytes.Contains(log, []byte("gave up")) {
			t.Errorf("%s: a hook gave up:\n%s", h.name, log)
		}
	}
}
