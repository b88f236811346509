package ssh

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// Invariant: a private key that group or others may read is never
// offered: Dial fails before it connects, as OpenSSH refuses such a key,
// and says how to fix it. A default key (none configured) that is
// unprotected is passed over, as OpenSSH does.
func TestUnprotectedIdentityRefused(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{})
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		key := filepath.Join(t.TempDir(), "id")
		b, err := os.ReadFile(srv.IdentityFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, b, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(key, mode)
		cfg := configFor(srv)
		cfg.IdentityFiles = []string{key}
		_, err = Dial(ctxT(t), cfg, nil)
		var loose *UnprotectedKeyError
		if !errors.As(err, &loose) || loose.Path != key || loose.Mode != mode {
			t.Fatalf("mode %04o: Dial: %v, want *UnprotectedKeyError for %s", mode, err, key)
		}
		if want := "chmod 600 " + key; !strings.HasPrefix(loose.Hint(), want) {
			t.Errorf("Hint() = %q, want it to start with %q", loose.Hint(), want)
		}
		if err := CheckIdentityFiles(cfg); !errors.As(err, &loose) {
			t.Errorf("mode %04o: CheckIdentityFiles: %v, want *UnprotectedKeyError", mode, err)
		}
	}
	if n := srv.Accepted(); n != 0 {
		t.Errorf("%d connections: an unprotected key must stop Dial before it connects", n)
	}

	// 0600 and 0400 are fine.
	cfg := configFor(srv)
	os.Chmod(cfg.IdentityFiles[0], 0o400)
	if err := CheckIdentityFiles(cfg); err != nil {
		t.Errorf("CheckIdentityFiles on a 0400 key: %v", err)
	}
	dialT(t, cfg).Close()
}

// TestRefusedHint: a port nobody listens on fails with a *RefusedError
// whose hint names the address and the settings to check.
func TestRefusedHint(t *testing.T) {
	t.Parallel()
	port := closedPortT(t)
	cfg := Config{Alias: "gone", HostName: "127.0.0.1", Port: port, IdentityFiles: []string{writeKey(t)},
		KnownHostsFiles: []string{sshdtest.WriteKnownHosts(t)}, ConnectTimeout: 10 * time.Second}
	_, err := Dial(ctxT(t), cfg, nil)
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial: %v, want a *RefusedError that is ECONNREFUSED", err)
	}
	want := "nothing accepts connections at 127.0.0.1:" + itoa(port) + ": check that sshd runs on gone and listens on port " + itoa(port)
	if !strings.HasPrefix(re.Hint(), want) || !strings.Contains(re.Hint(), "`ssh -p "+itoa(port)+" 127.0.0.1`") {
		t.Errorf("Hint() = %q, want it to start with %q and name the ssh command", re.Hint(), want)
	}
}

// TestNoKeyMethodHint: real OpenSSH with public keys turned off offers no
// method a key can use; the auth error says so, and is not retried.
func TestNoKeyMethodHint(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{NoPublicKey: true})
	_, err := Dial(ctxT(t), configFor(srv), nil)
	var ae *AuthError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAuth) || IsRetryable(err) {
		t.Fatalf("Dial: %v, want a non-retryable *AuthError", err)
	}
	if !strings.Contains(err.Error(), "attempted methods [none]") || !strings.Contains(ae.Hint(), "takes no public-key login") ||
		!strings.Contains(ae.Hint(), "PubkeyAuthentication yes") {
		t.Errorf("error %q, hint %q: want the none-methods case named", err, ae.Hint())
	}

	// A key the server does not know keeps the authorized_keys hint.
	ok := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	cfg := configFor(ok)
	cfg.IdentityFiles = []string{writeKey(t)}
	if _, err := Dial(ctxT(t), cfg, nil); !errors.As(err, &ae) || !strings.Contains(ae.Hint(), "authorized_keys") {
		t.Errorf("wrong key: %v, want the authorized_keys hint", err)
	}
}

func closedPortT(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
