package ssh

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	home, err := os.UserHomeDir() // the throwaway home TestMain set up
	if err != nil {
		t.Fatal(err)
	}
	conf := writeSSHConfig(t, `
Host laptop
  HostName laptop.example.net
  Port 2222
  User me
  IdentityFile ~/.ssh/handoff_%n
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/kh1 /etc/kh2
  ConnectTimeout 7
  ServerAliveInterval 9
  ServerAliveCountMax 5
  ProxyJump bastion

Host *.lan
  HostName %h.example.org

Host direct
  ProxyJump none

Host *
  User fallback
`)
	for _, tc := range []struct {
		name     string
		alias    string
		override Config
		want     Config
	}{
		{
			name:  "everything from ssh_config",
			alias: "laptop",
			want: Config{
				Alias: "laptop", HostName: "laptop.example.net", Port: 2222, User: "me",
				IdentityFiles:   []string{filepath.Join(home, ".ssh", "handoff_laptop")},
				IdentitiesOnly:  true,
				KnownHostsFiles: []string{filepath.Join(home, ".ssh", "kh1"), "/etc/kh2"},
				ProxyJump:       "bastion",
				ConnectTimeout:  7 * time.Second, ServerAliveInterval: 9 * time.Second, ServerAliveCountMax: 5,
			},
		},
		{
			name:  "override wins",
			alias: "laptop",
			override: Config{HostName: "10.0.0.2", Port: 22, User: "other", IdentityFiles: []string{"~/k"},
				KnownHostsFiles: []string{"/kh"}, ProxyJump: "none", ConnectTimeout: time.Second},
			want: Config{
				Alias: "laptop", HostName: "10.0.0.2", Port: 22, User: "other",
				IdentityFiles: []string{filepath.Join(home, "k")}, IdentitiesOnly: true,
				KnownHostsFiles: []string{"/kh"},
				ConnectTimeout:  time.Second, ServerAliveInterval: 9 * time.Second, ServerAliveCountMax: 5,
			},
		},
		{
			name:  "token in HostName, defaults elsewhere",
			alias: "nas.lan",
			want: Config{
				Alias: "nas.lan", HostName: "nas.lan.example.org", Port: 22, User: "fallback",
				KnownHostsFiles: []string{filepath.Join(home, ".ssh", "known_hosts")},
				ConnectTimeout:  15 * time.Second, ServerAliveInterval: 15 * time.Second, ServerAliveCountMax: 3,
			},
		},
		{
			name:  "ProxyJump none",
			alias: "direct",
			want: Config{
				Alias: "direct", HostName: "direct", Port: 22, User: "fallback",
				KnownHostsFiles: []string{filepath.Join(home, ".ssh", "known_hosts")},
				ConnectTimeout:  15 * time.Second, ServerAliveInterval: 15 * time.Second, ServerAliveCountMax: 3,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.override.SSHConfigPath = conf
			tc.want.SSHConfigPath = conf
			got, err := Resolve(tc.alias, tc.override)
			if err != nil {
				t.Fatal(err)
			}
			got.hop = hopSettings{} // what the hops inherit: TestResolveHopSettings
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Resolve(%q):\n got %+v\nwant %+v", tc.alias, got, tc.want)
			}
		})
	}
}

