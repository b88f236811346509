package sshdtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// dial logs in with the server's own identity file and known_hosts.
func dial(t *testing.T, srv *Server) *ssh.Client {
	t.Helper()
	pem, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	hk, err := knownhosts.New(srv.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User:            srv.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hk,
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Both servers must serve SFTP on the real file system with the host keys
// and client key they advertise, and never run a command.
func TestServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *Server
	}{
		{"embedded", func(t *testing.T) *Server { return StartEmbedded(t, Options{ECDSAHostKey: true}) }},
		{"openssh", func(t *testing.T) *Server { return StartOpenSSH(t, Options{}) }},
		{"openssh-sftp-only", func(t *testing.T) *Server { return StartOpenSSH(t, Options{SFTPOnly: true, Restrict: true}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.start(t)
			if len(srv.HostKeys) != 2 {
				t.Fatalf("want 2 host keys, got %d", len(srv.HostKeys))
			}
			c := dial(t, srv)
			sc, err := sftp.NewClient(c)
			if err != nil {
				t.Fatalf("sftp: %v", err)
			}
			defer sc.Close()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "x"), []byte("abc"), 0o600); err != nil {
				t.Fatal(err)
			}
			fi, err := sc.Lstat(filepath.Join(dir, "x"))
			if err != nil || fi.Size() != 3 {
				t.Fatalf("lstat over sftp: %v %v", fi, err)
			}
			if tc.name == "embedded" {
				// The embedded server runs nothing but SFTP.
				s, err := c.NewSession()
				if err != nil {
					t.Fatal(err)
				}
				if out, err := s.Output("echo hi"); err == nil {
					t.Fatalf("exec ran and printed %q", out)
				}
			}
		})
	}
}
