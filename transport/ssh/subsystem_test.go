package ssh

import (
	"bytes"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/sshdtest"
	"github.com/handoff-sync/handoff/internal/sshserve"
)

// subsystemServer is an SSH server that hands each "subsystem" request of
// a session to onSubsystem, with the channel, and nothing more: the test
// decides when and how the request is answered.
func subsystemServer(t *testing.T, onSubsystem func(t *testing.T, ch ssh.Channel, req *ssh.Request)) Config {
	t.Helper()
	dir := t.TempDir()
	client, clientPriv := sshdtest.NewEd25519(t)
	identity := filepath.Join(dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, identity, clientPriv, "")
	host, _ := sshdtest.NewEd25519(t)
	config := &ssh.ServerConfig{PublicKeyCallback: sshserve.AuthorizedKey(client.PublicKey())}
	config.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(conn, config)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					ch, creqs, err := nc.Accept()
					if err != nil {
						return
					}
					go func() {
						for req := range creqs {
							if req.Type == "subsystem" {
								onSubsystem(t, ch, req)
							} else if req.WantReply {
								req.Reply(false, nil)
							}
						}
					}()
				}
			}()
		}
	}()
	srv := &sshdtest.Server{User: "tester", IdentityFile: identity, HostKeys: []ssh.PublicKey{host.PublicKey()}}
	tcp := ln.Addr().(*net.TCPAddr)
	srv.Host, srv.Port, srv.Addr = tcp.IP.String(), tcp.Port, tcp.String()
	srv.KnownHosts = sshdtest.WriteKnownHosts(t, srv.KnownHostsLine(host.PublicKey()))
	return configFor(srv)
}

// SFTP's INIT goes out with the subsystem request, not after its reply:
// the server here answers the request only once INIT has arrived, which a
// client that waits for the reply never sends (it would wait until the
// server gave up, and the test fails). Saves one round trip per connect.
func TestInitDoesNotWaitForSubsystemReply(t *testing.T) {
	t.Parallel()
	early := make(chan bool, 1)
	cfg := subsystemServer(t, func(t *testing.T, ch ssh.Channel, req *ssh.Request) {
		// INIT is 9 bytes: length 5, type 1, version 3.
		init := make([]byte, 9)
		got := make(chan error, 1)
		go func() { _, err := io.ReadFull(ch, init); got <- err }()
		select {
		case err := <-got:
			early <- err == nil
			req.Reply(true, nil)
		case <-time.After(5 * time.Second):
			early <- false
			req.Reply(true, nil)
			<-got
		}
		go pkgSFTPServer(t, io.MultiReader(bytes.NewReader(init), ch), ch)
	})
	f := dialT(t, cfg)
	if !<-early {
		t.Fatal("INIT was not sent before the subsystem request was answered")
	}
	if _, err := f.Lstat(ctxT(t), t.TempDir()); err != nil {
		t.Fatalf("Lstat over the session: %v", err)
	}
}

// A refused subsystem fails Dial at once with its own error and hint,
// though INIT has already gone out: not a wait for a VERSION that never
// comes.
func TestSubsystemRefused(t *testing.T) {
	t.Parallel()
	cfg := subsystemServer(t, func(t *testing.T, ch ssh.Channel, req *ssh.Request) {
		req.Reply(false, nil)
	})
	cfg.ConnectTimeout = time.Minute // longer than ctxT: a wait would end there
	_, err := Dial(ctxT(t), cfg, nil)
	if !errors.Is(err, errNoSubsystem) {
		t.Fatalf("Dial: %v, want the refusal", err)
	}
	t.Log(err)
}
