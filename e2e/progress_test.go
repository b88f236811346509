package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/gofrs/flock"
)

// twoHosts is a world with a second local host, beta, holding one handoff.
func twoHosts(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.mixed()
	beta := filepath.Join(w.dir, "beta/.claude/memory-handoffs")
	mustWrite(t, filepath.Join(beta, "b1.md"), docHandoff("USER.md", "- from beta"))
	b, err := os.ReadFile(w.manifest)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, w.manifest, string(b)+fmt.Sprintf("  - name: beta\n    transport: local\n    inboxes: [%s]\n", beta))
	return w
}

// runOnPTY runs handoff with stdin, stdout and stderr on a pseudo-terminal
// of 120 columns and returns its exit code and everything it wrote, with the
// terminal's CRLF turned back into LF.
func runOnPTY(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary(), args...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&out, f) // ends with EIO once the child and its workers are gone
		close(copied)
	}()
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err = cmd.Wait()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal never closed")
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, strings.ReplaceAll(out.String(), "\r\n", "\n")
}

var summaryRE = regexp.MustCompile(`(?m)^Pulled \d+  Promoted \d+  Routed \d+  Review \d+  Malformed \d+  Duplicate \d+  Rejected \d+  Deferred \d+$`)

// TestProgressOnTerminal: on a terminal, sync shows a line per host that is
// redrawn in place and ends in each host's final state, then the summary.
func TestProgressOnTerminal(t *testing.T) {
	w := twoHosts(t)
	code, out := runOnPTY(t, "sync", "--manifest", w.manifest)
	if code != 0 {
		t.Fatalf("exit %d:\n%q", code, out)
	}
	if !strings.Contains(out, "\x1b[2K") {
		t.Fatalf("no live progress on a terminal:\n%q", out)
	}
	for _, re := range []string{`canonical\s+done\s+inboxes 2\s+pulled 10\b`, `beta\s+done\s+inboxes 1\s+pulled 1\b`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no final state matching %s in:\n%q", re, out)
		}
	}
	sums := summaryRE.FindAllStringIndex(out, -1)
	if len(sums) != 1 {
		t.Fatalf("want the summary once, got %d times:\n%q", len(sums), out)
	}
	if last := strings.LastIndex(out, "\x1b["); last > sums[0][0] {
		t.Fatalf("progress drawn after the summary:\n%q", out)
	}
	if !strings.HasPrefix(out[sums[0][0]:], "Pulled 11  Promoted 3  Routed 5  Review 1  Malformed 1  Duplicate 1") {
		t.Fatalf("summary %q", out[sums[0][0]:])
	}
}

