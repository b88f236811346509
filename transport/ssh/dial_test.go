package ssh

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// Invariant: an unknown host key is never accepted, the error shows the
// presented key's fingerprint and the fix, and Dial does not retry.
func TestHostKeyUnknown(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	cfg := configFor(srv)
	other, _ := sshdtest.NewEd25519(t)
	// known_hosts knows some other host, not this one.
	cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, "[127.0.0.1]:1 "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.PublicKey()))))}

	_, err := Dial(ctxT(t), cfg, nil)
	var hk *HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("Dial: %v, want *HostKeyError", err)
	}
	if hk.Changed {
		t.Errorf("Changed = true for an unknown host")
	}
	if want := ssh.FingerprintSHA256(srv.HostKeys[0]); hk.Fingerprint != want || !strings.Contains(err.Error(), want) {
		t.Errorf("fingerprint %q (message %q), want %q", hk.Fingerprint, err, want)
	}
	if want := "[127.0.0.1]:" + itoa(srv.Port); hk.Addr != want {
		t.Errorf("Addr = %q, want %q (non-standard ports use the [host]:port form)", hk.Addr, want)
	}
	if !strings.Contains(hk.Hint(), "handoff hosts trust testhost") {
		t.Errorf("Hint() = %q, want it to name `handoff hosts trust testhost`", hk.Hint())
	}
	if IsRetryable(err) || srv.Accepted() != 1 {
		t.Errorf("retried: IsRetryable=%v, %d connections", IsRetryable(err), srv.Accepted())
	}

	// A missing known_hosts file is the same: unknown, not accepted.
	cfg.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "absent")}
	if _, err := Dial(ctxT(t), cfg, nil); !errors.As(err, &hk) || hk.Changed {
		t.Fatalf("Dial with no known_hosts file: %v, want an unknown-host *HostKeyError", err)
	}
}

// Invariant: a changed host key is refused, reported as changed with the
// offending known_hosts line, and not retried.
func TestHostKeyChanged(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	cfg := configFor(srv)
	impostor, _ := sshdtest.NewEd25519(t)
	kh := sshdtest.WriteKnownHosts(t, "# trusted", srv.KnownHostsLine(impostor.PublicKey()))
	cfg.KnownHostsFiles = []string{kh}

	_, err := Dial(ctxT(t), cfg, nil)
	var hk *HostKeyError
	if !errors.As(err, &hk) || !hk.Changed {
		t.Fatalf("Dial: %v, want a changed-key *HostKeyError", err)
	}
	if hk.KnownHosts != kh+":2" {
		t.Errorf("KnownHosts = %q, want %q", hk.KnownHosts, kh+":2")
	}
	if hk.Fingerprint != ssh.FingerprintSHA256(srv.HostKeys[0]) {
		t.Errorf("fingerprint %q is not the presented key's", hk.Fingerprint)
	}
	if !strings.Contains(err.Error(), "changed") || !strings.Contains(hk.Hint(), "which replaces the old key") {
		t.Errorf("message %q / hint %q do not say what happened and what to do", err, hk.Hint())
	}
	if srv.Accepted() != 1 {
		t.Errorf("%d connections, want 1 (a host key error is never retried)", srv.Accepted())
	}
}

