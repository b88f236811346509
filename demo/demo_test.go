package demo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/receipts"
)

var (
	headerRE  = regexp.MustCompile(`(?m)^handoff demo: everything happens in (\S+)$`)
	summaryRE = regexp.MustCompile(`(?m)^Pulled (\d+)  Promoted (\d+)  Routed (\d+)  Review (\d+)  Malformed (\d+)  Duplicate (\d+)  Rejected (\d+)  Deferred (\d+)$`)
	receiptRE = regexp.MustCompile(`(?m)^Receipt: (\S+)$`)
)

// TestRun runs the demo in-process twice, keeping its directory the first
// time, and checks that it shows every outcome, that it leaves nothing
// behind, and that the user's HOME, ~/.ssh/config and ssh-agent play no
// part.
func TestRun(t *testing.T) {
	home := t.TempDir()
	// An ssh_config that breaks every dial if the demo reads it.
	writeFile(t, filepath.Join(home, ".ssh", "config"), "Host *\n  ProxyJump nowhere.invalid\n  IdentityFile ~/.ssh/missing\n")
	t.Setenv("HOME", home)
	homeBefore := snapshot(t, home)

	agentUses := fakeAgent(t)

	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Kept: the receipt it names exists and agrees with the summary.
	var out bytes.Buffer
	if err := Run(ctx, &out, Options{Keep: true}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	dir := match(t, headerRE, text)[1]
	t.Cleanup(func() { os.RemoveAll(dir) })
	if filepath.Dir(dir) != tmp {
		t.Errorf("demo directory %s is not in TMPDIR %s", dir, tmp)
	}
	counts := match(t, summaryRE, text)
	for i, name := range []string{"Pulled", "Promoted", "Routed", "Review", "Malformed", "Duplicate", "Rejected"} {
		if n, _ := strconv.Atoi(counts[i+1]); n < 1 {
			t.Errorf("%s %d, want at least 1", name, n)
		}
	}
	if counts[8] != "0" {
		t.Errorf("Deferred %s, want 0 (the handoffs are older than settle)", counts[8])
	}
	receiptPath := match(t, receiptRE, text)[1]
	if !strings.HasPrefix(receiptPath, dir+string(filepath.Separator)) {
		t.Errorf("receipt %s is outside the demo directory %s", receiptPath, dir)
	}
	r, err := receipts.Read(receiptPath)
	if err != nil {
		t.Fatalf("the printed receipt: %v", err)
	}
	if r.Outcome != receipts.OutcomeOK {
		t.Errorf("receipt outcome %q, want ok", r.Outcome)
	}
	if got := strings.TrimSuffix(r.Summary(), "\n"); !strings.Contains(text, got) {
		t.Errorf("output lacks the receipt's summary %q", got)
	}
	for _, want := range []string{"memory/cards/notes-sync-merge.md", "rules/git.md", "TOOLS.md", "USER.md", "missing-expected-sha256", "parse-error", "oversize", "Kept " + dir} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The loop: the laptop's mirror holds canonical memory, and its
	// SHA256SUMS checks out there.
	if !regexp.MustCompile(`Mirror on laptop: ok, generation 1, \d+ file\(s\) sent`).MatchString(text) {
		t.Error("output lacks the laptop's mirror")
	}
	mdir := filepath.Join(dir, filepath.FromSlash(laptopMirror))
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = mdir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c in the laptop's mirror: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}

	// Not kept: its directory is gone, and nothing else was left in TMPDIR.
	out.Reset()
	if err := Run(ctx, &out, Options{}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	dir2 := match(t, headerRE, out.String())[1]
	if _, err := os.Lstat(dir2); !os.IsNotExist(err) {
		t.Errorf("demo directory %s still exists after Run without Keep (%v)", dir2, err)
	}
	if !strings.Contains(out.String(), "Removed "+dir2) {
		t.Errorf("output does not say the directory was removed:\n%s", out.String())
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if filepath.Join(tmp, e.Name()) != dir {
			t.Errorf("left behind in TMPDIR: %s", e.Name())
		}
	}

	if got := snapshot(t, home); got != homeBefore {
		t.Errorf("HOME changed:\nbefore:\n%s\nafter:\n%s", homeBefore, got)
	}
	if n := agentUses.Load(); n != 0 {
		t.Errorf("the ssh-agent at $SSH_AUTH_SOCK was contacted %d times", n)
	}
}

// TestServerRefuses checks that the server authenticates only its client
// key and grants nothing but SFTP.
func TestServerRefuses(t *testing.T) {
	client := newSigner(t)
	srv, err := StartServer(client.PublicKey(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if host, _, _ := net.SplitHostPort(srv.Addr); host != "127.0.0.1" {
		t.Errorf("listens on %s, want 127.0.0.1", srv.Addr)
	}
	dial := func(key ssh.Signer) (*ssh.Client, error) {
		return ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
			User:            "anyone",
			Auth:            []ssh.AuthMethod{ssh.PublicKeys(key)},
			HostKeyCallback: ssh.FixedHostKey(srv.HostKey),
			Timeout:         5 * time.Second,
		})
	}
	if c, err := dial(newSigner(t)); err == nil {
		c.Close()
		t.Error("a key other than the client key was accepted")
	}
	c, err := dial(client)
	if err != nil {
		t.Fatalf("client key refused: %v", err)
	}
	defer c.Close()

	for _, req := range []struct {
		name string
		do   func(*ssh.Session) error
	}{
		{"exec", func(s *ssh.Session) error { return s.Start("id") }},
		{"shell", func(s *ssh.Session) error { return s.Shell() }},
		{"pty-req", func(s *ssh.Session) error { return s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}) }},
		{"other subsystem", func(s *ssh.Session) error { return s.RequestSubsystem("netconf") }},
	} {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := req.do(s); err == nil {
			t.Errorf("%s was granted", req.name)
		}
		s.Close()
	}
	if conn, err := c.Dial("tcp", srv.Addr); err == nil {
		conn.Close()
		t.Error("direct-tcpip forwarding was granted")
	}
	if ln, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
		t.Error("tcpip-forward was granted")
	}

	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatalf("sftp refused: %v", err)
	}
	defer sc.Close()
	if _, err := sc.Getwd(); err != nil {
		t.Errorf("sftp: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func match(t *testing.T, re *regexp.Regexp, s string) []string {
	t.Helper()
	m := re.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("output does not match %s:\n%s", re, s)
	}
	return m
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every path under dir with its size and mtime.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fakeAgent listens at a new $SSH_AUTH_SOCK and counts connections.
func fakeAgent(t *testing.T) *atomic.Int64 {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	t.Setenv("SSH_AUTH_SOCK", sock)
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
