package sshdtest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian installs the OpenSSH server.
const SSHDPath = "/usr/sbin/sshd"

// StartOpenSSH runs the real OpenSSH sshd in the foreground on a free
// 127.0.0.1 port, with its own ed25519 and ECDSA host keys and an
// authorized_keys file holding a generated client key for the current user
// (root logins allowed by key only). It waits until the server sends its
// banner, and stops it when the test ends. With Options.SFTPOnly the
// account is limited to internal-sftp by ForceCommand; with
// Options.Restrict, by a restrict,command="internal-sftp" authorized_keys
// line.
//
// Without sshd the test is skipped, or fails when HANDOFF_E2E_REQUIRED is set.
func StartOpenSSH(t testing.TB, opts Options) *Server {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		skipOrFail(t, fmt.Sprintf("OpenSSH server not available (%v); install openssh-server", err))
	}
	// sshd refuses to start without its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		skipOrFail(t, fmt.Sprintf("cannot create /run/sshd for sshd: %v", err))
	}
	dir := t.TempDir()
	u := currentUser(t)
	srv := &Server{User: u.Username}

	client, clientPriv := NewEd25519(t)
	srv.ClientKey = client.PublicKey()
	srv.IdentityFile = filepath.Join(dir, "id_ed25519")
	WritePrivateKey(t, srv.IdentityFile, clientPriv, "")

	_, edPriv := NewEd25519(t)
	_, ecPriv := newECDSA(t)
	edPath := filepath.Join(dir, "ssh_host_ed25519_key")
	ecPath := filepath.Join(dir, "ssh_host_ecdsa_key")
	WritePrivateKey(t, edPath, edPriv, "")
	WritePrivateKey(t, ecPath, ecPriv, "")
	for _, p := range []string{edPath, ecPath} {
		pub := readPub(t, p+".pub")
		srv.HostKeys = append(srv.HostKeys, pub)
	}

	authLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.ClientKey)))
	if opts.Restrict {
		authLine = `restrict,command="internal-sftp" ` + authLine
	}
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, []byte(authLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		conf := sshdConfig(port, dir, edPath, ecPath, authKeys, opts)
		confPath := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		log := &syncBuffer{}
		cmd := exec.Command(SSHDPath, "-D", "-e", "-f", confPath)
		cmd.Stdout = log
		cmd.Stderr = log
		if err := cmd.Start(); err != nil {
			skipOrFail(t, fmt.Sprintf("cannot start sshd: %v", err))
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
		if err := waitBanner(addr, exited, 10*time.Second); err != nil {
			cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%v; sshd said:\n%s", err, log.String())
			continue
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("sshd log:\n%s", log.String())
			}
		})
		srv.finish(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		return srv
	}
	t.Fatalf("sshdtest: sshd did not start: %v", lastErr)
	return nil
}

func sshdConfig(port int, dir, edPath, ecPath, authKeys string, opts Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Port %d\nListenAddress 127.0.0.1\n", port)
	fmt.Fprintf(&b, "HostKey %s\nHostKey %s\n", edPath, ecPath)
	fmt.Fprintf(&b, "AuthorizedKeysFile %s\n", authKeys)
	b.WriteString(`PidFile none
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowAgentForwarding no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
`)
	if opts.ReadOnly {
		b.WriteString("Subsystem sftp internal-sftp -R\n")
	} else {
		b.WriteString("Subsystem sftp internal-sftp\n")
	}
	if opts.SFTPOnly {
		b.WriteString("ForceCommand internal-sftp\n")
	}
	if opts.NoPublicKey {
		b.WriteString("PubkeyAuthentication no\n")
	} else {
		b.WriteString("PubkeyAuthentication yes\n")
	}
	return b.String()
}

// waitBanner waits until addr accepts and sends an SSH banner.
func waitBanner(addr string, exited <-chan error, within time.Duration) error {
	deadline := time.Now().Add(within)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("sshd exited: %v", err)
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if rerr == nil && strings.HasPrefix(line, "SSH-2.0-") {
				return nil
			}
			err = fmt.Errorf("no banner: %q %v", line, rerr)
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("sshd not answering on %s: %v", addr, lastErr)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func readPub(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequiredEnv) != "" {
		t.Fatalf("sshdtest: %s (%s is set, so this is a failure)", msg, RequiredEnv)
	}
	t.Skipf("sshdtest: %s (set %s to make this a failure)", msg, RequiredEnv)
}

// syncBuffer collects sshd's output from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
