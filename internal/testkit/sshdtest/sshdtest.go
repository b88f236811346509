// Package sshdtest starts SSH/SFTP servers on 127.0.0.1 for tests: an
// in-process one (x/crypto/ssh and pkg/sftp) and Debian's real OpenSSH
// sshd. Both serve the real file system, so a test can build fixtures with
// the os package and see them over SFTP at the same absolute paths.
//
// Each server comes with what a client needs: a generated client key
// written to an identity file, and a known_hosts file that trusts the
// server's host keys. Servers stop when the test ends.
//
// StartOpenSSH skips the test when sshd is not installed, unless the
// environment variable HANDOFF_E2E_REQUIRED is set, in which case the test
// fails: CI never silently skips the OpenSSH tests.
package sshdtest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
)

// RequiredEnv names the environment variable that turns a missing sshd
// from a skip into a failure.
const RequiredEnv = "HANDOFF_E2E_REQUIRED"

// SFTP request types, for Options.Stall.
const (
	PacketOpen    byte = 3
	PacketClose   byte = 4
	PacketRead    byte = 5
	PacketLstat   byte = 7
	PacketFstat   byte = 8
	PacketOpendir byte = 11
	PacketReaddir byte = 12
	PacketRename  byte = 18
)

// Options shape a server. Fields marked "embedded" only affect StartEmbedded.
type Options struct {
	// ECDSAHostKey also serves an ECDSA P-256 host key; an ed25519 one is
	// always served. (OpenSSH always serves both.)
	ECDSAHostKey bool
	// HostCA, when set, signs a certificate for the ed25519 host key, valid
	// for the principal 127.0.0.1, which the server presents to clients that
	// ask for certificates. Embedded.
	HostCA ssh.Signer
	// WorkDir is the SFTP login directory. Default: the user's home. Embedded.
	WorkDir string
	// Forwarding lets clients open direct-tcpip channels, so that the
	// server can be a ProxyJump host. Embedded (OpenSSH allows it anyway).
	Forwarding bool
	// Stall is shown the type of each SFTP request (Packet*); from the
	// first one it returns true for, that session gets no more answers until
	// the server stops. Embedded.
	Stall func(packetType byte) bool
	// IgnoreKeepalives leaves global requests such as keepalive@openssh.com
	// unanswered, as a dead peer would. Embedded.
	IgnoreKeepalives bool
	// SFTPOnly forces internal-sftp for the account (ForceCommand). OpenSSH.
	SFTPOnly bool
	// Restrict marks the authorized_keys line restrict,command="internal-sftp".
	// OpenSSH.
	Restrict bool
	// NoPublicKey turns public-key logins off (PubkeyAuthentication no), so
	// that the server offers no method a key-only client can use. OpenSSH.
	NoPublicKey bool
	// ReadOnly serves SFTP read-only (internal-sftp -R): every call that
	// would change the file system is denied, as for an account that can
	// read its inboxes but not write in them. OpenSSH.
	ReadOnly bool
}

// Server is a running test server.
type Server struct {
	Addr string // 127.0.0.1:port
	Host string // 127.0.0.1
	Port int
	User string // the account to log in as: the current user

	HostKeys []ssh.PublicKey  // plain host keys, ed25519 first
	HostCert *ssh.Certificate // set when Options.HostCA was

	// KnownHosts is a known_hosts file trusting every plain host key for
	// [127.0.0.1]:port.
	KnownHosts string
	// IdentityFile is the unencrypted client private key the server
	// accepts, with its public half in IdentityFile+".pub".
	IdentityFile string
	ClientKey    ssh.PublicKey

	embedded *embedded // nil for OpenSSH
}

// Accepted reports how many TCP connections the embedded server has
// accepted so far (0 for OpenSSH).
func (s *Server) Accepted() int {
	if s.embedded == nil {
		return 0
	}
	return int(s.embedded.accepted.Load())
}

// KnownHostsLine is a known_hosts line trusting key for this server.
func (s *Server) KnownHostsLine(key ssh.PublicKey) string {
	return knownhosts.Line([]string{s.Addr}, key)
}

// WriteKnownHosts writes a known_hosts file holding the given lines and
// returns its path.
func WriteKnownHosts(t testing.TB, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewEd25519 generates an ed25519 key pair as an ssh.Signer.
func NewEd25519(t testing.TB) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

func newECDSA(t testing.TB) (ssh.Signer, *ecdsa.PrivateKey) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

// WritePrivateKey writes key in OpenSSH format to path (mode 0600), and its
// public half to path+".pub". A non-empty passphrase encrypts it.
func WritePrivateKey(t testing.TB, path string, key any, passphrase string) {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(key, "handoff-test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "handoff-test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(s.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// finish fills the fields both kinds of server share.
func (s *Server) finish(t testing.TB, ln net.Addr) {
	t.Helper()
	tcp := ln.(*net.TCPAddr)
	s.Host = tcp.IP.String()
	s.Port = tcp.Port
	s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	var lines []string
	for _, k := range s.HostKeys {
		lines = append(lines, s.KnownHostsLine(k))
	}
	s.KnownHosts = WriteKnownHosts(t, lines...)
}

func currentUser(t testing.TB) *user.User {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u
}
