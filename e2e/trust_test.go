package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// TestHostsTrust: an unknown host key fails the host with its fingerprint
// and the fix; `hosts trust` refuses without a terminal or --yes, and with
// --yes appends the key, after which the sync pulls. Invariant: a key is
// never trusted silently.
func TestHostsTrust(t *testing.T) {
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	inbox := filepath.Join(dir, "laptop/code/app/.claude/memory-handoffs")
	mustWrite(t, filepath.Join(inbox, "d.md"), docHandoff("TOOLS.md", "- trusted"))
	kh := filepath.Join(dir, "known_hosts")
	mf := filepath.Join(dir, "writers.yaml")
	mustWrite(t, mf, fmt.Sprintf(`version: 1
workspace: %s
defaults: {settle: 0s}
hosts:
  - name: laptop
    transport: ssh
    ssh: {host: %s, port: %d, user: %s, identity_file: %s, known_hosts: %s}
    discover: [{root: %s}]
`, filepath.Join(dir, "ws"), srv.Host, srv.Port, srv.User, srv.IdentityFile, kh, filepath.Join(dir, "laptop/code")))
	mustMkdir(t, home)
	initWorkspace(t, filepath.Join(dir, "ws"))
	env := []string{"HOME=" + home, "SSH_AUTH_SOCK="}
	run := func(args ...string) (int, string) {
		cmd := exec.Command(binary(), args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader("y\n")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	fp := ssh.FingerprintSHA256(srv.HostKeys[0])

	code, out := run("sync", "--manifest", mf)
	if code != 1 || !strings.Contains(out, "SHA256:") || !strings.Contains(out, "hosts trust") {
		t.Fatalf("sync with an unknown key: exit %d, want 1 naming the fingerprint and the fix:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(inbox, "d.md")); err != nil {
		t.Fatal("the handoff moved although the host was not trusted")
	}

	code, out = run("hosts", "trust", "laptop", "--manifest", mf)
	if code != 2 || !strings.Contains(out, fp) || !strings.Contains(out, "--yes") {
		t.Fatalf("trust without a terminal: exit %d, want 2 showing %s:\n%s", code, fp, out)
	}
	if b, _ := os.ReadFile(kh); len(b) != 0 {
		t.Fatalf("known_hosts written without confirmation: %q", b)
	}

	code, out = run("hosts", "trust", "laptop", "--yes", "--manifest", mf)
	if code != 0 || !strings.Contains(out, "added to "+kh) {
		t.Fatalf("trust --yes: exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile(kh); !strings.Contains(string(b), srv.Addr) && !strings.Contains(string(b), fmt.Sprintf("[%s]:%d", srv.Host, srv.Port)) {
		t.Fatalf("known_hosts = %q", b)
	}
	if code, out = run("hosts", "trust", "laptop", "--yes", "--manifest", mf); code != 0 || !strings.Contains(out, "already trusted") {
		t.Fatalf("second trust: exit %d:\n%s", code, out)
	}

	code, out = run("sync", "--manifest", mf)
	if code != 0 || !strings.Contains(out, "Routed 1") {
		t.Fatalf("sync after trust: exit %d:\n%s", code, out)
	}
}
