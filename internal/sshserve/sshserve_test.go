package sshserve_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/sshserve"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	s, _ := sshdtest.NewEd25519(t)
	return s
}

// start starts a server with cfg's options, a fresh host key and one
// authorized client key, and returns a connected client.
func start(t *testing.T, cfg sshserve.Config) (*sshserve.Server, *ssh.Client) {
	t.Helper()
	host, client := newSigner(t), newSigner(t)
	cfg.SSH = &ssh.ServerConfig{PublicKeyCallback: sshserve.AuthorizedKey(client.PublicKey())}
	cfg.SSH.AddHostKey(host)
	if cfg.SFTP == nil {
		cfg.SFTP = sshserve.ServeDir(t.TempDir())
	}
	srv, err := sshserve.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := ssh.Dial("tcp", srv.Addr().String(), &ssh.ClientConfig{
		User:            "anyone",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(client)},
		HostKeyCallback: ssh.FixedHostKey(host.PublicKey()),
		Timeout:         5 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// Only the "sftp" subsystem is granted; every other request, channel and
// global request is refused.
func TestOnlySFTP(t *testing.T) {
	srv, c := start(t, sshserve.Config{})
	if ip := srv.Addr().IP; !ip.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("listens on %s, want 127.0.0.1", srv.Addr())
	}
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	subsystem := func(name string) []byte { return ssh.Marshal(struct{ Name string }{name}) }
	for _, typ := range []string{"exec", "shell", "pty-req", "env", "x11-req", "auth-agent-req@openssh.com", "subsystem netconf", "subsystem sftp", "subsystem sftp again"} {
		var payload []byte
		if name, ok := strings.CutPrefix(typ, "subsystem "); ok {
			payload = subsystem(strings.TrimSuffix(name, " again"))
		}
		granted, err := ch.SendRequest(strings.Fields(typ)[0], true, payload)
		if want := typ == "subsystem sftp"; granted != want || err != nil {
			t.Errorf("%s: granted=%v err=%v, want granted=%v", typ, granted, err, want)
		}
	}
	ch.Close()

	for typ, want := range map[string]ssh.RejectionReason{
		"direct-tcpip":           ssh.Prohibited,
		"x11":                    ssh.UnknownChannelType,
		"auth-agent@openssh.com": ssh.UnknownChannelType,
		"forwarded-tcpip":        ssh.UnknownChannelType,
	} {
		var oce *ssh.OpenChannelError
		if _, _, err := c.OpenChannel(typ, nil); !errors.As(err, &oce) || oce.Reason != want {
			t.Errorf("channel %s: %v, want a rejection (%v)", typ, err, want)
		}
	}
	for _, typ := range []string{"tcpip-forward", "keepalive@openssh.com"} {
		if ok, _, err := c.SendRequest(typ, true, nil); ok || err != nil {
			t.Errorf("global request %s: ok=%v err=%v, want a refusal", typ, ok, err)
		}
	}

	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatalf("sftp refused: %v", err)
	}
	if _, err := sc.Getwd(); err != nil {
		t.Errorf("sftp: %v", err)
	}
	sc.Close()
	if n := srv.Sessions(); n != 2 {
		t.Errorf("Sessions() = %d, want 2", n)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("Accepted() = %d, want 1", n)
	}
}

// within fails the test unless done is closed within 5s.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting after 5s", what)
	}
}

// IgnoreKeepalives leaves a keepalive unanswered.
func TestIgnoreKeepalives(t *testing.T) {
	_, c := start(t, sshserve.Config{IgnoreKeepalives: true})
	answered := make(chan struct{})
	go func() {
		c.SendRequest("keepalive@openssh.com", true, nil)
		close(answered)
	}()
	select {
	case <-answered:
		t.Fatal("a keepalive was answered")
	case <-time.After(300 * time.Millisecond):
	}
}

// A connection that never starts its handshake is closed at the deadline.
func TestHandshakeDeadline(t *testing.T) {
	srv, _ := start(t, sshserve.Config{HandshakeTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	began := time.Now()
	io.Copy(io.Discard, conn) // the server's banner, then nothing
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("a silent connection stayed open %v", d)
	}
}

// The session's context ends when the client closes the channel.
func TestSessionContextEndsWithChannel(t *testing.T) {
	ended := make(chan struct{})
	_, c := start(t, sshserve.Config{SFTP: func(ctx context.Context, _ io.ReadWriteCloser) {
		<-ctx.Done()
		close(ended)
	}})
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	within(t, ended, "the session's context after its channel closed")
}

// Close ends every session's context and returns only after each session
// has returned.
func TestCloseWaitsForSessions(t *testing.T) {
	const sessions = 3
	started := make(chan struct{}, sessions)
	returned := make(chan struct{}, sessions)
	srv, c := start(t, sshserve.Config{SFTP: func(ctx context.Context, _ io.ReadWriteCloser) {
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // a slow return that Close must wait for
		returned <- struct{}{}
	}})
	for range sessions {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RequestSubsystem("sftp"); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := len(returned); n != sessions {
		t.Fatalf("Close returned when %d of %d sessions had", n, sessions)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if conn, err := net.Dial("tcp", srv.Addr().String()); err == nil {
		conn.Close()
		t.Error("still accepting after Close")
	}
}

// Ending Start's context stops the server.
func TestContextStops(t *testing.T) {
	host := newSigner(t)
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(host)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sshserve.Start(ctx, sshserve.Config{SSH: cfg, SFTP: sshserve.ServeDir(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting 5s after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Forwarding serves direct-tcpip to the requested target.
func TestForwarding(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	_, c := start(t, sshserve.Config{Forwarding: true})
	conn, err := c.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("direct-tcpip refused: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}
