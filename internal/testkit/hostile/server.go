// Package hostile starts SSH/SFTP servers that lie, for tests that prove a
// compromised writer host cannot hurt the canonical host.
//
// A Server is an internal/sshserve server on 127.0.0.1:0 that serves only
// the "sftp" subsystem, through one of two engines:
//
//   - VFS: an in-memory tree served by pkg/sftp's request server
//     (sftp.NewRequestServer) whose handlers lie as a test configures:
//     listings with any names (slashes, control bytes, invalid UTF-8,
//     millions of entries generated lazily), files whose LSTAT, FSTAT and
//     data disagree, data that never ends or trickles, renames that answer
//     OK without renaming.
//   - Raw: a hand-written SFTP v3 responder whose replies a hook can replace
//     with arbitrary bytes (malformed packets that no SFTP library would
//     produce).
//
// Every "file" a server offers is virtual: nothing a client does to it
// touches the local file system, so a test can prove that everything its
// run wrote is under the run's workspace. The only files a server writes
// are its client key and known_hosts, in the directory Start is given,
// before it returns.
package hostile

import (
	"context"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/handoff-sync/handoff/internal/sshserve"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// Engine serves one SFTP session. ctx ends when the session's channel
// closes or the server stops; an engine that blocks (a trickling read, a
// reply that never comes) must return once it does.
type Engine interface {
	ServeSFTP(ctx context.Context, rw io.ReadWriteCloser)
}

// Server is a running hostile SSH server.
type Server struct {
	Host string // 127.0.0.1
	Port int
	Addr string // 127.0.0.1:port
	User string // any user name is accepted; this is the current user's

	// KnownHosts is a known_hosts file trusting the server's host key for
	// [127.0.0.1]:port; IdentityFile is the unencrypted client key it
	// accepts (public half in IdentityFile+".pub").
	KnownHosts   string
	IdentityFile string

	core *sshserve.Server
}

// Start starts a server whose every SFTP session is served by engine. The
// client key and known_hosts file are written into dir. The server stops
// when the test ends.
func Start(t testing.TB, dir string, engine Engine) *Server {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{}
	if u, err := user.Current(); err == nil {
		s.User = u.Username
	} else {
		s.User = "hostile"
	}

	clientSigner, clientPriv := sshdtest.NewEd25519(t)
	s.IdentityFile = filepath.Join(dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, s.IdentityFile, clientPriv, "")
	hostSigner, _ := sshdtest.NewEd25519(t)
	config := &ssh.ServerConfig{PublicKeyCallback: sshserve.AuthorizedKey(clientSigner.PublicKey())}
	config.AddHostKey(hostSigner)
	core, err := sshserve.Start(context.Background(), sshserve.Config{SSH: config, SFTP: engine.ServeSFTP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close() })
	s.core = core
	tcp := core.Addr()
	s.Host, s.Port, s.Addr = tcp.IP.String(), tcp.Port, tcp.String()
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{s.Addr}, hostSigner.PublicKey()) + "\n"
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// Sessions reports how many SFTP sessions the server has started.
func (s *Server) Sessions() int { return s.core.Sessions() }
