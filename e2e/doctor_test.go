package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// doctorReport is `handoff doctor --json` as a script reads it.
type doctorReport struct {
	Checks []struct {
		Scope, Name, Status, Message, Hint string
		Inbox                              *struct {
			Pending, Processed, Malformed int
			RejectedCount                 int `json:"rejected_count"`
			Rejected                      []string
		}
	}
	OK bool
}

func decodeDoctor(t *testing.T, r sshRun) doctorReport {
	t.Helper()
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	return rep
}

// lineAfter returns the line that follows the first line starting with
// prefix, failing the test when there is none.
func lineAfter(t *testing.T, out, prefix string) (string, string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) && i+1 < len(lines) {
			return l, lines[i+1]
		}
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, out)
	return "", ""
}

// closedPort returns a port on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestDoctorUnreachableHost: an ssh host on a port where nothing listens
// fails doctor with a [fail] line for that host and a hint under it, exit
// 1, well within the connect deadline; the local host is still checked and
// --json says the same.
func TestDoctorUnreachableHost(t *testing.T) {
	w := newWorld(t)
	port := closedPort(t)
	_, key := sshdtest.NewEd25519(t)
	idFile := filepath.Join(w.dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, idFile, key, "")
	b, _ := os.ReadFile(w.manifest)
	mustWrite(t, w.manifest, string(b)+fmt.Sprintf(`  - name: gone
    transport: ssh
    ssh: {host: 127.0.0.1, port: %d, known_hosts: %s, identity_file: %s}
    inboxes: [/nonexistent/.claude/memory-handoffs]
`, port, filepath.Join(w.dir, "known_hosts"), idFile))
	env := childEnv(t.TempDir(), "XDG_RUNTIME_DIR=")

	r := runHandoff(t, env, "doctor", "--manifest", w.manifest)
	if r.code != 1 {
		t.Fatalf("doctor with an unreachable host: want exit 1\n%s", r)
	}
	line, hint := lineAfter(t, r.stdout, "[fail] host gone: ")
	if !strings.Contains(line, "unreachable: ") || !strings.Contains(line, "connection refused") {
		t.Errorf("fail line %q does not say why", line)
	}
	if !strings.HasPrefix(hint, "  hint: ") || !strings.Contains(hint, fmt.Sprintf("ssh -p %d 127.0.0.1", port)) {
		t.Errorf("no usable hint under the fail line: %q", hint)
	}
	if !strings.Contains(r.stdout, "[ok] host canonical: reachable (local)\n") {
		t.Errorf("the local host was not checked:\n%s", r.stdout)
	}
	if r.elapsed > 20*time.Second {
		t.Errorf("doctor took %v", r.elapsed)
	}
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}

	r = runHandoff(t, env, "doctor", "--manifest", w.manifest, "--json")
	rep := decodeDoctor(t, r)
	if r.code != 1 || rep.OK {
		t.Fatalf("--json: want exit 1 and ok false\n%s", r)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Scope == "host gone" {
			found = true
			if c.Name != "reachable" || c.Status != "fail" || c.Hint == "" {
				t.Errorf("host gone check %+v", c)
			}
		}
	}
	if !found {
		t.Errorf("no check for host gone: %s", r.stdout)
	}
}

// TestDoctorUnknownHostKey: a host whose key known_hosts does not hold
// fails with the fingerprint, and the hint is the one way to trust it.
func TestDoctorUnknownHostKey(t *testing.T) {
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	w := newWorld(t)
	remote := t.TempDir()
	mustMkdir(t, filepath.Join(remote, "code/app/.claude/memory-handoffs"))
	empty := filepath.Join(w.dir, "empty_known_hosts")
	mustWrite(t, empty, "")
	writeManifest(t, w.manifest, w.ws, hostYAML("laptop", sshBlock(srv, empty), nil, []string{filepath.Join(remote, "code")}))
	r := runHandoff(t, childEnv(t.TempDir(), "XDG_RUNTIME_DIR="), "doctor", "--manifest", w.manifest)
	if r.code != 1 {
		t.Fatalf("want exit 1\n%s", r)
	}
	line, hint := lineAfter(t, r.stdout, "[fail] host laptop: unreachable: ")
	if !strings.Contains(line, "SHA256:") || !strings.Contains(line, "unknown") {
		t.Errorf("fail line %q lacks the fingerprint", line)
	}
	if !strings.HasPrefix(hint, "  hint: ") || !strings.Contains(hint, "handoff hosts trust laptop") {
		t.Errorf("hint %q does not say how to trust the key", hint)
	}
}

