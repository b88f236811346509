package setup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// freshSSHConfigs forgets what this process read of ~/.ssh/config and
// counts the reads until the test ends.
func freshSSHConfigs(t *testing.T) *int {
	t.Helper()
	reads := new(int)
	orig := readSSHConfig
	readSSHConfig = func() (*sshfs.ConfigFile, error) {
		*reads++
		return orig()
	}
	sshConfigs.mu.Lock()
	sshConfigs.files = nil
	sshConfigs.mu.Unlock()
	t.Cleanup(func() {
		readSSHConfig = orig
		sshConfigs.mu.Lock()
		sshConfigs.files = nil
		sshConfigs.mu.Unlock()
	})
	return reads
}

// A run reads ~/.ssh/config once, for all its hosts, CheckKeys and their
// jump hosts included, and a worker handed the run's copy reads it not
// at all; each host gets the settings that reading the file for it gives.
// Another HOME is another file, read anew.
func TestSSHConfigReadOnce(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	conf := "Host a\n  HostName 10.0.0.1\n  Port 2201\nHost b\n  User bob\n  ProxyJump a\nHost *\n  ServerAliveInterval 9\n"
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte(`version: 1
workspace: /ws
hosts:
  - {name: one, transport: ssh, ssh: {host: a}, inboxes: [/x/.claude/memory-handoffs]}
  - {name: two, transport: ssh, ssh: {host: b, user: carol}, inboxes: [/x/.claude/memory-handoffs]}
  - {name: three, transport: ssh, ssh: {host: c, port: 22}, inboxes: [/x/.claude/memory-handoffs]}
  - {name: here, transport: local, inboxes: [/x/.claude/memory-handoffs]}
`), filepath.Join(home, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hosts := m.HostConfigs()
	reads := freshSSHConfigs(t)

	// The run: CheckKeys, then each host's settings and what it hands on.
	if err := CheckKeys(hosts); err != nil {
		t.Fatal(err)
	}
	var got []sshfs.Config
	var handed []*sshfs.ConfigFile
	for _, h := range hosts[:3] {
		cfg, err := SSHConfig(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sshfs.JumpHosts(cfg); err != nil {
			t.Fatal(err)
		}
		got = append(got, cfg)
		handed = append(handed, HandedSSHConfig(h))
	}
	if *reads != 1 {
		t.Fatalf("the run read ~/.ssh/config %d times, want 1", *reads)
	}
	if HandedSSHConfig(hosts[3]) != nil {
		t.Error("a local host's worker was handed an ssh_config")
	}
	for i, h := range hosts[:3] {
		o := sshfs.Config{User: h.SSH.User, Port: h.SSH.Port}
		want, err := sshfs.Resolve(h.SSH.Host, o)
		if err != nil {
			t.Fatal(err)
		}
		g := got[i]
		g.SSHConfigFile = nil
		if !reflect.DeepEqual(g, want) {
			t.Errorf("host %s: %+v, reading the file gives %+v", h.Name, g, want)
		}
	}

	// A worker: a process of its own, handed the run's copy over JSON.
	for i, h := range hosts[:3] {
		data, err := json.Marshal(handed[i])
		if err != nil {
			t.Fatal(err)
		}
		reads = freshSSHConfigs(t)
		var f *sshfs.ConfigFile
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		UseSSHConfig(f)
		cfg, err := SSHConfig(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sshfs.JumpHosts(cfg); err != nil {
			t.Fatal(err)
		}
		if *reads != 0 {
			t.Errorf("worker of %s read ~/.ssh/config %d times, want 0", h.Name, *reads)
		}
		cfg.SSHConfigFile, got[i].SSHConfigFile = nil, nil
		if !reflect.DeepEqual(cfg, got[i]) {
			t.Errorf("worker of %s: %+v, the run's %+v", h.Name, cfg, got[i])
		}
	}

	// Another HOME: its own file, read once.
	t.Setenv("HOME", t.TempDir())
	if _, err := SSHConfig(hosts[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := SSHConfig(hosts[1]); err != nil {
		t.Fatal(err)
	}
	if *reads != 1 {
		t.Errorf("after HOME changed: %d reads, want 1", *reads)
	}
	if cfg, _ := SSHConfig(hosts[0]); cfg.HostName != "a" || cfg.Port != 22 {
		t.Errorf("without a ~/.ssh/config host a resolved to %s:%d", cfg.HostName, cfg.Port)
	}
}
