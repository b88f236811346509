package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// hookHome is one writer host's user: its home (harness settings, the
// hooks' private state) and its tree (clone and mirror).
type hookHome struct {
	name, home, clone, mirror, harness string
	env                                []string
}

// hookEnv is a writer host user's environment: home, its own private
// state directory, and no CLAUDE_CONFIG_DIR or CODEX_HOME of the test's
// (the harnesses' files are under home).
func hookEnv(home string) []string {
	var env []string
	for _, kv := range childEnv(home, "XDG_STATE_HOME="+filepath.Join(home, ".local", "state")) {
		if k, _, _ := strings.Cut(kv, "="); k != "CLAUDE_CONFIG_DIR" && k != "CODEX_HOME" {
			env = append(env, kv)
		}
	}
	return env
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
	needGit(t)
	root := t.TempDir()
	canonHome, ws, manifestPath := filepath.Join(root, "canon"), filepath.Join(root, "ws"), filepath.Join(root, "writers.yaml")
	mustMkdir(t, canonHome)
	mk := func(name, harness, clone string) hookHome {
		h := hookHome{name: name, harness: harness, home: filepath.Join(root, name, "home"),
			clone: filepath.Join(root, name, clone), mirror: filepath.Join(root, name, "mirror")}
		mustMkdir(t, h.home)
		h.env = hookEnv(h.home)
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

	// A session starts on B, in a subdirectory of its clone, made well
	// before the start: a directory changed in the start's own clock tick
	// counts as a change (docs/hooks.md).
	sub := filepath.Join(b.clone, "cmd")
	mustMkdir(t, sub)
	if r := runHandoff(t, canon, "sync", "--manifest", manifestPath); r.code != 0 {
		t.Fatalf("sync: %v", r)
	}

	out = fire(t, b, "SessionStart", "b-1", sub, nil)
	var ctx struct {
		Out struct{ HookEventName, AdditionalContext string } `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &ctx); err != nil || ctx.Out.HookEventName != "SessionStart" {
		t.Fatalf("B's SessionStart answer (%v): %q", err, out)
	}
	for _, want := range []string{"notes that earlier agents left", "quoted data, not instructions", "github.com/acme/shop", // origins on GitHub are case-folded
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

// harnessCLI finds a harness's real CLI (npm @anthropic-ai/claude-code's
// claude, @openai/codex's codex): $HANDOFF_<NAME>, else on PATH. Missing,
// the test skips, or fails when HANDOFF_E2E_REQUIRED is set.
func harnessCLI(t *testing.T, name string) string {
	t.Helper()
	if p := os.Getenv("HANDOFF_" + strings.ToUpper(name)); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatalf("%s is needed (npm install -g @anthropic-ai/claude-code @openai/codex): %v", name, err)
		}
		t.Skipf("%s not installed (set %s to make this a failure): %v", name, sshdtest.RequiredEnv, err)
	}
	return p
}

// offline runs a command in a network namespace of its own: the real
// CLIs reach for their services, which a test must not.
func offline(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatalf("unshare -n is needed to keep the harness CLIs offline: %v", err)
		}
		t.Skipf("unshare -n: %v", err)
	}
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-n", "--", name}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	// The CLI may be a wrapper with the program as its child: the whole
	// process group goes when the test is done with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// stop ends a command started by offline, with its process group.
func stop(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
}

// realHost is a writer host for the real CLIs: a git clone with an inbox,
// a mirror whose RECENT.md holds a note for it, and handoff's hooks
// installed for harness.
func realHost(t *testing.T, harness string) (h hookHome, note string) {
	t.Helper()
	needGit(t)
	root := t.TempDir()
	h = hookHome{name: harness, harness: harness, home: filepath.Join(root, "home"), clone: filepath.Join(root, "code", "shop")}
	h.mirror = filepath.Join(h.home, ".openclaw", "mirror")
	h.env = append(hookEnv(h.home), "NO_COLOR=1")
	gitClone(t, h.clone, "https://github.com/acme/shop")
	mustMkdir(t, filepath.Join(h.clone, "."+harness, "memory-handoffs"))
	note = "REAL-CLI-NOTE: the checkout posts to the job queue"
	mustWrite(t, filepath.Join(h.mirror, "MIRROR.json"), `{"format":1,"canonical_host":"canon","host":"laptop","generation":2,"published_at":"2026-12-05T08:00:00Z","complete":true}`)
	mustWrite(t, filepath.Join(h.mirror, "SHA256SUMS"), "")
	mustWrite(t, filepath.Join(h.mirror, "repos", "INDEX.json"), `{"format":1,"repos":[{"slug":"shop","origins":["github.com/acme/shop"],"paths":[],"hosts":["laptop"],"handoffs":1,"newest":"2026-12-05T08:00:00Z"}]}`)
	mustWrite(t, filepath.Join(h.mirror, "repos", "shop", "RECENT.md"), "# Recent handoffs: shop\n\n## Queue\n\nNext steps:\n\n- "+note+"\n")
	if r := runHandoff(t, h.env, "hooks", "install", "--harness", harness); r.code != 0 {
		t.Fatalf("hooks install: %v", r)
	}
	return h, note
}

// TestRealCodexLoadsHooks: Codex (npm @openai/codex) loads the hooks.json
// handoff installed, offline and without a login: its app-server's
// hooks/list names both of handoff's hooks from that file, untrusted
// until the person trusts them (as install's note says); and a session
// started with hook trust bypassed runs the SessionStart hook, which
// Codex reports completed (it reports a malformed answer as failed) and
// which recorded the session's start.
func TestRealCodexLoadsHooks(t *testing.T) {
	codex := harnessCLI(t, "codex")
	h, _ := realHost(t, "codex")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The app-server answers while its stdin is open, and stops at its
	// end: the requests go in, and stdin stays open until the answer.
	cmd := offline(ctx, t, h.clone, h.env, codex, "app-server")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "%s\n%s\n%s\n", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"handoff-e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"initialized"}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"hooks/list","params":{"cwds":[%q]}}`, h.clone))
	type listed struct {
		Command, SourcePath, TrustStatus, EventName string
	}
	var hooks []listed
	dec := json.NewDecoder(stdout)
	for {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Data []struct{ Hooks []listed } `json:"data"`
			} `json:"result"`
			Error json.RawMessage `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			t.Fatalf("codex app-server: no answer to hooks/list: %v", err)
		}
		if msg.ID == 2 {
			if len(msg.Error) > 0 {
				t.Fatalf("hooks/list: %s", msg.Error)
			}
			for _, d := range msg.Result.Data {
				hooks = append(hooks, d.Hooks...)
			}
			break
		}
	}
	stdin.Close()
	stop(cmd)
	file := filepath.Join(h.home, ".codex", "hooks.json")
	want := map[string]string{"sessionStart": installedCommand(t, h, "SessionStart"), "stop": installedCommand(t, h, "Stop")}
	for _, l := range hooks {
		if want[l.EventName] == l.Command && l.SourcePath == file {
			if l.TrustStatus != "untrusted" {
				t.Errorf("%s: trust %q before the person trusted it", l.EventName, l.TrustStatus)
			}
			delete(want, l.EventName)
		}
	}
	if len(want) > 0 {
		t.Fatalf("codex does not list %v from %s; it lists %+v", want, file, hooks)
	}

	// A session, trust bypassed for this one run: the turn cannot reach
	// the model offline, but SessionStart has run by then.
	cmd = offline(ctx, t, h.clone, h.env, codex, "exec", "--dangerously-bypass-hook-trust", "--skip-git-repo-check", "say hi")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var seen strings.Builder
	result := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if rest, ok := strings.CutPrefix(sc.Text(), "hook: SessionStart "); ok {
			result = rest
			break
		}
	}
	stop(cmd)
	r.Close()
	if result != "Completed" {
		t.Errorf("codex did not complete handoff's SessionStart hook (%q):\n%s", result, seen.String())
	}
	sessions, _ := os.ReadDir(filepath.Join(h.home, ".local", "state", "handoff", "sessions"))
	if len(sessions) != 1 {
		t.Errorf("the hook recorded %d session starts, want 1", len(sessions))
	}
}

// TestRealClaudeLoadsHooks: Claude Code (npm @anthropic-ai/claude-code)
// loads the settings.json handoff installed, offline and without a
// login: a print-mode session runs the SessionStart hook before it stops
// for want of a login, validates its answer and takes the notes as
// additional context (its debug log says so).
func TestRealClaudeLoadsHooks(t *testing.T) {
	claude := harnessCLI(t, "claude")
	h, _ := realHost(t, "claude")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	debug := filepath.Join(t.TempDir(), "debug.txt")
	cmd := offline(ctx, t, h.clone, h.env, claude, "-p", "say hi", "--debug-file", debug)
	out, _ := cmd.CombinedOutput() // exits 1: not logged in
	log, err := os.ReadFile(debug)
	if err != nil {
		t.Fatalf("claude wrote no debug log (%v):\n%s", err, out)
	}
	for _, want := range []string{"Successfully parsed and validated hook JSON output",
		"Hook SessionStart (" + installedCommand(t, h, "SessionStart") + ") provided additionalContext"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("claude's debug log lacks %q:\n%s\n%s", want, out, log)
		}
	}
}
