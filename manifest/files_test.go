package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
)

// TestCheckFiles: a missing identity_file or known_hosts, and an identity
// file others may read, are each reported with the file, host and field.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	kh := filepath.Join(dir, "known_hosts")
	path := filepath.Join(dir, "writers.yaml")
	text := `version: 1
hosts:
  - name: local
    transport: local
    inboxes: [/x/.claude/memory-handoffs]
  - name: laptop
    transport: ssh
    ssh: {host: laptop, identity_file: ` + key + `, known_hosts: ` + kh + `}
    inboxes: [/x/.claude/memory-handoffs]
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatalf("Load must not need the files: %v", err)
	}
	check := func(want ...string) {
		t.Helper()
		fes := manifest.FieldErrors(m.CheckFiles())
		if len(fes) != len(want) {
			t.Fatalf("CheckFiles: %v, want %d problem(s)", fes, len(want))
		}
		for i, fe := range fes {
			if fe.Host != "laptop" || fe.File != path || !strings.Contains(fe.Error(), want[i]) || fe.Hint == "" {
				t.Errorf("problem %d: %+v (%q), want host laptop, file %s, %q and a hint", i, fe, fe.Error(), path, want[i])
			}
		}
	}
	check(`host "laptop": ssh.identity_file: `+key+" does not exist", `host "laptop": ssh.known_hosts: `+kh+" does not exist")

	os.WriteFile(key, []byte("k"), 0o644)
	os.WriteFile(kh, nil, 0o644)
	check("ssh.identity_file: " + key + " is accessible by group or others (mode 0644)")

	os.Chmod(key, 0o600)
	if err := m.CheckFiles(); err != nil {
		t.Errorf("CheckFiles with both files there: %v", err)
	}
}
