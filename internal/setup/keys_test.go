package setup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
)

// CheckKeys refuses a selected ssh host whose identity file others may
// read, naming the host and the fix, and leaves every other host (local,
// a private key, a missing file) to Dial.
func TestCheckKeys(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.ssh/config
	dir := t.TempDir()
	private, loose := filepath.Join(dir, "private"), filepath.Join(dir, "loose")
	os.WriteFile(private, []byte("k"), 0o600)
	os.WriteFile(loose, []byte("k"), 0o644)
	m, err := manifest.Parse([]byte(`version: 1
workspace: /ws
hosts:
  - {name: local, transport: local, inboxes: [/a/.claude/memory-handoffs]}
  - {name: ok, transport: ssh, ssh: {host: ok, identity_file: `+private+`}, inboxes: [/a/.claude/memory-handoffs]}
  - {name: gone, transport: ssh, ssh: {host: gone, identity_file: `+filepath.Join(dir, "absent")+`}, inboxes: [/a/.claude/memory-handoffs]}
  - {name: open, transport: ssh, ssh: {host: open, identity_file: `+loose+`}, inboxes: [/a/.claude/memory-handoffs]}
`), filepath.Join(dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hosts := m.HostConfigs()
	if err := CheckKeys(hosts[:3]); err != nil {
		t.Errorf("CheckKeys without the open key: %v", err)
	}
	err = CheckKeys(hosts)
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Host != "open" || !strings.HasPrefix(err.Error(), "host open: ") ||
		!strings.HasPrefix(ke.Hint(), "chmod 600 "+loose) {
		t.Fatalf("CheckKeys: %v, want a *KeyError for host open with the chmod hint", err)
	}
}