// A server with ed25519 and ECDSA keys, of which known_hosts holds only
// one, must be checked against that key: the client offers only the
// algorithms known_hosts has. Otherwise the server shows the key the client
// prefers (x/crypto prefers ECDSA, OpenSSH ed25519) and the check reports a
// changed key (golang/go#29286). Both directions are covered.
func TestHostKeyAlgorithmsFromKnownHosts(t *testing.T) {
	t.Parallel()
	servers := map[string]*sshdtest.Server{
		"embedded": sshdtest.StartEmbedded(t, sshdtest.Options{ECDSAHostKey: true}),
		"openssh":  sshdtest.StartOpenSSH(t, sshdtest.Options{}),
	}
	for name, srv := range servers {
		for _, key := range srv.HostKeys {
			t.Run(name+"/"+key.Type(), func(t *testing.T) {
				cfg := configFor(srv)
				cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, srv.KnownHostsLine(key))}
				f := dialT(t, cfg)
				if _, err := f.Home(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// @cert-authority lines are honoured: a host certificate signed by a
// trusted CA is accepted; one signed by another CA is not.
func TestHostCertificateAuthority(t *testing.T) {
	t.Parallel()
	ca, _ := sshdtest.NewEd25519(t)
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{HostCA: ca})
	caLine := func(k ssh.PublicKey) string {
		return "@cert-authority [127.0.0.1]:" + itoa(srv.Port) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
	}

	cfg := configFor(srv)
	cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, caLine(ca.PublicKey()))}
	f := dialT(t, cfg)
	if _, err := f.Home(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// The same server's plain key in known_hosts still works: the client
	// does not ask for the certificate it could not check.
	cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, srv.KnownHostsLine(srv.HostKeys[0]))}
	f = dialT(t, cfg)
	if _, err := f.Home(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	otherCA, _ := sshdtest.NewEd25519(t)
	cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, caLine(otherCA.PublicKey()))}
	_, err := Dial(ctxT(t), cfg, nil)
	var hk *HostKeyError
	if !errors.As(err, &hk) {
		t.Fatalf("Dial with an untrusted CA: %v, want *HostKeyError", err)
	}
}

// Invariant: a refused key fails with ErrAuth at once, without retries.
func TestWrongClientKey(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	cfg := configFor(srv)
	_, priv := sshdtest.NewEd25519(t)
	cfg.IdentityFiles = []string{filepath.Join(t.TempDir(), "id_other")}
	sshdtest.WritePrivateKey(t, cfg.IdentityFiles[0], priv, "")

	_, err := Dial(ctxT(t), cfg, nil)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("Dial: %v, want ErrAuth", err)
	}
	if IsRetryable(err) || srv.Accepted() != 1 {
		t.Fatalf("auth failure retried: IsRetryable=%v, %d connections", IsRetryable(err), srv.Accepted())
	}

	// Real OpenSSH refuses the same way.
	real := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	realCfg := configFor(real)
	realCfg.IdentityFiles = cfg.IdentityFiles
	if _, err := Dial(ctxT(t), realCfg, nil); !errors.Is(err, ErrAuth) || IsRetryable(err) {
		t.Fatalf("Dial to OpenSSH with a wrong key: %v, want a non-retryable ErrAuth", err)
	}
}

// Invariant: an encrypted identity file with no agent to sign for it fails
// before connecting, with an error that names the file and the fix.
func TestEncryptedIdentityWithoutAgent(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	cfg := configFor(srv)
	_, priv := sshdtest.NewEd25519(t)
	key := filepath.Join(t.TempDir(), "id_locked")
	sshdtest.WritePrivateKey(t, key, priv, "secret")
	cfg.IdentityFiles = []string{key}
	cfg.AgentSocket = filepath.Join(t.TempDir(), "no-agent.sock")

	_, err := Dial(ctxT(t), cfg, nil)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("Dial: %v, want ErrAuth", err)
	}
	msg := err.Error()
	for _, want := range []string{key, "is encrypted and no ssh-agent holds it", "hint: ssh-add it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if srv.Accepted() != 0 {
		t.Errorf("%d connections, want 0", srv.Accepted())
	}
}

