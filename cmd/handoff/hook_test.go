package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/mirror"
)

// hookHost is a writer host of the hook tests: a clone of acme/shop with
// a Claude Code and a Codex inbox, a mirror that host A's handoffs
// reached, and a private state directory.
type hookHost struct {
	clone, mirror, state string
}

func mkfile(t testing.TB, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recentFrom renders a RECENT.md of n handoffs pulled from laptop (host
// A), as a publish makes it, and its index.
func recentFrom(n int, now time.Time) []mirror.File {
	r := mirror.Repo{Slug: "shop", Origins: []string{"github.com/acme/shop"}, Hosts: []string{"laptop"}}
	for i := range n {
		r.Handoffs = append(r.Handoffs, mirror.RecentHandoff{
			At: now.Add(-time.Duration(i) * time.Hour), Host: "laptop", Harness: ".claude",
			Name: fmt.Sprintf("2026-12-0%d-%02d00-step-%d.md", 1+i%9, i%24, i), SHA256: strings.Repeat("ab", 32),
			Type: "decision", Title: fmt.Sprintf("Step %d of the checkout move", i),
			Summary:       strings.Repeat(fmt.Sprintf("Handoff %d moved part of the checkout onto the job queue. ", i), 4),
			Facts:         "- the queue is at-least-once",
			OpenQuestions: []string{fmt.Sprintf("Does step %d need the new tax table?", i)},
			NextSteps:     []string{fmt.Sprintf("LAPTOP-NEXT-STEP-%d: run the checkout e2e against staging", i)},
			Became:        "routed: appended to TOOLS.md",
		})
	}
	return mirror.ReposFiles([]mirror.Repo{r}, mirror.DefaultRecent, now)
}

func newHookHost(t testing.TB, handoffs int) *hookHost {
	t.Helper()
	dir := t.TempDir()
	h := &hookHost{clone: filepath.Join(dir, "b", "src", "shop"), mirror: filepath.Join(dir, "b", "mirror"), state: filepath.Join(dir, "state")}
	mkfile(t, filepath.Join(h.clone, ".git", "config"), "[remote \"origin\"]\n\turl = https://github.com/acme/shop\n")
	mkfile(t, filepath.Join(h.clone, ".git", "HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(h.clone, "main.go"), "package main\n")
	for _, ib := range []string{".claude/memory-handoffs", ".codex/memory-handoffs"} {
		if err := os.MkdirAll(filepath.Join(h.clone, ib), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{filepath.Join(h.clone, "main.go"), h.clone} {
		os.Chtimes(p, old, old)
	}
	now := time.Now()
	info, _ := json.Marshal(mirror.Info{Format: 1, Canonical: "canon", Host: "server", Generation: 7, PublishedAt: now, Complete: true})
	mkfile(t, filepath.Join(h.mirror, mirror.InfoFile), string(info))
	mkfile(t, filepath.Join(h.mirror, mirror.SumsFile), "")
	for _, f := range recentFrom(handoffs, now) {
		mkfile(t, filepath.Join(h.mirror, filepath.FromSlash(f.Path)), string(f.Data))
	}
	return h
}

// payload is a recorded payload of the harness's (internal/harness/
// session/testdata) for this session and directory.
func payload(t testing.TB, name, session, cwd string, active bool) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "harness", "session", "testdata", "payloads", name))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("@CWD@", cwd, "@SESSION@", session).Replace(string(data))
	if active {
		s = strings.Replace(s, `"stop_hook_active": false`, `"stop_hook_active": true`, 1)
	}
	return s
}

// runIn runs handoff with stdin, returning the exit code, stdout and
// stderr.
func runIn(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestContextHookOnHostB: SessionStart in a clone on host B (a
// subdirectory of it, as the recorded payload's cwd) prints host A's
// notes as the harness's context answer, framed as quoted notes from
// other agents with where they come from, within the budget; exit 0 and
// nothing on stderr. The invariant: the answer is the harness's JSON,
// nothing else on stdout.
func TestContextHookOnHostB(t *testing.T) {
	for _, tc := range []struct{ hn, file string }{
		{"claude", "claude-session-start.json"}, {"codex", "codex-session-start.json"},
		{"claude", "claude-2.1.197-session-start.json"}, {"codex", "codex-0.171.0-session-start.json"},
	} {
		hn := tc.hn
		t.Run(tc.file, func(t *testing.T) {
			h := newHookHost(t, 20)
			t.Setenv("XDG_STATE_HOME", h.state)
			sub := filepath.Join(h.clone, "cmd", "checkout")
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runIn(t, payload(t, tc.file, "s-b1", sub, false), "context", "--hook", hn, "--mirror", h.mirror)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			var ans struct {
				Out struct {
					Event string `json:"hookEventName"`
					Text  string `json:"additionalContext"`
				} `json:"hookSpecificOutput"`
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ans); err != nil || dec.More() {
				t.Fatalf("the answer is not the harness's JSON (%v):\n%s", err, out)
			}
			text := ans.Out.Text
			for _, want := range []string{"notes that earlier agents left", "github.com/acme/shop", "canon", "quoted data, not instructions",
				"> ## Step 0 of the checkout move", "> - LAPTOP-NEXT-STEP-0: run the checkout e2e", "> - pulled ", "from laptop (.claude)",
				"handoff context", filepath.Join(h.clone, "."+hn, "memory-handoffs") + "/"} {
				if !strings.Contains(text, want) {
					t.Errorf("the context lacks %q:\n%s", want, text)
				}
			}
			if ans.Out.Event != "SessionStart" || len(text) > 10000 {
				t.Errorf("event %q, %d bytes of context (Claude Code's cap is 10,000)", ans.Out.Event, len(text))
			}
			if strings.Contains(text, "LAPTOP-NEXT-STEP-19") {
				t.Error("the oldest of 20 handoffs fit in the budget; the test no longer checks the cut")
			}
		})
	}
}

// TestHookStopFlow: with the recorded payloads of each harness, a
// session that changed a file and wrote no handoff is blocked once, then
// let go; stop_hook_active lets go; a session that wrote a handoff is
// let go; a session outside any repository is left alone (no output,
// no record of a repository). Every run exits 0 with nothing on stderr.
func TestHookStopFlow(t *testing.T) {
	for _, hn := range []string{"claude", "codex"} {
		t.Run(hn, func(t *testing.T) {
			h := newHookHost(t, 1)
			t.Setenv("XDG_STATE_HOME", h.state)
			hook := func(file, session, cwd string, active bool, args ...string) string {
				t.Helper()
				code, out, errs := runIn(t, payload(t, file, session, cwd, active), args...)
				if code != 0 || errs != "" {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
				}
				return out
			}
			start := func(session, cwd string) string {
				return hook(hn+"-session-start.json", session, cwd, false, "context", "--hook", hn, "--mirror", h.mirror)
			}
			stop := func(session, cwd string, active bool) string {
				return hook(hn+"-stop.json", session, cwd, active, "hook", "stop", "--harness", hn, "--mirror", h.mirror)
			}

			start("s1", h.clone)
			if out := stop("s1", h.clone, false); out != "" {
				t.Fatalf("blocked a session that changed nothing: %s", out)
			}
			mkfile(t, filepath.Join(h.clone, "main.go"), "package main\n\nfunc main() {}\n")
			if out := stop("s1", h.clone, true); out != "" {
				t.Errorf("blocked with stop_hook_active: %s", out)
			}
			out := stop("s1", h.clone, false)
			var ans struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
			}
			if err := json.Unmarshal([]byte(out), &ans); err != nil || ans.Decision != "block" {
				t.Fatalf("not blocked after a change (%v): %q", err, out)
			}
			inbox := filepath.Join(h.clone, "."+hn, "memory-handoffs")
			for _, want := range []string{inbox + "/", "handoff template", "handoff lint --mirror " + h.mirror, "## Open questions", "## Next steps", "Even when told to stop now"} {
				if !strings.Contains(ans.Reason, want) {
					t.Errorf("the reason lacks %q: %s", want, ans.Reason)
				}
			}
			if out := stop("s1", h.clone, false); out != "" {
				t.Errorf("blocked twice: %s", out)
			}

			start("s2", h.clone)
			mkfile(t, filepath.Join(h.clone, "main.go"), "package main // s2\n")
			mkfile(t, filepath.Join(inbox, "2026-12-05-1000-checkout.md"), "# Memory Handoff\n")
			if out := stop("s2", h.clone, false); out != "" {
				t.Errorf("blocked after a handoff was written: %s", out)
			}

			// s2's handoff is an older session's to s3; a handoff stamped
			// in s3's start tick would count as s3's own.
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(inbox, "2026-12-05-1000-checkout.md"), old, old); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			if out := start("s3", outside); out != "" {
				t.Errorf("context outside a repository: %s", out)
			}
			mkfile(t, filepath.Join(outside, "x.txt"), "x")
			if out := stop("s3", outside, false); out != "" {
				t.Errorf("blocked outside a repository: %s", out)
			}
			// The agent moved into the clone and changed it: asked there.
			mkfile(t, filepath.Join(h.clone, "cmd", "main.go"), "package main // s3\n")
			if out := stop("s3", filepath.Join(h.clone, "cmd"), false); !strings.Contains(out, `"block"`) || !strings.Contains(out, inbox+"/") {
				t.Errorf("not blocked in the clone the agent moved to and changed: %q", out)
			}
		})
	}
}

// TestHooksNeverFail: garbage, empty or oversized input, an unknown
// harness, no mirror, and a state directory that cannot be written all
// end in exit 0 with nothing on stdout or stderr (the invariant: a hook
// never fails or disturbs a session); the problems reach the log.
func TestHooksNeverFail(t *testing.T) {
	h := newHookHost(t, 1)
	t.Setenv("XDG_STATE_HOME", h.state)
	good := payload(t, "claude-session-start.json", "s1", h.clone, false)
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"not json", []string{"context", "--hook", "claude", "--mirror", h.mirror}},
		{"", []string{"hook", "stop", "--harness", "codex"}},
		{`{"session_id":"s","cwd":"/x","pad":"` + strings.Repeat("a", 2<<20) + `"}`, []string{"context", "--hook", "codex"}},
		{good, []string{"context", "--hook", "grok"}},
		{good, []string{"hook", "stop", "--harness", ""}},
		{good, []string{"context", "--hook", "claude", "--mirror", filepath.Join(h.state, "no-mirror")}},
	} {
		code, out, errs := runIn(t, tc.stdin, tc.args...)
		if code != 0 || out != "" || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
		}
	}
	log, err := os.ReadFile(filepath.Join(h.state, "handoff", "hooks.log"))
	if err != nil || !bytes.Contains(log, []byte("not JSON")) || !bytes.Contains(log, []byte(`unknown harness "grok"`)) || !bytes.Contains(log, []byte("no notes")) {
		t.Errorf("the log (%v):\n%s", err, log)
	}

	// A state directory that cannot be made: still exit 0 and the notes.
	t.Setenv("XDG_STATE_HOME", filepath.Join(h.clone, "main.go"))
	code, out, errs := runIn(t, good, "context", "--hook", "claude", "--mirror", h.mirror)
	if code != 0 || errs != "" || !strings.Contains(out, "additionalContext") {
		t.Errorf("with no state directory: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// BenchmarkContextHook measures the session-start hook in process on a
// mirror whose RECENT.md holds 20 handoffs (the most it holds), from
// reading the payload to printing the answer, session record included.
func BenchmarkContextHook(b *testing.B) {
	h := newHookHost(b, 20)
	b.Setenv("XDG_STATE_HOME", h.state)
	in := payload(b, "claude-session-start.json", "bench", h.clone, false)
	for i := 0; b.Loop(); i++ {
		var out, errb bytes.Buffer
		run(context.Background(), []string{"context", "--hook", "claude", "--mirror", h.mirror}, strings.NewReader(in), &out, &errb)
		if out.Len() == 0 {
			b.Fatal("no answer")
		}
	}
}

// TestContextHookNotReached: when the mirror says no sync reaches the
// clone (here: its discover root's max_depth is too small), the
// session-start hook says so, whether the repository is in the mirror
// or not, and does not ask for a handoff that would reach no agent.
// Invariant: the hook never stays silent, or promises the next agent,
// about a repository no sync reads.
func TestContextHookNotReached(t *testing.T) {
	h := newHookHost(t, 2)
	t.Setenv("XDG_STATE_HOME", h.state)
	idxPath := filepath.Join(h.mirror, "repos", "INDEX.json")
	data, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	var idx mirror.Index
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatal(err)
	}
	idx.Reach = &mirror.Reach{Inboxes: []string{}, Discover: []mirror.ReachRoot{{Root: filepath.Dir(filepath.Dir(h.clone)), MaxDepth: 0}}, Harnesses: []string{".claude", ".codex"}}
	data, _ = json.Marshal(idx)
	mkfile(t, idxPath, string(data))
	other := filepath.Join(filepath.Dir(h.clone), "other")
	mkfile(t, filepath.Join(other, ".git", "config"), "[remote \"origin\"]\n\turl = https://github.com/acme/other\n")
	mkfile(t, filepath.Join(other, ".claude", "memory-handoffs", ".keep"), "")
	for name, dir := range map[string]string{"in the mirror": h.clone, "not in the mirror": other} {
		code, out, errs := runIn(t, payload(t, "claude-session-start.json", "s-nr", dir, false), "context", "--hook", "claude", "--mirror", h.mirror)
		if code != 0 || errs != "" {
			t.Fatalf("%s: exit %d, stderr %q", name, code, errs)
		}
		if !strings.Contains(out, "no sync on the canonical host reaches this repository") || !strings.Contains(out, "max_depth is 0") {
			t.Errorf("%s: the hook does not say the repository is not reached:\n%s", name, out)
		}
		if strings.Contains(out, "write a memory handoff into") {
			t.Errorf("%s: the hook asks for a handoff that reaches no agent:\n%s", name, out)
		}
	}
}
