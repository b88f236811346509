package handoff

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// mirrorEnv is newEnv with a mirror on its local host.
func mirrorEnv(t *testing.T) (*testEnv, string) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "mirror")
	yml := fmt.Sprintf(`version: 1
workspace: %s
hosts:
  - name: canonical
    transport: local
    discover: [{root: %s, max_depth: 2}]
    mirror: {path: %s}
`, e.ws, filepath.Join(e.dir, "repos"), dir)
	m, err := manifest.Parse([]byte(yml), filepath.Join(e.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e, dir
}

// TestSyncPublishesMirror: a card the run promotes is in the mirror, with
// its hash in SHA256SUMS; an update that carries the mirror's hash is
// applied by the next run; one that still carries the old hash waits as
// hash-conflict.
func TestSyncPublishesMirror(t *testing.T) {
	e, dir := mirrorEnv(t)
	v1 := "---\ntopic: t\ncategory: c\ntags: []\n---\nfirst\n"
	e.put(e.inbox, "a.md", card("create-card", "x.md", v1))
	r := e.sync(false)
	m := r.Hosts[0].Mirror
	if m == nil || m.Outcome != mirror.OutcomeOK || !slices.Contains(m.Sent, "memory/cards/x.md") || m.Generation != 1 {
		t.Fatalf("mirror %+v", m)
	}
	got, err := os.ReadFile(filepath.Join(dir, "memory/cards/x.md"))
	if err != nil || string(got) != e.readWS("memory/cards/x.md") {
		t.Fatalf("mirrored card %q (%v); workspace has %q", got, err, e.readWS("memory/cards/x.md"))
	}
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	if guide, err := os.ReadFile(filepath.Join(dir, "HANDOFF.md")); err != nil || !strings.Contains(string(guide), e.inbox) {
		t.Errorf("HANDOFF.md does not name the inbox %s: %v\n%s", e.inbox, err, guide)
	}

	h1 := sum(string(got))
	v2 := "---\ntopic: t\ncategory: c\ntags: []\n---\nsecond\n"
	e.put(e.inbox, "b.md", card("update-card", "x.md", v2, "Expected card SHA256", h1))
	r = e.sync(false)
	if e.readWS("memory/cards/x.md") != v2 {
		t.Fatalf("update with the mirror's hash not applied: %+v", r.Handoffs)
	}
	if m := r.Hosts[0].Mirror; m.Generation != 2 || !slices.Equal(m.Sent, []string{"memory/cards/x.md", "SHA256SUMS", "MIRROR.json"}) {
		t.Errorf("second publish %+v", m)
	}

	e.put(e.inbox, "c.md", card("update-card", "x.md", "---\ntopic: t\ncategory: c\ntags: []\n---\nstale\n", "Expected card SHA256", h1))
	r = e.sync(false)
	var res []string
	for _, h := range r.Handoffs {
		res = append(res, h.Result+"/"+h.Reason)
	}
	if !slices.Contains(res, receipts.ResultReview+"/hash-conflict") {
		t.Errorf("stale update: %q; want review/hash-conflict", res)
	}
	if m := r.Hosts[0].Mirror; len(m.Sent) != 0 || m.Generation != 2 {
		t.Errorf("nothing changed, yet the mirror sent %q (gen %d)", m.Sent, m.Generation)
	}
}

// TestSyncMirrorFailureIsPartial: a mirror that cannot be published makes
// the run partial and never undoes or blocks ingest.
func TestSyncMirrorFailureIsPartial(t *testing.T) {
	e, dir := mirrorEnv(t)
	if err := os.Symlink(e.dir, dir); err != nil {
		t.Fatal(err)
	}
	e.put(e.inbox, "a.md", card("create-card", "x.md", "---\ntopic: t\ncategory: c\ntags: []\n---\nbody\n"))
	r := e.sync(false)
	if r.Outcome != receipts.OutcomePartial || r.Hosts[0].Mirror.Outcome != mirror.OutcomeError {
		t.Fatalf("outcome %s, mirror %+v; want partial, error", r.Outcome, r.Hosts[0].Mirror)
	}
	if !strings.Contains(e.readWS("memory/cards/x.md"), "body") {
		t.Error("the card was not applied")
	}
}