// The agent is tried first: an encrypted identity file is fine when the
// agent holds its key. With IdentitiesOnly, agent keys that match no
// identity file are not offered.
func TestAgentAuth(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	pem, err := os.ReadFile(srv.IdentityFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	sock := startAgent(t, raw)

	dir := t.TempDir()
	locked := filepath.Join(dir, "id_locked")
	sshdtest.WritePrivateKey(t, locked, raw, "secret")
	cfg := configFor(srv)
	cfg.IdentityFiles = []string{locked}
	cfg.AgentSocket = sock
	cfg.IdentitiesOnly = true
	f := dialT(t, cfg)
	if _, err := f.Home(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// IdentitiesOnly with an identity file for another key: the agent's
	// (authorized) key must not be offered.
	_, other := sshdtest.NewEd25519(t)
	otherPath := filepath.Join(dir, "id_other")
	sshdtest.WritePrivateKey(t, otherPath, other, "")
	cfg.IdentityFiles = []string{otherPath}
	if _, err := Dial(ctxT(t), cfg, nil); !errors.Is(err, ErrAuth) {
		t.Fatalf("IdentitiesOnly offered an agent key not in IdentityFiles: %v", err)
	}
}

func startAgent(t *testing.T, keys ...any) string {
	t.Helper()
	kr := agent.NewKeyring()
	for _, k := range keys {
		if err := kr.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(kr, c)
			}()
		}
	}()
	return sock
}

// Invariant: a refused connection is retried, three attempts in all, with
// backoff, and then reported.
func TestRefusedIsRetried(t *testing.T) {
	// Not parallel: it sets the package's dial hook.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now

	var attempts atomic.Int32
	testHookDialTCP = func(ctx context.Context, addr string) (net.Conn, error) {
		attempts.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	defer func() { testHookDialTCP = nil }()

	cfg := Config{Alias: "refused", HostName: "127.0.0.1", Port: port, IdentityFiles: []string{writeKey(t)},
		KnownHostsFiles: []string{sshdtest.WriteKnownHosts(t)}, ConnectTimeout: 10 * time.Second}
	start := time.Now()
	_, err = Dial(ctxT(t), cfg, nil)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial: %v, want connection refused", err)
	}
	if n := attempts.Load(); n != maxAttempts {
		t.Fatalf("%d attempts, want %d", n, maxAttempts)
	}
	if d := time.Since(start); d < retryBackoff*3 {
		t.Errorf("three attempts took %v: no backoff between them", d)
	}
}

// Invariant: a peer that hangs up before authentication is retried (three
// connections in all).
func TestEOFBeforeAuthIsRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	cfg := Config{Alias: "eof", HostName: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, IdentityFiles: []string{writeKey(t)},
		KnownHostsFiles: []string{sshdtest.WriteKnownHosts(t)}, ConnectTimeout: 10 * time.Second}
	_, err = Dial(ctxT(t), cfg, nil)
	if err == nil || !IsRetryable(err) {
		t.Fatalf("Dial: %v, want a retryable error", err)
	}
	if n := accepts.Load(); n != maxAttempts {
		t.Fatalf("%d connections, want %d", n, maxAttempts)
	}
}

// Invariant: the host's deadline holds. A server that accepts the TCP
// connection and then never speaks cannot hold Dial past ConnectTimeout.
func TestSilentServerDeadline(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	cfg := Config{Alias: "silent", HostName: "127.0.0.1", Port: addr.Port, IdentityFiles: []string{writeKey(t)},
		KnownHostsFiles: []string{sshdtest.WriteKnownHosts(t)}, ConnectTimeout: time.Second}
	start := time.Now()
	_, err := Dial(context.Background(), cfg, nil)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Dial to a silent server succeeded")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Dial: %v, want a deadline error", err)
	}
	if elapsed > cfg.ConnectTimeout+2*time.Second {
		t.Fatalf("Dial took %v with ConnectTimeout %v", elapsed, cfg.ConnectTimeout)
	}
}

