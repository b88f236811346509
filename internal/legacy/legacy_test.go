package legacy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/legacy"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
)

// TestImportThenDuplicate: a handoff found archived in processed/ and
// imported is a duplicate when its bytes come back to an inbox: it is not
// applied twice (the card is never written). The dry run writes nothing
// anywhere, and the import writes nothing on the host.
func TestImportThenDuplicate(t *testing.T) {
	e := testenv.NewEnv(t, "")
	card := testenv.Card("x.md", "body")
	proc := filepath.Join(e.Inbox, "processed")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	e.Put(proc, "old.md", card)
	if err := os.Symlink(filepath.Join(e.Dir, "writers.yaml"), filepath.Join(proc, "link.md")); err != nil {
		t.Fatal(err)
	}
	before := testenv.TreeHash(t, e.Dir)
	dry, err := legacy.Import(context.Background(), legacy.Options{Manifest: e.M, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if after := testenv.TreeHash(t, e.Dir); after != before {
		t.Fatal("the dry run changed the tree")
	}
	hostBefore := testenv.TreeHash(t, filepath.Join(e.Dir, "repos"))
	r, err := legacy.Import(context.Background(), legacy.Options{Manifest: e.M})
	if err != nil {
		t.Fatal(err)
	}
	if after := testenv.TreeHash(t, filepath.Join(e.Dir, "repos")); after != hostBefore {
		t.Fatal("the import changed the host")
	}
	for _, rep := range []*legacy.Report{dry, r} {
		h := rep.Hosts[0]
		if rep.Outcome != "ok" || h.Recorded != 1 || h.Known != 0 || h.Skipped[legacy.SkipKind] != 1 || len(rep.Recorded) != 1 {
			t.Fatalf("dry=%v: %+v %+v", rep.DryRun, rep, h)
		}
	}
	rc, err := receipts.Read(r.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Mode != receipts.ModeImport || rc.Counts.Legacy != 1 || rc.Handoffs[0].Result != receipts.ResultLegacy || rc.Handoffs[0].SHA256 != testenv.Sum(card) {
		t.Fatalf("receipt: %+v", rc)
	}
	if id, err := workspace.Read(e.WS); err != nil || rc.WorkspaceID != id.ID {
		t.Fatalf("receipt workspace_id %q; want the workspace's %+v (%v)", rc.WorkspaceID, id, err)
	}
	if _, err := os.Stat(filepath.Join(e.WS, ".handoff/receipts/latest.json")); !os.IsNotExist(err) {
		t.Fatalf("the import wrote latest.json: %v", err)
	}

	e.Put(e.Inbox2, "again.md", card)
	s, err := handoff.Sync(context.Background(), handoff.Options{Manifest: e.M})
	if err != nil {
		t.Fatal(err)
	}
	if s.Counts.Duplicate != 1 || s.Counts.Promoted != 0 {
		t.Fatalf("the copy was not a duplicate: %+v", s.Counts)
	}
	if _, err := os.Stat(filepath.Join(e.WS, "memory/cards/x.md")); !os.IsNotExist(err) {
		t.Fatalf("the card was written: %v", err)
	}

	// Again: the imported file and the one sync archived are both known.
	again, err := legacy.Import(context.Background(), legacy.Options{Manifest: e.M})
	if err != nil {
		t.Fatal(err)
	}
	if h := again.Hosts[0]; h.Recorded != 0 || h.Known != 2 {
		t.Fatalf("second import: %+v", h)
	}
}

// lyingFS reports every processed/ file as 10 bytes long, whatever it
// holds.
type lyingFS struct{ transport.FS }

func (l lyingFS) ReadDir(ctx context.Context, name string, max int) ([]transport.FileInfo, error) {
	ents, err := l.FS.ReadDir(ctx, name, max)
	if strings.HasSuffix(name, "/processed") {
		for i := range ents {
			ents[i].Size = 10
		}
	}
	return ents, err
}

// TestImportHostLies: a host that understates a file's size cannot make
// the import read or record more than it listed: the file is skipped as
// changing and nothing is recorded for it. Invariant: reads stay bounded
// and no bytes the host did not describe enter the ledger.
func TestImportHostLies(t *testing.T) {
	e := testenv.NewEnv(t, "")
	proc := filepath.Join(e.Inbox, "processed")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	e.Put(proc, "big.md", strings.Repeat("x", 5000))
	dial := func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		return lyingFS{transport.NewLocal()}, nil
	}
	r, err := legacy.Import(context.Background(), legacy.Options{Manifest: e.M, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Hosts[0]; h.Recorded != 0 || h.Files != 0 || h.Skipped[legacy.SkipChanging] != 1 {
		t.Fatalf("a lying host's file was recorded: %+v", h)
	}
}

// TestImportHostileNames: names a pull would ignore (control characters,
// invalid UTF-8, dotfiles) are never read or recorded, and a processed/
// that is a symlink is not followed. Invariant: nothing outside a real
// processed/ directory, and nothing under a name that could mislead a
// terminal or a path join, enters the ledger.
func TestImportHostileNames(t *testing.T) {
	e := testenv.NewEnv(t, "")
	proc := filepath.Join(e.Inbox, "processed")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"esc\x1b[2J.md", "bad\xff.md", ".hidden.md", "ok.md"} {
		e.Put(proc, n, testenv.Doc("TOOLS.md", "- "+strings.ToValidUTF8(n, "?")))
	}
	outside := filepath.Join(e.Dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	e.Put(outside, "victim.md", testenv.Doc("TOOLS.md", "- victim"))
	if err := os.Symlink(outside, filepath.Join(e.Inbox2, "processed")); err != nil {
		t.Fatal(err)
	}
	r, err := legacy.Import(context.Background(), legacy.Options{Manifest: e.M})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Hosts[0]
	if h.Recorded != 1 || len(r.Recorded) != 1 || r.Recorded[0].Name != "ok.md" || h.Skipped[legacy.SkipName] != 3 || h.Skipped[legacy.SkipKind] != 1 {
		t.Fatalf("host %+v recorded %+v; want only ok.md", h, r.Recorded)
	}
}
