package sshdtest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/sshserve"
)

// embedded is what a Server keeps of its in-process server: the count of
// accepted connections that Server.Accepted reads.
type embedded struct {
	accepted acceptedCount
}

// acceptedCount reads the core server's count of accepted connections.
type acceptedCount struct{ core *sshserve.Server }

func (a acceptedCount) Load() int64 { return int64(a.core.Accepted()) }

// StartEmbedded starts an in-process SSH server on 127.0.0.1:0 that accepts
// the generated client key for any user name, serves only the "sftp"
// subsystem (and direct-tcpip with Options.Forwarding), and stops when the
// test ends.
func StartEmbedded(t testing.TB, opts Options) *Server {
	t.Helper()
	dir := t.TempDir()
	u := currentUser(t)
	srv := &Server{User: u.Username}

	client, clientPriv := NewEd25519(t)
	srv.ClientKey = client.PublicKey()
	srv.IdentityFile = filepath.Join(dir, "id_ed25519")
	WritePrivateKey(t, srv.IdentityFile, clientPriv, "")

	workDir := opts.WorkDir
	if workDir == "" {
		workDir = u.HomeDir
	}
	config := &ssh.ServerConfig{PublicKeyCallback: sshserve.AuthorizedKey(srv.ClientKey)}
	hostEd, _ := NewEd25519(t)
	config.AddHostKey(hostEd)
	srv.HostKeys = append(srv.HostKeys, hostEd.PublicKey())
	if opts.ECDSAHostKey {
		hostEC, _ := newECDSA(t)
		config.AddHostKey(hostEC)
		srv.HostKeys = append(srv.HostKeys, hostEC.PublicKey())
	}
	if opts.HostCA != nil {
		cert := &ssh.Certificate{
			Key:             hostEd.PublicKey(),
			Serial:          1,
			CertType:        ssh.HostCert,
			KeyId:           "sshdtest host",
			ValidPrincipals: []string{"127.0.0.1"},
			ValidAfter:      uint64(time.Now().Add(-time.Hour).Unix()),
			ValidBefore:     uint64(time.Now().Add(24 * time.Hour).Unix()),
		}
		if err := cert.SignCert(rand.Reader, opts.HostCA); err != nil {
			t.Fatal(err)
		}
		certSigner, err := ssh.NewCertSigner(cert, hostEd)
		if err != nil {
			t.Fatal(err)
		}
		config.AddHostKey(certSigner)
		srv.HostCert = cert
	}

	files := sshserve.ServeDir(workDir)
	serve := files
	if opts.Stall != nil {
		serve = func(ctx context.Context, rw io.ReadWriteCloser) {
			files(ctx, &stallRW{ReadWriteCloser: rw, stall: opts.Stall, stopping: ctx.Done()})
		}
	}
	core, err := sshserve.Start(context.Background(), sshserve.Config{
		SSH:              config,
		SFTP:             serve,
		IgnoreKeepalives: opts.IgnoreKeepalives,
		Forwarding:       opts.Forwarding,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close() })
	srv.embedded = &embedded{accepted: acceptedCount{core}}
	srv.finish(t, core.Addr())
	return srv
}

// stallRW passes SFTP requests to the server one frame at a time until
// stall says otherwise; then it blocks until the session ends.
type stallRW struct {
	io.ReadWriteCloser
	stall    func(byte) bool
	stopping <-chan struct{}
	frame    []byte
	off      int
}

func (s *stallRW) Read(p []byte) (int, error) {
	if s.off == len(s.frame) {
		var lb [4]byte
		if _, err := io.ReadFull(s.ReadWriteCloser, lb[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(lb[:])
		if n == 0 || n > 1<<20 {
			return 0, fmt.Errorf("sshdtest: bad sftp frame length %d", n)
		}
		s.frame = make([]byte, 4+int(n))
		copy(s.frame, lb[:])
		if _, err := io.ReadFull(s.ReadWriteCloser, s.frame[4:]); err != nil {
			return 0, err
		}
		s.off = 0
		if s.stall(s.frame[4]) {
			<-s.stopping
			return 0, io.EOF
		}
	}
	n := copy(p, s.frame[s.off:])
	s.off += n
	return n, nil
}
