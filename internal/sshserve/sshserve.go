package sshserve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// DefaultHandshakeTimeout bounds a client's key exchange and
// authentication when Config.HandshakeTimeout is zero.
const DefaultHandshakeTimeout = 10 * time.Second

// SFTPFunc serves one SFTP session over rw. ctx ends when the session's
// channel closes or the server stops; the function must return soon after.
type SFTPFunc func(ctx context.Context, rw io.ReadWriteCloser)

// Config shapes a server.
type Config struct {
	// Addr is where to listen; "" means 127.0.0.1:0.
	Addr string
	// SSH holds the host keys and the client authentication. Required.
	SSH *ssh.ServerConfig
	// SFTP serves each granted "sftp" subsystem. Required.
	SFTP SFTPFunc
	// HandshakeTimeout bounds key exchange and authentication on the raw
	// connection; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// IgnoreKeepalives leaves every global request unanswered,
	// keepalive@openssh.com included, as a dead peer would. Otherwise each
	// is refused, which is what OpenSSH answers to a keepalive.
	IgnoreKeepalives bool
	// Forwarding serves direct-tcpip channels by dialing their target, so
	// that the server can be a ProxyJump host.
	Forwarding bool
}

// Server is a running server.
type Server struct {
	cfg      Config
	ln       net.Listener
	ctx      context.Context // parent of every session's context
	cancel   context.CancelFunc
	stopCtx  func() bool // stops the context.AfterFunc of Start
	accepted atomic.Int64
	sessions atomic.Int64

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start listens and serves until Close is called or ctx ends. A failure to
// listen is net.Listen's error, unwrapped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.SSH == nil || cfg.SFTP == nil {
		return nil, errors.New("sshserve: start: SSH and SFTP are required")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err // a *net.OpError says "listen tcp <addr>: ..." itself
	}
	s := &Server{cfg: cfg, ln: ln, conns: make(map[net.Conn]struct{})}
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.acceptLoop()
	s.stopCtx = context.AfterFunc(ctx, s.shutdown)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// Accepted reports how many TCP connections the server has accepted.
func (s *Server) Accepted() int { return int(s.accepted.Load()) }

// Sessions reports how many SFTP sessions the server has started.
func (s *Server) Sessions() int { return int(s.sessions.Load()) }

// Close stops listening, closes every connection and waits until every
// goroutine the server started has returned. It returns the listener's
// Close error, the same on every call.
func (s *Server) Close() error {
	s.stopCtx()
	s.shutdown()
	return s.closeErr
}

func (s *Server) shutdown() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.mu.Lock()
		s.closed = true
		s.closeErr = s.ln.Close()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// track registers c and counts its goroutine, unless the server is closing.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.accepted.Add(1)
		if !s.track(c) {
			c.Close()
			return
		}
		go func() {
			defer s.untrack(c)
			s.serveConn(c)
		}()
	}
}

func (s *Server) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.cfg.SSH)
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	s.wg.Go(func() {
		if s.cfg.IgnoreKeepalives {
			for range reqs {
			}
			return
		}
		ssh.DiscardRequests(reqs) // refuses each one that wants a reply
	})
	for nc := range chans {
		switch {
		case nc.ChannelType() == "session":
			ch, chReqs, err := nc.Accept()
			if err != nil {
				continue
			}
			s.wg.Go(func() { s.serveSession(ch, chReqs) })
		case nc.ChannelType() == "direct-tcpip" && s.cfg.Forwarding:
			s.wg.Go(func() { s.forward(nc) })
		case nc.ChannelType() == "direct-tcpip":
			nc.Reject(ssh.Prohibited, "forwarding disabled")
		default:
			// x11, auth-agent@openssh.com, forwarded-tcpip, ...
			nc.Reject(ssh.UnknownChannelType, "only session channels")
		}
	}
}

// serveSession grants one "sftp" subsystem request and refuses everything
// else: exec, shell, pty-req, env, agent forwarding, a second subsystem.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var done chan struct{} // nil until the subsystem starts
	for {
		select {
		case req, ok := <-reqs:
			if !ok { // the channel is closed
				cancel()
				if done != nil {
					<-done
				}
				return
			}
			grant := done == nil && req.Type == "subsystem" && isSFTP(req.Payload)
			if grant {
				s.sessions.Add(1) // before the reply, so a client that saw it can count on it
			}
			if req.WantReply {
				req.Reply(grant, nil)
			}
			if grant {
				d := make(chan struct{})
				done = d
				go func() {
					defer close(d)
					s.cfg.SFTP(ctx, &sessionRW{ch: ch, cancel: cancel})
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

// sessionRW ends the session's context once the client's side is gone, so
// that an SFTPFunc blocked on purpose returns.
type sessionRW struct {
	ch     ssh.Channel
	cancel context.CancelFunc
}

func (s *sessionRW) Read(p []byte) (int, error) {
	n, err := s.ch.Read(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

func (s *sessionRW) Write(p []byte) (int, error) {
	n, err := s.ch.Write(p)
	if err != nil {
		s.cancel()
	}
	return n, err
}

func (s *sessionRW) Close() error {
	s.cancel()
	return s.ch.Close()
}

// forward serves a direct-tcpip channel by dialing its target, and
// returns when both directions are done or the server stops.
func (s *Server) forward(nc ssh.NewChannel) {
	var req struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &req); err != nil {
		nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	target, err := net.DialTimeout("tcp", net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))), 5*time.Second)
	if err != nil {
		nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		target.Close()
		return
	}
	s.wg.Go(func() { ssh.DiscardRequests(reqs) })
	closeBoth := func() { target.Close(); ch.Close() }
	stop := context.AfterFunc(s.ctx, closeBoth)
	defer stop()
	var copies sync.WaitGroup
	copies.Go(func() { io.Copy(target, ch); target.(*net.TCPConn).CloseWrite() })
	copies.Go(func() { io.Copy(ch, target); ch.CloseWrite() })
	copies.Wait()
	closeBoth()
}

// AuthorizedKey is a PublicKeyCallback that accepts exactly key, for any
// user name.
func AuthorizedKey(key ssh.PublicKey) func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
	authorized := key.Marshal()
	return func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), authorized) {
			return &ssh.Permissions{}, nil
		}
		return nil, errors.New("key not authorized")
	}
}

// ServeDir is an SFTPFunc that serves the real file system with the
// permissions of the process, with dir as the login directory.
func ServeDir(dir string) SFTPFunc {
	return func(_ context.Context, rw io.ReadWriteCloser) {
		srv, err := sftp.NewServer(rw, sftp.WithServerWorkingDirectory(dir))
		if err != nil {
			return
		}
		srv.Serve()
		srv.Close()
	}
}