// TestTableOnTerminal: on a terminal, sync ends with the table of what
// the run decided and the receipt's path, after the summary; --table=false
// leaves the summary last.
func TestTableOnTerminal(t *testing.T) {
	w := twoHosts(t)
	code, out := runOnPTY(t, "sync", "--manifest", w.manifest)
	if code != 0 {
		t.Fatalf("exit %d:\n%q", code, out)
	}
	sum := summaryRE.FindStringIndex(out)
	head := regexp.MustCompile(`(?m)^HOST +NAME +RESULT +REASON +WORKSPACE PATH$`).FindStringIndex(out)
	if sum == nil || head == nil || head[0] < sum[1] {
		t.Fatalf("no table after the summary:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^beta +b1\.md +routed +- +USER\.md$`).MatchString(out) {
		t.Errorf("no row for beta's b1.md:\n%s", out)
	}
	if !regexp.MustCompile(`^Receipt: .*/\.handoff/receipts/[0-9TZ]+-[0-9a-f]+\.json$`).MatchString(lastLine(out)) {
		t.Errorf("the receipt's path is not the last line:\n%s", out)
	}

	w = twoHosts(t)
	code, out = runOnPTY(t, "sync", "--manifest", w.manifest, "--table=false")
	if code != 0 || strings.Contains(out, "Receipt: ") || !summaryRE.MatchString(lastLine(out)) {
		t.Fatalf("--table=false: exit %d, want the summary last:\n%s", code, out)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestNoProgressWhenSilencedOnTerminal: even on a terminal, --json prints
// the receipt alone, --quiet prints nothing, and --verbose logs instead of
// redrawing; none of them writes a control sequence.
func TestNoProgressWhenSilencedOnTerminal(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		w := twoHosts(t)
		code, out := runOnPTY(t, "sync", "--manifest", w.manifest, "--json")
		if code != 0 || strings.Contains(out, "\x1b") {
			t.Fatalf("exit %d, output:\n%q", code, out)
		}
		var r struct {
			SchemaVersion int `json:"schema_version"`
			Counts        struct{ Pulled int }
			Hosts         []struct{ Name, Outcome string }
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("--json output is not one JSON document: %v\n%s", err, out)
		}
		if r.SchemaVersion != 1 || r.Counts.Pulled != 11 || len(r.Hosts) != 2 {
			t.Fatalf("receipt: %+v", r)
		}
	})
	t.Run("quiet", func(t *testing.T) {
		w := twoHosts(t)
		code, out := runOnPTY(t, "sync", "--manifest", w.manifest, "--quiet")
		if code != 0 || out != "" {
			t.Fatalf("exit %d, want 0 and no output at all:\n%q", code, out)
		}
		if _, err := os.Stat(filepath.Join(w.ws, ".handoff/receipts/latest.json")); err != nil {
			t.Fatalf("--quiet run did not do its job: %v", err)
		}
	})
	t.Run("verbose", func(t *testing.T) {
		w := twoHosts(t)
		code, out := runOnPTY(t, "sync", "--manifest", w.manifest, "--verbose")
		if code != 0 || strings.Contains(out, "\x1b") {
			t.Fatalf("exit %d, output:\n%q", code, out)
		}
		if !strings.Contains(out, "msg=\"run finished\"") || len(summaryRE.FindAllString(out, -1)) != 1 {
			t.Fatalf("--verbose should log each step and print the summary once:\n%s", out)
		}
	})
}

// TestPruneLockHeldExits75: prune takes the workspace lock like sync; a
// prune that finds it held exits 75 at once and removes nothing, dry run or
// not.
func TestPruneLockHeldExits75(t *testing.T) {
	w := newWorld(t)
	w.mixed()
	if code, out := w.sync(); code != 0 {
		t.Fatalf("sync: exit %d\n%s", code, out)
	}
	processed := mustGlob(t, filepath.Join(w.inboxes[0], "processed/*.md"))
	// A year on, by the tests' clock, everything archived is old.
	later := []string{"HANDOFF_NOW=" + time.Now().Add(365*24*time.Hour).UTC().Format(time.RFC3339)}
	fl := flock.New(filepath.Join(w.ws, ".handoff/lock"))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer fl.Unlock()
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		start := time.Now()
		code, out := w.run(later, append([]string{"prune", "--older-than", "30d", "--manifest", w.manifest}, extra...)...)
		if code != 75 || !strings.Contains(out, "another handoff run holds the workspace lock") || !strings.Contains(out, "hint: ") {
			t.Fatalf("prune %v: exit %d, want 75 with a hint:\n%s", extra, code, out)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v to give up; it must exit at once", d)
		}
	}
	if n := len(mustGlob(t, filepath.Join(w.inboxes[0], "processed/*.md"))); n != len(processed) || n == 0 {
		t.Fatalf("%d processed handoffs left, want all %d", n, len(processed))
	}
	fl.Unlock()
	all := 0
	for _, in := range w.inboxes {
		all += len(mustGlob(t, filepath.Join(in, "processed/*.md")))
	}
	code, out := w.run(later, "prune", "--older-than", "30d", "--manifest", w.manifest)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("canonical: removed %d processed handoffs", all)) {
		t.Fatalf("prune after the lock was released: exit %d\n%s", code, out)
	}
}
