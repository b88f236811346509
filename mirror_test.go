package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
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

// deniedInboxFS is the local file system on which the account may not
// create or rename entries in one inbox (chown root: on it), as a host
// whose SSH login can read that inbox but not write in it.
type deniedInboxFS struct {
	transport.Local
	inbox string
}

func (d deniedInboxFS) denied(name string) bool { return strings.HasPrefix(name, d.inbox+"/") }

func (d deniedInboxFS) Mkdir(ctx context.Context, name string) error {
	if d.denied(name) {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrPermission}
	}
	return d.Local.Mkdir(ctx, name)
}

func (d deniedInboxFS) Rename(ctx context.Context, oldname, newname string) error {
	if d.denied(oldname) || d.denied(newname) {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrPermission}
	}
	return d.Local.Rename(ctx, oldname, newname)
}

// TestSyncPartialHostGetsItsMirror: a host with one inbox the account
// cannot archive in is partial, not failed; that inbox is in state error
// with the hint, and the host's mirror is published all the same, with
// the card a handoff of its other inbox made. Invariant: what cannot be
// archived is stored and applied, never lost, and stays in its inbox.
func TestSyncPartialHostGetsItsMirror(t *testing.T) {
	e, dir := mirrorEnv(t)
	e.dial = func(context.Context, manifest.HostConfig) (transport.FS, error) {
		return deniedInboxFS{inbox: e.inbox2}, nil
	}
	e.put(e.inbox, "a.md", card("create-card", "x.md", "---\ntopic: t\ncategory: c\ntags: []\n---\nfrom app\n"))
	stuck := e.put(e.inbox2, "b.md", doc("TOOLS.md", "- from lib"))
	r := e.sync(false)
	h := r.Hosts[0]
	if r.Outcome != receipts.OutcomePartial || h.Outcome != receipts.HostPartial {
		t.Fatalf("run %s, host %s (%s); want partial, partial", r.Outcome, h.Outcome, h.Error)
	}
	states := map[string]receipts.Inbox{}
	for _, in := range h.Inboxes {
		states[in.Path] = in
	}
	if in := states[e.inbox]; in.State != "ok" {
		t.Errorf("the writable inbox: %+v, want ok", in)
	}
	if in := states[e.inbox2]; in.State != receipts.InboxError || !strings.HasSuffix(in.Error, "\nhint: "+claim.ArchiveDeniedHint(e.inbox2)) {
		t.Errorf("the unwritable inbox: %+v, want state error with the hint", in)
	}
	if !strings.Contains(e.readWS("TOOLS.md"), "from lib") {
		t.Error("the unarchivable handoff was not applied")
	}
	if _, err := os.Stat(stuck); err != nil {
		t.Errorf("the unarchivable handoff left its inbox: %v", err)
	}
	m := h.Mirror
	if m == nil || m.Outcome != mirror.OutcomeOK || !slices.Contains(m.Sent, "memory/cards/x.md") {
		t.Fatalf("mirror %+v; want it published with the card", m)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "memory/cards/x.md")); err != nil || string(got) != e.readWS("memory/cards/x.md") {
		t.Errorf("mirrored card %q (%v), want the workspace's", got, err)
	}
}

// cancelingFS is the local file system that cancels the run's context
// once it has removed a file under dir: the run is interrupted in the
// middle of a publish, after its removals.
type cancelingFS struct {
	transport.Local
	dir    string
	cancel context.CancelFunc
}

func (c cancelingFS) Remove(ctx context.Context, name string) error {
	err := c.Local.Remove(ctx, name)
	if strings.HasPrefix(name, c.dir+"/") {
		c.cancel()
	}
	return err
}

// TestSyncInterruptedPublish: a run interrupted while it publishes a
// mirror still writes its receipt and finishes its bookkeeping (Sync
// returned "ledger: context canceled"), and the receipt marks the mirror
// interrupted, with an error that says the next sync finishes it; the
// run itself is interrupted, outcome failed, as docs/receipts.md says
// (issue 48, item 6: it was partial with no interrupted field).
// Invariant: the receipt never contradicts the host: its generation is
// the one MIRROR.json names, and what it lists as removed is gone.
func TestSyncInterruptedPublish(t *testing.T) {
	e, dir := mirrorEnv(t)
	e.put(e.inbox, "a.md", card("create-card", "x.md", "---\ntopic: t\ncategory: c\ntags: []\n---\nbody\n"))
	e.sync(false)
	if err := os.Remove(filepath.Join(e.ws, "memory/cards/x.md")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dial := func(context.Context, manifest.HostConfig) (transport.FS, error) {
		return cancelingFS{dir: dir, cancel: cancel}, nil
	}
	r, err := Sync(ctx, Options{Manifest: e.m, Dial: dial})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	m := r.Hosts[0].Mirror
	if r.Outcome != receipts.OutcomeFailed || !r.Interrupted || m == nil || m.Outcome != mirror.OutcomeError || !m.Interrupted ||
		!strings.HasPrefix(m.Error, "interrupted: ") || !strings.Contains(m.Error, "the next sync finishes the job") {
		t.Fatalf("outcome %s, interrupted %v, mirror %+v; want an interrupted, failed run and an interrupted mirror", r.Outcome, r.Interrupted, m)
	}
	saved, err := receipts.Read(filepath.Join(e.ws, ".handoff/receipts", r.RunID+".json"))
	if err != nil || saved.Hosts[0].Mirror == nil || !saved.Hosts[0].Mirror.Interrupted {
		t.Fatalf("the receipt file: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "MIRROR.json"))
	var info mirror.Info
	if err == nil {
		err = json.Unmarshal(data, &info)
	}
	if err != nil || info.Generation != m.Generation || info.Complete {
		t.Errorf("MIRROR.json %s (%v); the receipt says generation %d, interrupted", data, err, m.Generation)
	}
	if !slices.Equal(m.Removed, []string{"memory/cards/x.md"}) {
		t.Errorf("removed %q, want the card", m.Removed)
	}
	if _, err := os.Lstat(filepath.Join(dir, "memory/cards/x.md")); err == nil {
		t.Error("the card is listed as removed, yet is in the mirror")
	}
}
