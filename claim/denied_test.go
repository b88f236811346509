package claim_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// deniedFS refuses every Mkdir and Rename for want of permission, as a
// host does whose account can read an inbox but not write in it.
type deniedFS struct{ *guardFS }

func (d deniedFS) Mkdir(ctx context.Context, name string) error {
	return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrPermission}
}

func (d deniedFS) Rename(ctx context.Context, oldname, newname string) error {
	return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrPermission}
}

// TestPullArchiveDenied: an inbox the account cannot archive in is in
// state error, with a hint that names the inbox and the fix, and the pull
// is partial, not failed. Invariant: the handoff is stored (and recorded)
// before the archive is tried, so none is lost, and its inbox copy stays
// for the next run.
func TestPullArchiveDenied(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	data := fixture(t, "handoff.md")
	e.put(t, "x.md", data)
	rep := pull(t, deniedFS{e.fs}, e.cfg, e.spool, e.rec)
	if ok, _ := e.spool.Has(sha(data)); !ok {
		t.Fatal("the handoff was not stored")
	}
	if rep.Outcome != claim.OutcomePartial {
		t.Errorf("outcome %q, want %q", rep.Outcome, claim.OutcomePartial)
	}
	if rep.Error == "" || !strings.Contains(rep.Error, "permission denied") {
		t.Fatalf("pull error %q, want the permission failure", rep.Error)
	}
	want := "\nhint: " + claim.ArchiveDeniedHint(e.inbox)
	if !strings.HasSuffix(rep.Error, want) || !strings.Contains(want, claim.Quote(e.inbox)) {
		t.Errorf("pull error %q does not end with %q", rep.Error, want)
	}
	if len(rep.Inboxes) != 1 || rep.Inboxes[0].State != claim.StateError || !strings.HasSuffix(rep.Inboxes[0].Error, want) {
		t.Errorf("inboxes %+v: want the inbox in state error, its error ending with the hint", rep.Inboxes)
	}
	if _, err := os.Stat(e.path("x.md")); err != nil {
		t.Errorf("x.md left its inbox though it could not be archived: %v", err)
	}
}

// deniedInFS refuses Mkdir and Rename for want of permission in one
// inbox only (denied), as a host does whose account may write in every
// inbox but one; elsewhere it is the guarded local file system.
type deniedInFS struct {
	*guardFS
	denied string
}

func (d deniedInFS) Mkdir(ctx context.Context, name string) error {
	if strings.HasPrefix(name, d.denied+"/") {
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrPermission}
	}
	return d.guardFS.Mkdir(ctx, name)
}

func (d deniedInFS) Rename(ctx context.Context, oldname, newname string) error {
	if strings.HasPrefix(oldname, d.denied+"/") {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrPermission}
	}
	return d.guardFS.Rename(ctx, oldname, newname)
}

// TestPullArchiveDeniedInOneInbox: of two inboxes, the one the account
// cannot archive in is in state error with the hint, the other is
// archived as usual and stays ok, and the host is partial. Invariant:
// every handoff of both inboxes is stored; only the archivable one left
// its inbox.
func TestPullArchiveDeniedInOneInbox(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	denied := filepath.Join(e.root, "other", ".claude", "memory-handoffs")
	mkdirAll(t, denied)
	e.cfg.Inboxes = []string{e.inbox, denied}
	a := fixture(t, "handoff.md")
	b := []byte(strings.Replace(string(a), "# Memory Handoff", "# Memory Handoff\n", 1))
	e.put(t, "a.md", a)
	writeFile(t, filepath.Join(denied, "b.md"), b, old)
	rep := pull(t, deniedInFS{e.fs, denied}, e.cfg, e.spool, e.rec)
	for _, d := range [][]byte{a, b} {
		if ok, _ := e.spool.Has(sha(d)); !ok {
			t.Errorf("a handoff (%s) was not stored", sha(d)[:12])
		}
	}
	if rep.Outcome != claim.OutcomePartial {
		t.Errorf("outcome %q (error %q), want %q", rep.Outcome, rep.Error, claim.OutcomePartial)
	}
	states := map[string]claim.InboxReport{}
	for _, in := range rep.Inboxes {
		states[in.Path] = in
	}
	if in := states[e.inbox]; in.State != claim.StateOK || in.Error != "" {
		t.Errorf("the writable inbox: %+v, want state ok", in)
	}
	hint := "\nhint: " + claim.ArchiveDeniedHint(denied)
	if in := states[denied]; in.State != claim.StateError || !strings.Contains(in.Error, "1 file(s) stored but not archived") || !strings.HasSuffix(in.Error, hint) {
		t.Errorf("the denied inbox: %+v, want state error with the count and the hint", in)
	}
	if !strings.HasPrefix(rep.Error, "1 file(s) stored but not archived") || !strings.HasSuffix(rep.Error, hint) {
		t.Errorf("host error %q: want the count and the denied inbox's hint", rep.Error)
	}
	if _, err := os.Stat(e.path("a.md")); err == nil {
		t.Error("a.md is still in the writable inbox: not archived")
	}
	if _, err := os.Stat(filepath.Join(denied, "b.md")); err != nil {
		t.Errorf("b.md left the denied inbox: %v", err)
	}
}
