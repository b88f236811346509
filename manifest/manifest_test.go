package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

const testHome = "/home/tester"

// load loads testdata/name with $HOME set to testHome.
func load(t *testing.T, name string) (*Manifest, error) {
	t.Helper()
	t.Setenv("HOME", testHome)
	return Load(filepath.Join("testdata", name))
}

func mustLoad(t *testing.T, name string) *Manifest {
	t.Helper()
	m, err := load(t, name)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return m
}

func TestLoadExample(t *testing.T) {
	m := mustLoad(t, "example.yaml")

	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 = %s; want the hash of the file", m.SHA256)
	}
	if !filepath.IsAbs(m.Path) || filepath.Base(m.Path) != "example.yaml" {
		t.Errorf("Path = %q; want an absolute path to example.yaml", m.Path)
	}
	if m.Version != 1 || m.WorkspaceRaw != "~/.openclaw/workspace" || m.Workspace != testHome+"/.openclaw/workspace" {
		t.Errorf("version, workspace = %d, %q (raw %q)", m.Version, m.Workspace, m.WorkspaceRaw)
	}
	if m.Notify.PingURL != "https://hc-ping.com/<uuid>" {
		t.Errorf("PingURL = %q", m.Notify.PingURL)
	}
	if got := m.HostNames(); !slices.Equal(got, []string{"canonical", "laptop"}) {
		t.Errorf("HostNames() = %q", got)
	}

	want := []HostConfig{{
		Name:        "canonical",
		Transport:   "local",
		Inboxes:     []string{"~/.openclaw/workspace/.claude/memory-handoffs"},
		Discover:    []DiscoverRoot{{Root: "~/repos", MaxDepth: 2}},
		Harnesses:   []string{".claude", ".codex", ".grok", ".hermes"},
		MaxDepth:    3,
		MaxFileSize: 1 << 20,
		Settle:      10 * time.Second,
		Timeout:     5 * time.Minute,
		StaleAfter:  DefaultStaleAfter,
	}, {
		Name:        "laptop",
		Transport:   "ssh",
		Discover:    []DiscoverRoot{{Root: "~/code", MaxDepth: 3}},
		Harnesses:   []string{".claude", ".codex", ".grok", ".hermes"},
		MaxDepth:    3,
		MaxFileSize: 1 << 20,
		Settle:      10 * time.Second,
		Timeout:     2 * time.Minute,
		StaleAfter:  DefaultStaleAfter,
		SSH: &SSH{
			Host:         "laptop",
			User:         "me",
			Port:         22,
			IdentityFile: testHome + "/.ssh/handoff_ed25519",
			KnownHosts:   testHome + "/.ssh/known_hosts",
		},
	}}
	if got := m.HostConfigs(); !reflect.DeepEqual(got, want) {
		t.Errorf("HostConfigs() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestDefaultsApplied(t *testing.T) {
	m := mustLoad(t, "minimal.yaml")

	if m.WorkspaceRaw != DefaultWorkspace || m.Workspace != testHome+"/.openclaw/workspace" {
		t.Errorf("workspace = %q (raw %q); want the default, expanded", m.Workspace, m.WorkspaceRaw)
	}
	d := m.Defaults
	if !slices.Equal(d.Harnesses, DefaultHarnesses()) || d.MaxDepth == nil || *d.MaxDepth != 3 ||
		d.MaxFileSize == nil || *d.MaxFileSize != MiB || d.Settle == nil || d.Settle.Duration != 10*time.Second ||
		d.Timeout == nil || d.Timeout.Duration != 5*time.Minute || d.ReviewMaxAge == nil || d.ReviewMaxAge.Duration != DefaultReviewMaxAge ||
		d.ShareNotes == nil || !*d.ShareNotes {
		t.Errorf("Defaults = %+v; want every built-in default", d)
	}
	h := m.Hosts[0]
	if h.Harnesses != nil || h.MaxDepth != nil || h.MaxFileSize != nil || h.Settle != nil || h.Timeout != nil || h.Discover[0].MaxDepth != nil {
		t.Errorf("host %+v: overrides were filled in; they must stay as written", h)
	}
	want := HostConfig{
		Name:        "here",
		Transport:   "local",
		Discover:    []DiscoverRoot{{Root: "/srv/repos", MaxDepth: 3}},
		Harnesses:   []string{".claude", ".codex", ".grok", ".hermes"},
		MaxDepth:    3,
		MaxFileSize: 1 << 20,
		Settle:      10 * time.Second,
		Timeout:     5 * time.Minute,
		StaleAfter:  DefaultStaleAfter,
	}
	if got, ok := m.Host("here"); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("Host(here) = %+v, %v; want %+v", got, ok, want)
	}
}