// TestDoctorOverSSHWritesNothing: doctor and where against a real SSH
// host after a sync report the host's inbox (pending, processed,
// malformed, and the rejected file by name) and what became of each
// handoff. Invariant: neither writes anything, locally or on the host:
// both trees hash the same before and after.
func TestDoctorOverSSHWritesNothing(t *testing.T) {
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	w := newWorld(t)
	remote := t.TempDir()
	inbox := filepath.Join(remote, "code/app/.claude/memory-handoffs")
	mustWrite(t, filepath.Join(inbox, "doc.md"), docHandoff("TOOLS.md", "- over ssh"))
	mustWrite(t, filepath.Join(inbox, "junk.md"), "not a handoff\n")
	mustWrite(t, filepath.Join(inbox, "big.md"), docHandoff("TOOLS.md", strings.Repeat("x", 5000)))
	mustWrite(t, filepath.Join(w.inboxes[0], "local.md"), cardHandoff("create-card", "local.md", "L"))
	writeManifest(t, w.manifest, w.ws,
		hostYAML("canonical", "", nil, []string{filepath.Join(w.dir, "repos")}),
		hostYAML("laptop", sshBlock(srv, ""), nil, []string{filepath.Join(remote, "code")}, "max_file_size: 4KiB"))
	env := childEnv(t.TempDir(), "XDG_RUNTIME_DIR=")
	if r := runHandoff(t, env, "sync", "--manifest", w.manifest); r.code != 0 {
		t.Fatalf("sync:\n%s", r)
	}
	mustWrite(t, filepath.Join(inbox, "later.md"), docHandoff("TOOLS.md", "- later"))

	localBefore, remoteBefore := hashTree(t, w.dir), hashTree(t, remote)
	r := runHandoff(t, env, "doctor", "--manifest", w.manifest)
	if r.code != 0 {
		t.Fatalf("doctor on a healthy setup: want exit 0\n%s", r)
	}
	for _, want := range []string{
		"[ok] host laptop: reachable (ssh, ",
		"[ok] host canonical: reachable (local)\n",
		"[warn] host laptop: inbox " + inbox + ": 1 pending (oldest ",
		`, 1 processed, 1 malformed; 1 rejected (never read): "big.md"` + "\n",
		"[ok] workspace: lock free\n",
		"[ok] workspace: ledger passes integrity_check (3 source(s), 3 distinct handoff(s), 0 not ingested yet)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "[fail]") {
		t.Errorf("a fail on a healthy setup:\n%s", r.stdout)
	}
	rep := decodeDoctor(t, runHandoff(t, env, "doctor", "--manifest", w.manifest, "--json"))
	var counted bool
	for _, c := range rep.Checks {
		if c.Scope == "host laptop" && c.Name == "inbox" {
			counted = true
			if in := c.Inbox; in == nil || in.Pending != 1 || in.Processed != 1 || in.Malformed != 1 || in.RejectedCount != 1 || in.Rejected[0] != `"big.md"` {
				t.Errorf("laptop inbox %+v", c.Inbox)
			}
		}
	}
	if !counted || !rep.OK {
		t.Errorf("doctor --json: %+v", rep)
	}

	r = runHandoff(t, env, "where", "big.md", "--manifest", w.manifest)
	if r.code != 0 || !strings.Contains(r.stdout, "laptop:"+inbox+"/big.md\n") || !strings.Contains(r.stdout, "rejected (oversize): never read") {
		t.Errorf("where big.md:\n%s", r)
	}
	r = runHandoff(t, env, "where", "doc", "--manifest", w.manifest)
	if r.code != 0 || !strings.Contains(r.stdout, "laptop:"+inbox+"/doc.md\n") || !strings.Contains(r.stdout, "  target:      TOOLS.md\n") {
		t.Errorf("where doc:\n%s", r)
	}
	assertTreeUnchanged(t, "canonical host", localBefore, hashTree(t, w.dir))
	assertTreeUnchanged(t, "ssh host", remoteBefore, hashTree(t, remote))
}

// TestDoctorDuringRun: while a sync holds the lock (kept busy by a host
// that accepts TCP and never speaks), doctor names the holder's pid, reads
// the ledger the run has open, and where answers too.
func TestDoctorDuringRun(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.inboxes[0], "first.md"), docHandoff("TOOLS.md", "- first"))
	if code, out := w.sync(); code != 0 {
		t.Fatalf("first sync: %s", out)
	}
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
	_, key := sshdtest.NewEd25519(t)
	idFile := filepath.Join(w.dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, idFile, key, "")
	b, _ := os.ReadFile(w.manifest)
	mustWrite(t, w.manifest, string(b)+fmt.Sprintf(`  - name: silent
    transport: ssh
    timeout: 6s
    ssh: {host: 127.0.0.1, port: %d, connect_timeout: 5s, known_hosts: %s, identity_file: %s}
    inboxes: [/nonexistent/.claude/memory-handoffs]
`, ln.Addr().(*net.TCPAddr).Port, filepath.Join(w.dir, "known_hosts"), idFile))
	env := childEnv(t.TempDir(), "XDG_RUNTIME_DIR=")

	sync := exec.Command(binary(), "sync", "--manifest", w.manifest)
	sync.Env = env
	if err := sync.Start(); err != nil {
		t.Fatal(err)
	}
	defer sync.Wait()
	lockFile := filepath.Join(w.ws, ".handoff/lock")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if lockPID(lockFile) == fmt.Sprint(sync.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sync never took the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep := decodeDoctor(t, runHandoff(t, env, "doctor", "--manifest", w.manifest, "--json", "--workspace", w.ws))
	want := map[string]string{
		"lock":   fmt.Sprintf("lock held by `handoff sync` (pid %d) since ", sync.Process.Pid),
		"ledger": "ledger passes integrity_check",
	}
	for _, c := range rep.Checks {
		if m, ok := want[c.Name]; ok && c.Scope == "workspace" {
			if c.Status != "ok" || !strings.HasPrefix(c.Message, m) {
				t.Errorf("during a run: %+v, want ok %q", c, m)
			}
			delete(want, c.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("checks missing: %v in %+v", want, rep.Checks)
	}
	if r := runHandoff(t, env, "where", "first.md", "--manifest", w.manifest); r.code != 0 || !strings.Contains(r.stdout, "  result:      routed\n") {
		t.Errorf("where during a run:\n%s", r)
	}
}