// Invariant: the host's deadline holds through a jump host too. The target
// behind the jump host never speaks, so the handshake stalls inside an SSH
// channel (no socket deadline applies); Dial still returns by ConnectTimeout.
func TestSilentServerBehindJumpDeadline(t *testing.T) {
	t.Parallel()
	jump := sshdtest.StartEmbedded(t, sshdtest.Options{Forwarding: true})
	target := silentListener(t)
	conf := writeSSHConfig(t, `
Host jumpbox
  HostName 127.0.0.1
  Port `+itoa(jump.Port)+`
  User `+jump.User+`
  IdentityFile `+jump.IdentityFile+`
  UserKnownHostsFile `+jump.KnownHosts+`
Host silent
  HostName 127.0.0.1
  Port `+itoa(target.Port)+`
  IdentityFile `+writeKey(t)+`
  ProxyJump jumpbox
  ConnectTimeout 1
`)
	cfg, err := Resolve("silent", Config{SSHConfigPath: conf})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Dial(context.Background(), cfg, nil)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("Dial through the jump host to a silent server succeeded")
	}
	if elapsed > cfg.ConnectTimeout+2*time.Second {
		t.Fatalf("Dial took %v with ConnectTimeout %v: %v", elapsed, cfg.ConnectTimeout, err)
	}
	if jump.Accepted() != 1 {
		t.Errorf("jump host saw %d connections, want 1", jump.Accepted())
	}
}

