package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestParallelWorkersShareStore: eight hosts pulled at once store through
// the run's one writer into the ledger. Regression (of the spool files
// before it): a worker opening the spool used to delete the temporary
// files of workers still writing, failing their hosts. Invariant:
// concurrent pulls never disturb each other; every handoff lands once.
func TestParallelWorkersShareStore(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nworkspace: %s\ndefaults: {settle: 0s}\nhosts:\n", filepath.Join(dir, "ws"))
	for h := 1; h <= 8; h++ {
		in := filepath.Join(dir, fmt.Sprintf("h%d/.claude/memory-handoffs", h))
		for i := 1; i <= 30; i++ {
			mustWrite(t, filepath.Join(in, fmt.Sprintf("f%d.md", i)), docHandoff("TOOLS.md", fmt.Sprintf("- m-%d-%d", h, i)))
		}
		fmt.Fprintf(&b, "  - name: h%d\n    transport: local\n    inboxes: [%s]\n", h, in)
	}
	mf := filepath.Join(dir, "writers.yaml")
	mustWrite(t, mf, b.String())
	initWorkspace(t, filepath.Join(dir, "ws"))
	code, out := runBinary(t, "sync", "--manifest", mf)
	if code != 0 || !strings.Contains(out, "Pulled 240  Promoted 0  Routed 240") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
