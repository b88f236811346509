package ssh

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// TestMain keeps the tests hermetic: no ssh-agent of the person running
// them, and a throwaway home, so that ~/.ssh/config, ~/.ssh/known_hosts and
// default identity files are the tests' own.
func TestMain(m *testing.M) {
	os.Unsetenv("SSH_AUTH_SOCK")
	home, err := os.MkdirTemp("", "sshfs-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// configFor is a Config that reaches srv with its own key and known_hosts.
func configFor(srv *sshdtest.Server) Config {
	return Config{
		Alias:           "testhost",
		HostName:        srv.Host,
		Port:            srv.Port,
		User:            srv.User,
		IdentityFiles:   []string{srv.IdentityFile},
		KnownHostsFiles: []string{srv.KnownHosts},
		ConnectTimeout:  10 * time.Second,
	}
}

func dialT(t *testing.T, cfg Config) *FS {
	t.Helper()
	f, err := Dial(ctxT(t), cfg, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
