package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/sshdtest"
	"github.com/handoff-sync/handoff/mirror"
)

// TestInteropMirror publishes a mirror to each interop server: the first
// run sends every card and sha256sum -c passes on the host; an update
// sends only that card; an idle run sends nothing. Servers without
// posix-rename@openssh.com or fsync@openssh.com take the fallback paths
// (docs/mirror.md). Invariant: nothing outside the mirror path and the
// inboxes changes on the host.
func TestInteropMirror(t *testing.T) {
	for _, sv := range interopServers {
		t.Run(sv.name, func(t *testing.T) {
			t.Parallel()
			srv := sv.start(t, sshdtest.Options{})
			base := remoteTree(t, srv)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			mustMkdir(t, home)
			ws := filepath.Join(dir, "ws")
			manifestPath := filepath.Join(dir, "writers.yaml")
			inbox := filepath.Join(base, "repo/.claude/memory-handoffs")
			mirrorDir := filepath.Join(base, "mirror")
			mustMkdir(t, inbox)
			mustWrite(t, filepath.Join(base, "keep.txt"), "outside the mirror")
			for i := range 5 {
				mustWrite(t, filepath.Join(inbox, fmt.Sprintf("c%d.md", i)), cardHandoff("create-card", fmt.Sprintf("card-%d.md", i), fmt.Sprintf("card %d on %s", i, sv.name)))
			}
			writeManifest(t, manifestPath, ws, hostYAML("writer", sshBlock(srv, ""), []string{srv.ClientPath(inbox)}, nil,
				fmt.Sprintf("mirror: {path: %s}", srv.ClientPath(mirrorDir))))
			env := childEnv(home)
			publish := func() *mirror.Result {
				t.Helper()
				r := runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
				m := receiptHost(t, decodeReceipt(t, r), "writer").Mirror
				if r.code != 0 || m == nil || m.Outcome != mirror.OutcomeOK {
					t.Fatalf("sync: %s\nmirror %+v", shortRun(r), m)
				}
				cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
				cmd.Dir = mirrorDir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("sha256sum -c on %s: %v\n%s", sv.name, err, out)
				}
				return &mirror.Result{Sent: m.Sent, Removed: m.Removed, Generation: m.Generation}
			}
			if m := publish(); len(m.Sent) != 8 || m.Generation != 1 { // 5 cards, HANDOFF.md, SHA256SUMS, MIRROR.json
				t.Errorf("first publish sent %q (gen %d)", m.Sent, m.Generation)
			}
			card, err := os.ReadFile(filepath.Join(mirrorDir, "memory/cards/card-0.md"))
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(inbox, "u.md"), cardHandoff("update-card", "card-0.md", "updated on "+sv.name, "Expected card SHA256", sum(string(card))))
			if m := publish(); !slices.Equal(m.Sent, []string{"memory/cards/card-0.md", "SHA256SUMS", "MIRROR.json"}) || m.Generation != 2 {
				t.Errorf("update publish sent %q (gen %d)", m.Sent, m.Generation)
			}
			if got, _ := os.ReadFile(filepath.Join(mirrorDir, "memory/cards/card-0.md")); !strings.Contains(string(got), "updated on") {
				t.Errorf("card-0.md on the host: %q", got)
			}
			if m := publish(); len(m.Sent)+len(m.Removed) != 0 {
				t.Errorf("idle publish sent %q removed %q", m.Sent, m.Removed)
			}
			for k := range hashTree(t, base) {
				if !strings.HasPrefix(k, "mirror") && !strings.HasPrefix(k, "repo") && k != "keep.txt" && k != "." {
					t.Errorf("the publish wrote %s outside the mirror", k)
				}
				if strings.Contains(k, ".handoff-") {
					t.Errorf("temporary file %s left", k)
				}
			}
		})
	}
}
