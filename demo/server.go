package demo

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// handshakeTimeout bounds a client's key exchange and authentication.
const handshakeTimeout = 10 * time.Second

// Server is an embedded SSH server on 127.0.0.1 that serves the "sftp"
// subsystem over the real file system and nothing else. It accepts one
// client public key, for any user name.
type Server struct {
	// Addr is where it listens: 127.0.0.1:port.
	Addr string
	Port int
	// HostKey is the server's generated ed25519 host key.
	HostKey ssh.PublicKey

	config  *ssh.ServerConfig
	workDir string
	ln      net.Listener

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	closeMu sync.Once
}

// StartServer starts a server that authenticates exactly the client key
// and gives SFTP sessions workDir as their login directory.
func StartServer(client ssh.PublicKey, workDir string) (*Server, error) {
	if client == nil {
		return nil, errors.New("demo: server: no client key")
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("demo: server: host key: %w", err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("demo: server: host key: %w", err)
	}
	authorized := client.Marshal()
	config := &ssh.ServerConfig{
		MaxAuthTries: 3,
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	config.AddHostKey(hostKey)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: server: %w", err)
	}
	s := &Server{
		Addr:    ln.Addr().String(),
		Port:    ln.Addr().(*net.TCPAddr).Port,
		HostKey: hostKey.PublicKey(),
		config:  config,
		workDir: workDir,
		ln:      ln,
		conns:   make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Close stops listening, closes every connection and waits until all
// sessions have ended. It is safe to call more than once.
func (s *Server) Close() error {
	var err error
	s.closeMu.Do(func() {
		s.mu.Lock()
		s.closed = true
		err = s.ln.Close()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()

	// Global requests: refuse them all (tcpip-forward and friends). A
	// keepalive@openssh.com gets a refusal too, which is what OpenSSH
	// answers and which tells the client the peer is alive.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for req := range reqs {
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()

	var sessions sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			// direct-tcpip, x11, auth-agent@openssh.com, ...
			nc.Reject(ssh.Prohibited, "only sftp sessions are served")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.serveSession(ch, chReqs)
		}()
	}
	sessions.Wait()
}

// serveSession grants one "sftp" subsystem request and refuses everything
// else: exec, shell, pty-req, env, agent forwarding, a second subsystem.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	started := false
	done := make(chan struct{})
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				if started {
					<-done
				}
				return
			}
			grant := !started && req.Type == "subsystem" && isSFTP(req.Payload)
			if req.WantReply {
				req.Reply(grant, nil)
			}
			if grant {
				started = true
				go func() {
					defer close(done)
					s.serveSFTP(ch)
				}()
			}
		case <-done:
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			return
		}
	}
}

// isSFTP reports whether a subsystem request's payload names "sftp".
func isSFTP(payload []byte) bool {
	var p struct{ Name string }
	return ssh.Unmarshal(payload, &p) == nil && p.Name == "sftp"
}

func (s *Server) serveSFTP(ch io.ReadWriteCloser) {
	srv, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(s.workDir))
	if err != nil {
		return
	}
	srv.Serve()
	srv.Close()
}