func TestPerHostOverride(t *testing.T) {
	m := mustLoad(t, "overrides.yaml")

	if m.Workspace != "/var/lib/handoff/workspace" || m.WorkspaceRaw != m.Workspace {
		t.Errorf("workspace = %q (raw %q)", m.Workspace, m.WorkspaceRaw)
	}
	want := []HostConfig{{
		Name:        "inherits",
		Transport:   "local",
		Inboxes:     []string{"/home/me/notes/.claude/memory-handoffs"},
		Discover:    []DiscoverRoot{{Root: "~/src", MaxDepth: 4}, {Root: "~/work", MaxDepth: 1}},
		Harnesses:   []string{".claude"},
		MaxDepth:    4,
		MaxFileSize: 256 << 10,
		Settle:      30 * time.Second,
		Timeout:     10 * time.Minute,
		StaleAfter:  14 * 24 * time.Hour,
	}, {
		Name:        "overrides",
		Transport:   "ssh",
		Discover:    []DiscoverRoot{{Root: "/srv/git/repos", MaxDepth: 0}},
		Harnesses:   []string{".codex", ".grok"},
		MaxDepth:    0,
		MaxFileSize: 2000000,
		Settle:      0,
		Timeout:     90 * time.Minute,
		StaleAfter:  0,
		SSH: &SSH{
			Host:                "build-box.example.net",
			Port:                2222,
			ProxyJump:           "bastion",
			ConnectTimeout:      &Duration{15 * time.Second},
			ServerAliveInterval: &Duration{30 * time.Second},
			IdentitiesOnly:      ptr(true),
		},
	}}
	if got := m.HostConfigs(); !reflect.DeepEqual(got, want) {
		t.Errorf("HostConfigs() =\n%+v\nwant\n%+v", got, want)
	}
}

// TestShareNotesDefault: defaults.share_notes is every host's unless the
// host sets its own, and true when neither does. Invariant: a fleet that
// keeps notes home by default shares only a host that says so, and a
// manifest that says nothing shares every host's notes as before.
func TestShareNotesDefault(t *testing.T) {
	for _, tc := range []struct {
		name, defaults, a, b string
		keepA, keepB         bool
	}{
		{"neither", "", "", "", false, false},
		{"host only", "", "share_notes: false", "", true, false},
		{"defaults false", "share_notes: false", "", "share_notes: true", true, false},
		{"defaults true", "share_notes: true", "share_notes: false", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := func(name, extra string) string {
				h := "  - name: " + name + "\n    transport: local\n    discover: [{root: /srv/" + name + "}]\n"
				if extra != "" {
					h += "    " + extra + "\n"
				}
				return h
			}
			doc := "version: 1\nworkspace: /var/lib/ws\n"
			if tc.defaults != "" {
				doc += "defaults: {" + tc.defaults + "}\n"
			}
			doc += "hosts:\n" + host("a", tc.a) + host("b", tc.b)
			m, err := Parse([]byte(doc), "writers.yaml")
			if err != nil {
				t.Fatal(err)
			}
			a, _ := m.Host("a")
			b, _ := m.Host("b")
			if a.KeepNotes != tc.keepA || b.KeepNotes != tc.keepB {
				t.Errorf("KeepNotes a=%v b=%v; want %v %v", a.KeepNotes, b.KeepNotes, tc.keepA, tc.keepB)
			}
		})
	}
}

func TestHostLookup(t *testing.T) {
	m := mustLoad(t, "example.yaml")
	if c, ok := m.Host("laptop"); !ok || c.Name != "laptop" || c.Transport != "ssh" {
		t.Errorf("Host(laptop) = %+v, %v", c, ok)
	}
	for _, name := range []string{"nope", "Laptop", ""} {
		if _, ok := m.Host(name); ok {
			t.Errorf("Host(%q) found a host", name)
		}
	}
	// The resolved view is a copy: changing it leaves the manifest alone.
	c, _ := m.Host("canonical")
	c.Inboxes[0] = "/elsewhere"
	c.Harnesses[0] = ".other"
	if m.Hosts[0].Inboxes[0] == "/elsewhere" || m.Defaults.Harnesses[0] == ".other" {
		t.Error("HostConfig shares slices with the Manifest")
	}
}

func TestEffectiveWithoutDefaults(t *testing.T) {
	// A Manifest built in code, never parsed, still resolves to the
	// built-in defaults.
	var m Manifest
	c := m.Effective(Host{Name: "x", Transport: "local", Discover: []Discover{{Root: "/r"}}})
	if !slices.Equal(c.Harnesses, DefaultHarnesses()) || c.MaxDepth != DefaultMaxDepth || c.MaxFileSize != int64(DefaultMaxFileSize) ||
		c.Settle != DefaultSettle || c.Timeout != DefaultTimeout || c.Discover[0].MaxDepth != DefaultMaxDepth {
		t.Errorf("Effective = %+v; want the built-in defaults", c)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "writers.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v; want fs.ErrNotExist", err)
	}
}