// With no SSHConfigPath, ~/.ssh/config is read; with none there, the
// defaults apply (the current user, port 22). An explicit missing file is
// an error, and so is a bad Port.
func TestResolveFiles(t *testing.T) {
	home, _ := os.UserHomeDir()
	cfg, err := Resolve("plain", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HostName != "plain" || cfg.Port != 22 || cfg.User != currentUser() {
		t.Fatalf("defaults without any ssh_config: %+v", cfg)
	}
	if _, err := Resolve("x", Config{SSHConfigPath: filepath.Join(t.TempDir(), "absent")}); err == nil {
		t.Fatal("Resolve with a missing explicit ssh_config succeeded")
	}
	if _, err := Resolve("x", Config{SSHConfigPath: writeSSHConfig(t, "Host x\n  Port http\n")}); err == nil {
		t.Fatal("Resolve accepted Port http")
	}

	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	userConf := filepath.Join(home, ".ssh", "config")
	if err := os.WriteFile(userConf, []byte("Host fromhome\n  Port 2200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(userConf)
	cfg, err = Resolve("fromhome", Config{})
	if err != nil || cfg.Port != 2200 {
		t.Fatalf("~/.ssh/config not read: %+v %v", cfg, err)
	}
}

func TestParseProxyJump(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []jumpSpec
		bad  bool
	}{
		{in: "", want: nil},
		{in: "none", want: nil},
		{in: "bastion", want: []jumpSpec{{host: "bastion"}}},
		{in: "me@bastion:2222", want: []jumpSpec{{user: "me", host: "bastion", port: 2222}}},
		{in: "a, b@c:22", want: []jumpSpec{{host: "a"}, {user: "b", host: "c", port: 22}}},
		{in: "[::1]:2200", want: []jumpSpec{{host: "::1", port: 2200}}},
		{in: "u@[fe80::1]", want: []jumpSpec{{user: "u", host: "fe80::1"}}},
		{in: "ssh://u@h:1", want: []jumpSpec{{user: "u", host: "h", port: 1}}},
		{in: "a,,b", bad: true},
		{in: "u@", bad: true},
		{in: "h:http", bad: true},
		{in: "h:70000", bad: true},
		{in: "[::1", bad: true},
	} {
		got, err := parseProxyJump(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("parseProxyJump(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseProxyJump(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestResolveHopSettings: identities_only: false from the caller beats
// ssh_config's IdentitiesOnly yes, and the caller's identity and
// known_hosts files are every jump host's too, over the hop's own
// ssh_config; what the caller left unset still comes from ssh_config.
func TestResolveHopSettings(t *testing.T) {
	home, _ := os.UserHomeDir()
	conf := writeSSHConfig(t, `Host target
    HostName 10.0.0.9
    IdentitiesOnly yes
    IdentityFile ~/.ssh/target_key
    ProxyJump jumpuser@jump:2200
Host jump
    HostName 10.0.0.1
    IdentityFile ~/.ssh/jump_key
    UserKnownHostsFile ~/.ssh/jump_known
    IdentitiesOnly yes
`)
	cfg, err := Resolve("target", Config{SSHConfigPath: conf, IdentitiesOnly: false, IdentitiesOnlySet: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IdentitiesOnly {
		t.Error("identities_only: false did not override ssh_config's IdentitiesOnly yes")
	}
	if want := []string{filepath.Join(home, ".ssh/target_key")}; !reflect.DeepEqual(cfg.IdentityFiles, want) {
		t.Errorf("IdentityFiles = %v, want ssh_config's %v", cfg.IdentityFiles, want)
	}
	hops, err := resolveJumps(cfg)
	if err != nil || len(hops) != 1 {
		t.Fatalf("resolveJumps: %v, %v", hops, err)
	}
	h := hops[0]
	if h.HostName != "10.0.0.1" || h.User != "jumpuser" || h.Port != 2200 || h.IdentitiesOnly {
		t.Errorf("hop without manifest files: %+v", h)
	}
	if !reflect.DeepEqual(h.IdentityFiles, []string{filepath.Join(home, ".ssh/jump_key")}) ||
		!reflect.DeepEqual(h.KnownHostsFiles, []string{filepath.Join(home, ".ssh/jump_known")}) {
		t.Errorf("hop files %v %v, want its ssh_config's", h.IdentityFiles, h.KnownHostsFiles)
	}

	cfg, err = Resolve("target", Config{SSHConfigPath: conf, IdentityFiles: []string{"/m/key"}, KnownHostsFiles: []string{"/m/known_hosts"}})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.IdentitiesOnly {
		t.Error("without identities_only in the manifest, ssh_config's IdentitiesOnly yes applies")
	}
	hops, err = resolveJumps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h := hops[0]; !reflect.DeepEqual(h.IdentityFiles, []string{"/m/key"}) || !reflect.DeepEqual(h.KnownHostsFiles, []string{"/m/known_hosts"}) {
		t.Errorf("hop files %v %v, want the manifest's", h.IdentityFiles, h.KnownHostsFiles)
	}
}

// countConfigOpens counts the ssh_config files opened until the test ends.
func countConfigOpens(t *testing.T) *int {
	t.Helper()
	n := new(int)
	orig := openConfigFile
	openConfigFile = func(name string) (io.ReadCloser, error) {
		*n++
		return orig(name)
	}
	t.Cleanup(func() { openConfigFile = orig })
	return n
}

// A ConfigFile is read once: resolving hosts through it, their ProxyJump
// hops and CheckIdentityFiles included, opens no ssh_config, and gives
// each host exactly the settings that reading the file gives it. Without
// one, every Resolve reads the file again.
func TestConfigFileReadOnce(t *testing.T) {
	conf := writeSSHConfig(t, `Host target
    HostName 10.0.0.9
    User alice
    Port 2222
    IdentityFile ~/.ssh/target_key
    ProxyJump jumpuser@jump:2200,second
Host jump
    HostName 10.0.0.1
    UserKnownHostsFile ~/.ssh/jump_known
Host second
    HostName 10.0.0.2
Host *
    ServerAliveInterval 7
`)
	opens := countConfigOpens(t)
	f, err := ReadConfigFile(conf)
	if err != nil || *opens != 1 {
		t.Fatalf("ReadConfigFile: %v, %d opens", err, *opens)
	}
	for _, alias := range []string{"target", "jump", "second", "other"} {
		*opens = 0
		want, err := Resolve(alias, Config{SSHConfigPath: conf})
		if err != nil || *opens != 1 {
			t.Fatalf("Resolve %s by path: %v, %d opens, want 1", alias, err, *opens)
		}
		wantHops, err := resolveJumps(want)
		if err != nil {
			t.Fatal(err)
		}
		*opens = 0
		got, err := Resolve(alias, Config{SSHConfigFile: f})
		if err != nil {
			t.Fatal(err)
		}
		hops, err := resolveJumps(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckIdentityFiles(got); err != nil {
			t.Fatal(err)
		}
		if *opens != 0 {
			t.Errorf("%s through a ConfigFile: %d ssh_config opens, want 0", alias, *opens)
		}
		got.SSHConfigFile, want.SSHConfigPath = nil, ""
		for i := range hops {
			hops[i].SSHConfigFile, wantHops[i].SSHConfigPath = nil, ""
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(hops, wantHops) {
			t.Errorf("%s through a ConfigFile:\n got %+v %+v\nwant %+v %+v", alias, got, hops, want, wantHops)
		}
	}
	target, err := Resolve("target", Config{SSHConfigFile: f})
	if err != nil {
		t.Fatal(err)
	}
	if hops, err := resolveJumps(target); err != nil || len(hops) != 2 || hops[0].HostName != "10.0.0.1" || hops[1].HostName != "10.0.0.2" {
		t.Errorf("target's hops through the ConfigFile: %+v, %v", hops, err)
	}

	// ~/.ssh/config missing: a ConfigFile with no settings; an explicit
	// missing file: an error, as Resolve says.
	t.Setenv("HOME", t.TempDir())
	f, err = ReadConfigFile("")
	if err != nil || !f.Missing {
		t.Fatalf("ReadConfigFile without ~/.ssh/config: %+v, %v", f, err)
	}
	if cfg, err := Resolve("plain", Config{SSHConfigFile: f}); err != nil || cfg.HostName != "plain" || cfg.Port != DefaultPort {
		t.Fatalf("Resolve through a missing ~/.ssh/config: %+v, %v", cfg, err)
	}
	if _, err := ReadConfigFile(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("ReadConfigFile of a missing explicit file succeeded")
	}
}

// The local user is looked up only when a setting needs it: the default
// login, or a %u token; a host whose user is set and whose settings name
// no %u resolves without a lookup (with cgo, one reads nsswitch.conf and
// /etc/passwd and tries nscd).
func TestResolveLooksUpUserOnlyWhenNeeded(t *testing.T) {
	conf := writeSSHConfig(t, `Host named
    User alice
    IdentityFile ~/.ssh/id_%r
Host tokened
    User alice
    IdentityFile ~/.ssh/id_%u
`)
	lookups := 0
	orig := lookupUser
	lookupUser = func() string { lookups++; return "localme" }
	t.Cleanup(func() { lookupUser = orig })
	home, _ := os.UserHomeDir()
	for _, tc := range []struct {
		alias, user string
		lookups     int
		wantUser    string
		wantID      string
	}{
		{"named", "", 0, "alice", filepath.Join(home, ".ssh/id_alice")},
		{"other", "bob", 0, "bob", ""},
		{"tokened", "", 1, "alice", filepath.Join(home, ".ssh/id_localme")},
		{"other", "", 1, "localme", ""},
	} {
		lookups = 0
		cfg, err := Resolve(tc.alias, Config{SSHConfigPath: conf, User: tc.user})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.withDefaults(); err != nil {
			t.Fatal(err)
		}
		id := ""
		if len(cfg.IdentityFiles) > 0 {
			id = cfg.IdentityFiles[0]
		}
		if lookups != tc.lookups || cfg.User != tc.wantUser || id != tc.wantID {
			t.Errorf("%s (user %q): %d lookups, user %q, identity %q; want %d, %q, %q",
				tc.alias, tc.user, lookups, cfg.User, id, tc.lookups, tc.wantUser, tc.wantID)
		}
	}
}
