package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
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

// TestOverlappingSyncExits75: while one sync holds the lock (kept busy by a
// host that accepts TCP and never speaks), a second sync exits 75 at once
// and applies nothing; the first finishes the job. Invariant: one ingester
// at a time, nothing applied twice.
func TestOverlappingSyncExits75(t *testing.T) {
	w := newWorld(t)
	markers := w.mixed()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	_, key := sshdtest.NewEd25519(t)
	idFile := filepath.Join(w.dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, idFile, key, "")
	b, _ := os.ReadFile(w.manifest)
	mustWrite(t, w.manifest, string(b)+fmt.Sprintf(`  - name: silent
    transport: ssh
    timeout: 4s
    ssh: {host: 127.0.0.1, port: %d, connect_timeout: 3s, known_hosts: %s, identity_file: %s}
    inboxes: [/nonexistent/.claude/memory-handoffs]
`, port, filepath.Join(w.dir, "known_hosts"), idFile))

	first := exec.Command(binary(), "sync", "--manifest", w.manifest)
	var firstOut strings.Builder
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(w.ws, ".handoff/lock")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if lockPID(lockFile) == fmt.Sprint(first.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("first run never took the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	code, out := w.sync()
	if code != 75 || !strings.Contains(out, fmt.Sprintf("pid %d", first.Process.Pid)) {
		t.Fatalf("second run: exit %d, want 75 naming pid %d:\n%s", code, first.Process.Pid, out)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("second run took %v; it must exit at once", time.Since(start))
	}
	err = first.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("first run: %v, want exit 1 (the silent host fails):\n%s", err, firstOut.String())
	}
	if !strings.Contains(firstOut.String(), "host silent") {
		t.Fatalf("first run did not report the silent host:\n%s", firstOut.String())
	}
	w.checkConverged(markers, mixedResults)
}

// lockPID is the pid a run wrote into the lock file: its first line (the
// command and the time follow).
func lockPID(path string) string {
	b, _ := os.ReadFile(path)
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first)
}