func TestExpandHome(t *testing.T) {
	for _, tc := range []struct {
		p, home, want string
	}{
		{"~", "/home/me", "/home/me"},
		{"~/", "/home/me", "/home/me"},
		{"~/x", "/home/me", "/home/me/x"},
		{"~/x/../y", "/home/me", "/home/me/y"},
		{"~/.claude/memory-handoffs", "/home/me/", "/home/me/.claude/memory-handoffs"},
		{"/abs/path", "/home/me", "/abs/path"},
		{"~user/x", "/home/me", "~user/x"},
		{"x/~/y", "/home/me", "x/~/y"},
		{"~x", "/home/me", "~x"},
		{"", "/home/me", ""},
		{"~/x", "", "~/x"},
		{"~", "", "~"},
	} {
		if got := ExpandHome(tc.p, tc.home); got != tc.want {
			t.Errorf("ExpandHome(%q, %q) = %q; want %q", tc.p, tc.home, got, tc.want)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	for _, tc := range []struct {
		xdg, home, want string
	}{
		{"/etc/xdg-me", "/home/me", "/etc/xdg-me/handoff/writers.yaml"},
		{"", "/home/me", "/home/me/.config/handoff/writers.yaml"},
		{"relative/dir", "/home/me", "/home/me/.config/handoff/writers.yaml"},
		{"", "", "~/.config/handoff/writers.yaml"},
	} {
		t.Setenv("XDG_CONFIG_HOME", tc.xdg)
		t.Setenv("HOME", tc.home)
		if got := DefaultPath(); got != tc.want {
			t.Errorf("DefaultPath() with XDG_CONFIG_HOME=%q HOME=%q = %q; want %q", tc.xdg, tc.home, got, tc.want)
		}
	}
}

// TestReceiptsRetention: the receipts block's defaults (90d, 7d), its
// settings, 0 for forever, keep_idle never longer than keep, and a
// retention under an hour refused. Invariant: a typo cannot make sync
// remove a receipt minutes after it was written.
func TestReceiptsRetention(t *testing.T) {
	const hosts = "hosts:\n  - {name: a, transport: local, inboxes: [~/x/.claude/memory-handoffs]}\n"
	day := 24 * time.Hour
	for _, c := range []struct {
		block          string
		keep, keepIdle time.Duration
		list           bool
	}{
		{"", 90 * day, 7 * day, false},
		{"receipts: {keep: 30d, keep_idle: 2d, list_quiet_inboxes: true}\n", 30 * day, 2 * day, true},
		{"receipts: {keep: 0}\n", 0, 0, false},
		{"receipts: {keep: 3d, keep_idle: 0}\n", 3 * day, 3 * day, false},
		{"receipts: {keep: 3d, keep_idle: 9d}\n", 3 * day, 3 * day, false},
	} {
		m, err := parse(t, "version: 1\nworkspace: /w\n"+c.block+hosts)
		if err != nil {
			t.Fatalf("%q: %v", c.block, err)
		}
		k, ki := m.Receipts.Retention()
		if k != c.keep || ki != c.keepIdle || m.Receipts.ListQuietInboxes != c.list {
			t.Errorf("%q: keep %v, keep_idle %v, list %v; want %v, %v, %v", c.block, k, ki, m.Receipts.ListQuietInboxes, c.keep, c.keepIdle, c.list)
		}
	}
	_, err := parse(t, "version: 1\nworkspace: /w\nreceipts: {keep_idle: 10m}\n"+hosts)
	if fes := fieldErrors(t, err); len(fes) != 1 || fes[0].Field != "receipts.keep_idle" {
		t.Fatalf("keep_idle 10m: %v, want an error naming receipts.keep_idle", err)
	}
}

// TestBackupsRetention: the backups block's default (90d), its setting, 0
// for forever, and a retention under a day refused with the file, the
// field and a hint. Invariant: a typo (1m for a month) cannot make sync
// remove a person's undo minutes after the change.
func TestBackupsRetention(t *testing.T) {
	const hosts = "hosts:\n  - {name: a, transport: local, inboxes: [~/x/.claude/memory-handoffs]}\n"
	day := 24 * time.Hour
	for _, c := range []struct {
		block string
		keep  time.Duration
	}{
		{"", 90 * day},
		{"backups: {keep: 30d}\n", 30 * day},
		{"backups: {keep: 24h}\n", day},
		{"backups: {keep: 0}\n", 0},
	} {
		m, err := parse(t, "version: 1\nworkspace: /w\n"+c.block+hosts)
		if err != nil {
			t.Fatalf("%q: %v", c.block, err)
		}
		if k := m.Backups.Retention(); k != c.keep {
			t.Errorf("%q: keep %v; want %v", c.block, k, c.keep)
		}
	}
	for _, bad := range []string{"1m", "23h"} {
		_, err := parse(t, "version: 1\nworkspace: /w\nbackups: {keep: "+bad+"}\n"+hosts)
		fes := fieldErrors(t, err)
		if len(fes) != 1 || fes[0].Field != "backups.keep" || fes[0].File == "" || fes[0].Hint == "" {
			t.Fatalf("keep %s: %v, want one error naming the file and backups.keep, with a hint", bad, err)
		}
	}
	if _, err := parse(t, "version: 1\nworkspace: /w\nbackups: {keep: forever}\n"+hosts); err == nil {
		t.Error("keep: forever was accepted; the one spelling of forever is 0")
	}
}
