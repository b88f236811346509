// Package hostile starts SSH/SFTP servers that lie, for tests that prove a
// compromised writer host cannot hurt the canonical host.
//
// A Server is golang.org/x/crypto/ssh on 127.0.0.1:0 that serves only the
// "sftp" subsystem, through one of two engines:
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
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
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

	engine   Engine
	config   *ssh.ServerConfig
	ln       net.Listener
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	sessions int
}

// Start starts a server whose every SFTP session is served by engine. The
// client key and known_hosts file are written into dir. The server stops
// when the test ends.
func Start(t testing.TB, dir string, engine Engine) *Server {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{engine: engine, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	if u, err := user.Current(); err == nil {
		s.User = u.Username
	} else {
		s.User = "hostile"
	}

	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientSigner, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "hostile-test")
	if err != nil {
		t.Fatal(err)
	}
	s.IdentityFile = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(s.IdentityFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.IdentityFile+".pub", ssh.MarshalAuthorizedKey(clientSigner.PublicKey()), 0o644); err != nil {
		t.Fatal(err)
	}

	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	authorized := clientSigner.PublicKey().Marshal()
	s.config = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	s.config.AddHostKey(hostSigner)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	tcp := ln.Addr().(*net.TCPAddr)
	s.Host, s.Port = tcp.IP.String(), tcp.Port
	s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	s.KnownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{s.Addr}, hostSigner.PublicKey()) + "\n"
	if err := os.WriteFile(s.KnownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}

	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.stop)
	return s
}

// Sessions reports how many SFTP sessions the server has started.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

func (s *Server) stop() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			s.serveConn(c)
		}()
	}
}

func (s *Server) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for req := range reqs {
			// A refusal still proves the peer alive (as OpenSSH answers
			// keepalive@openssh.com).
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveSession(ch, chReqs)
		}()
	}
}

// serveSession answers the "sftp" subsystem request and nothing else.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	started := false
	done := make(chan struct{})
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				cancel()
				if started {
					<-done
				}
				return
			}
			ok = !started && req.Type == "subsystem" && len(req.Payload) >= 4 && string(req.Payload[4:]) == "sftp"
			if req.WantReply {
				req.Reply(ok, nil)
			}
			if ok {
				started = true
				s.mu.Lock()
				s.sessions++
				s.mu.Unlock()
				go func() {
					defer close(done)
					s.engine.ServeSFTP(ctx, &sessionRW{Channel: ch, cancel: cancel})
				}()
			}
		case <-done:
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			return
		}
	}
}

// sessionRW ends the session's context once the client's side is gone, so
// that an engine blocked in a hook returns.
type sessionRW struct {
	ssh.Channel
	cancel context.CancelFunc
}

func (s *sessionRW) Read(p []byte) (int, error) {
	n, err := s.Channel.Read(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

func (s *sessionRW) Write(p []byte) (int, error) {
	n, err := s.Channel.Write(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

func (s *sessionRW) Close() error {
	s.cancel()
	return s.Channel.Close()
}