// Invariant: Dial returns promptly when its context is canceled mid-handshake.
func TestDialCanceled(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	cfg := Config{Alias: "silent", HostName: "127.0.0.1", Port: addr.Port, IdentityFiles: []string{writeKey(t)},
		KnownHostsFiles: []string{sshdtest.WriteKnownHosts(t)}, ConnectTimeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := Dial(ctx, cfg, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Dial: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Dial took %v after cancel", d)
	}
}

// ScanHostKey shows the key without trusting or authenticating (no
// identity at all is configured), preferring ed25519 as OpenSSH does, and
// the line from KnownHostsLine then lets Dial through. An unknown-host
// error shows the same fingerprint.
func TestScanHostKeyThenTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *sshdtest.Server
	}{
		{"embedded", func(t *testing.T) *sshdtest.Server {
			return sshdtest.StartEmbedded(t, sshdtest.Options{ECDSAHostKey: true})
		}},
		{"openssh", func(t *testing.T) *sshdtest.Server { return sshdtest.StartOpenSSH(t, sshdtest.Options{SFTPOnly: true}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := tc.start(t)
			cfg := configFor(srv)
			scanCfg := cfg
			scanCfg.IdentityFiles = nil
			scanCfg.KnownHostsFiles = []string{filepath.Join(t.TempDir(), "absent")}
			key, err := ScanHostKey(ctxT(t), scanCfg)
			if err != nil {
				t.Fatalf("ScanHostKey: %v", err)
			}
			want := ssh.FingerprintSHA256(srv.HostKeys[0]) // the ed25519 key
			if got := ssh.FingerprintSHA256(key); got != want {
				t.Fatalf("scanned %s %s, want the ed25519 key %s", key.Type(), got, want)
			}
			if _, err := os.Stat(scanCfg.KnownHostsFiles[0]); !os.IsNotExist(err) {
				t.Fatalf("ScanHostKey wrote known_hosts: %v", err)
			}

			unknown := cfg
			unknown.KnownHostsFiles = scanCfg.KnownHostsFiles
			_, err = Dial(ctxT(t), unknown, nil)
			var hk *HostKeyError
			if !errors.As(err, &hk) || hk.Fingerprint != want || !strings.Contains(hk.Hint(), "ssh_host_ed25519_key.pub") {
				t.Fatalf("Dial to the unknown host: %v, want a HostKeyError showing %s", err, want)
			}

			line := KnownHostsLine(cfg, key)
			if !strings.HasPrefix(line, "[127.0.0.1]:"+itoa(srv.Port)+" ssh-ed25519 ") {
				t.Fatalf("KnownHostsLine = %q", line)
			}
			cfg.KnownHostsFiles = []string{sshdtest.WriteKnownHosts(t, line)}
			f := dialT(t, cfg)
			if _, err := f.Home(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestKnownHostsLinePort22(t *testing.T) {
	key, _ := sshdtest.NewEd25519(t)
	line := KnownHostsLine(Config{HostName: "laptop.lan"}, key.PublicKey())
	if !strings.HasPrefix(line, "laptop.lan ssh-ed25519 ") {
		t.Fatalf("KnownHostsLine = %q, want the bare host name on port 22", line)
	}
}

// ProxyJump through an embedded and through an OpenSSH jump host, both
// named by ssh_config alias; then a two-hop chain in the user@host:port form.
func TestProxyJump(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		jump func(t *testing.T) *sshdtest.Server
	}{
		{"embedded", func(t *testing.T) *sshdtest.Server {
			return sshdtest.StartEmbedded(t, sshdtest.Options{Forwarding: true})
		}},
		{"openssh", func(t *testing.T) *sshdtest.Server { return sshdtest.StartOpenSSH(t, sshdtest.Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			jump := tc.jump(t)
			target := sshdtest.StartEmbedded(t, sshdtest.Options{})
			conf := writeSSHConfig(t, `
Host laptop
  HostName 127.0.0.1
  Port `+itoa(target.Port)+`
  User `+target.User+`
  IdentityFile `+target.IdentityFile+`
  UserKnownHostsFile `+target.KnownHosts+`
  ProxyJump bastion
Host bastion
  HostName 127.0.0.1
  Port `+itoa(jump.Port)+`
  User `+jump.User+`
  IdentityFile `+jump.IdentityFile+`
  UserKnownHostsFile `+jump.KnownHosts+`
`)
			cfg, err := Resolve("laptop", Config{SSHConfigPath: conf})
			if err != nil {
				t.Fatal(err)
			}
			f := dialT(t, cfg)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte("hi"), 0o600); err != nil {
				t.Fatal(err)
			}
			data, _, err := f.ReadFile(ctxT(t), filepath.Join(dir, "a.md"), 10)
			if err != nil || string(data) != "hi" {
				t.Fatalf("ReadFile through the jump host: %q %v", data, err)
			}
			if target.Accepted() != 1 {
				t.Errorf("target saw %d connections, want 1", target.Accepted())
			}
		})
	}

	t.Run("chain", func(t *testing.T) {
		t.Parallel()
		j1 := sshdtest.StartEmbedded(t, sshdtest.Options{Forwarding: true})
		j2 := sshdtest.StartEmbedded(t, sshdtest.Options{Forwarding: true})
		target := sshdtest.StartEmbedded(t, sshdtest.Options{})
		conf := writeSSHConfig(t, `
Host laptop
  HostName 127.0.0.1
  Port `+itoa(target.Port)+`
  ProxyJump j1,`+j2.User+`@127.0.0.1:`+itoa(j2.Port)+`
Host j1
  HostName 127.0.0.1
  Port `+itoa(j1.Port)+`
Host *
  IdentityFile `+j1.IdentityFile+`
  IdentityFile `+j2.IdentityFile+`
  IdentityFile `+target.IdentityFile+`
  UserKnownHostsFile `+j1.KnownHosts+` `+j2.KnownHosts+` `+target.KnownHosts+`
`)
		cfg, err := Resolve("laptop", Config{SSHConfigPath: conf})
		if err != nil {
			t.Fatal(err)
		}
		f := dialT(t, cfg)
		if _, err := f.Home(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*sshdtest.Server{"j1": j1, "j2": j2, "target": target} {
			if s.Accepted() != 1 {
				t.Errorf("%s saw %d connections, want 1", name, s.Accepted())
			}
		}
		// Closing the FS closes every hop.
		f.Close()
		if _, err := f.Home(ctxT(t)); err == nil {
			t.Fatal("Home after Close succeeded")
		}
	})
}

// silentListener accepts TCP connections and never sends a byte.
func silentListener(t *testing.T) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().(*net.TCPAddr)
}

// writeKey writes a fresh unencrypted identity file no server accepts.
func writeKey(t *testing.T) string {
	t.Helper()
	_, priv := sshdtest.NewEd25519(t)
	p := filepath.Join(t.TempDir(), "id_ed25519")
	sshdtest.WritePrivateKey(t, p, priv, "")
	return p
}

func writeSSHConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
