package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
)

// TestLockHeldExits75: a run that finds the lock held exits 75 at once with
// a clear message, and touches no inbox.
func TestLockHeldExits75(t *testing.T) {
	w := newWorld(t)
	w.mixed()
	mustMkdir(t, filepath.Join(w.ws, ".handoff"))
	fl := flock.New(filepath.Join(w.ws, ".handoff/lock"))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer fl.Unlock()
	start := time.Now()
	code, out := w.sync()
	if code != 75 {
		t.Fatalf("exit %d, want 75:\n%s", code, out)
	}
	if !strings.Contains(out, "another handoff run holds the workspace lock") || !strings.Contains(out, "hint: ") {
		t.Fatalf("message %q", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to give up; it must exit at once", d)
	}
	if n := len(mustGlob(t, filepath.Join(w.inboxes[0], "*.md"))); n != 8 {
		t.Fatalf("%d handoffs left in the inbox, want all 8 untouched", n)
	}
}

// TestConcurrentSyncs starts two syncs at once, several times over a large
// backlog. Invariant: every run exits 0 or 75, and nothing is applied twice.
func TestConcurrentSyncs(t *testing.T) {
	w := newWorld(t)
	markers := w.mixed()
	for i := 0; i < 60; i++ {
		m := fmt.Sprintf("marker-bulk-%03d", i)
		mustWrite(t, filepath.Join(w.inboxes[i%2], fmt.Sprintf("bulk-%03d.md", i)), docHandoff("TOOLS.md", "- "+m))
		markers["TOOLS.md"] = append(markers["TOOLS.md"], m)
	}
	results := map[string]string{}
	for k, v := range mixedResults {
		results[k] = v
	}
	for i := 0; i < 60; i++ {
		results[fmt.Sprintf("bulk-%03d.md", i)] = "routed"
	}
	codes := make([]int, 2)
	outs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], outs[i] = runBinary(t, "sync", "--manifest", w.manifest)
		}()
	}
	wg.Wait()
	zero := 0
	for i, c := range codes {
		if c != 0 && c != 75 {
			t.Fatalf("run %d exited %d:\n%s", i, c, outs[i])
		}
		if c == 0 {
			zero++
		}
	}
	if zero == 0 {
		t.Fatalf("neither concurrent run succeeded: %v", outs)
	}
	if code, out := w.sync(); code != 0 {
		t.Fatalf("final run exited %d:\n%s", code, out)
	}
	w.checkConverged(markers, results)
}

func runBinary(t *testing.T, args ...string) (int, string) {
	cmd := exec.Command(binary(), args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Error(err)
		return -1, ""
	}
	return 0, string(out)
}

func mustGlob(t *testing.T, pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
