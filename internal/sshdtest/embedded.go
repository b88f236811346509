package sshdtest

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// embedded is the state of an in-process server.
type embedded struct {
	opts     Options
	config   *ssh.ServerConfig
	ln       net.Listener
	workDir  string
	accepted atomic.Int64
	stopping chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

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

	e := &embedded{
		opts:     opts,
		stopping: make(chan struct{}),
		conns:    make(map[net.Conn]struct{}),
		workDir:  opts.WorkDir,
	}
	if e.workDir == "" {
		e.workDir = u.HomeDir
	}
	authorized := srv.ClientKey.Marshal()
	e.config = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	hostEd, _ := NewEd25519(t)
	e.config.AddHostKey(hostEd)
	srv.HostKeys = append(srv.HostKeys, hostEd.PublicKey())
	if opts.ECDSAHostKey {
		hostEC, _ := newECDSA(t)
		e.config.AddHostKey(hostEC)
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
		e.config.AddHostKey(certSigner)
		srv.HostCert = cert
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.ln = ln
	srv.embedded = e
	srv.finish(t, ln.Addr())

	e.wg.Add(1)
	go e.acceptLoop()
	t.Cleanup(e.stop)
	return srv
}

func (e *embedded) stop() {
	close(e.stopping)
	e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func (e *embedded) acceptLoop() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.accepted.Add(1)
		e.mu.Lock()
		select {
		case <-e.stopping:
			e.mu.Unlock()
			c.Close()
			return
		default:
		}
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() {
				c.Close()
				e.mu.Lock()
				delete(e.conns, c)
				e.mu.Unlock()
			}()
			e.serveConn(c)
		}()
	}
}

func (e *embedded) serveConn(c net.Conn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	sc, chans, reqs, err := ssh.NewServerConn(c, e.config)
	if err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for req := range reqs {
			if e.opts.IgnoreKeepalives {
				continue // a dead peer never answers
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, chReqs, err := nc.Accept()
			if err != nil {
				continue
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.serveSession(ch, chReqs)
			}()
		case "direct-tcpip":
			if !e.opts.Forwarding {
				nc.Reject(ssh.Prohibited, "forwarding disabled")
				continue
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.forward(nc)
			}()
		default:
			nc.Reject(ssh.UnknownChannelType, "only session channels")
		}
	}
}

// serveSession answers the "sftp" subsystem request and nothing else: no
// shell, no exec, no agent forwarding.
func (e *embedded) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
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
			ok = !started && req.Type == "subsystem" && len(req.Payload) >= 4 && string(req.Payload[4:]) == "sftp"
			if req.WantReply {
				req.Reply(ok, nil)
			}
			if ok {
				started = true
				go func() {
					defer close(done)
					e.serveSFTP(ch)
				}()
			}
		case <-done:
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
			return
		}
	}
}

func (e *embedded) serveSFTP(ch ssh.Channel) {
	var rw io.ReadWriteCloser = ch
	if e.opts.Stall != nil {
		rw = &stallRW{ReadWriteCloser: ch, stall: e.opts.Stall, stopping: e.stopping}
	}
	s, err := sftp.NewServer(rw, sftp.WithServerWorkingDirectory(e.workDir))
	if err != nil {
		return
	}
	s.Serve()
	s.Close()
}

// forward serves a direct-tcpip channel by dialing its target.
func (e *embedded) forward(nc ssh.NewChannel) {
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
	go ssh.DiscardRequests(reqs)
	done := make(chan struct{}, 2)
	go func() { io.Copy(target, ch); target.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(ch, target); ch.CloseWrite(); done <- struct{}{} }()
	select {
	case <-done:
		<-done
	case <-e.stopping:
	}
	target.Close()
	ch.Close()
}

// stallRW passes SFTP requests to the server one frame at a time until
// stall says otherwise; then it blocks until the server stops.
type stallRW struct {
	io.ReadWriteCloser
	stall    func(byte) bool
	stopping chan struct{}
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
