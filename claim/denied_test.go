package claim_test

import (
	"context"
	"io/fs"
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

// TestPullArchiveDenied: an inbox the account cannot archive in fails the
// pull with a hint that names the inbox and the fix. Invariant: the
// handoff is stored (and recorded) before the archive is tried, so none is
// lost, and its inbox copy stays for the next run.
func TestPullArchiveDenied(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	data := fixture(t, "handoff.md")
	e.put(t, "x.md", data)
	rep := pull(t, deniedFS{e.fs}, e.cfg, e.spool, e.rec)
	if ok, _ := e.spool.Has(sha(data)); !ok {
		t.Fatal("the handoff was not stored")
	}
	if rep.Error == "" || !strings.Contains(rep.Error, "permission denied") {
		t.Fatalf("pull error %q, want the permission failure", rep.Error)
	}
	want := "\nhint: " + claim.ArchiveDeniedHint(e.inbox)
	if !strings.HasSuffix(rep.Error, want) || !strings.Contains(want, claim.Quote(e.inbox)) {
		t.Errorf("pull error %q does not end with %q", rep.Error, want)
	}
}
