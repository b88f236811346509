package setup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// TestLockRefusesNoWorkspace: every command that writes starts with Lock,
// which refuses a path without an identity, applied or dry run, before
// anything is created: no directory, no .handoff, no lock file.
func TestLockRefusesNoWorkspace(t *testing.T) {
	tmp := testenv.RealTempDir(t)
	plain := filepath.Join(tmp, "plain")
	os.MkdirAll(filepath.Join(plain, "memory/cards"), 0o755)
	os.WriteFile(filepath.Join(plain, "memory/cards/a.md"), []byte("a"), 0o644)
	before := testenv.TreeHash(t, tmp)
	for _, dir := range []string{filepath.Join(tmp, "nope"), filepath.Join(tmp, "nope/deeper"), plain} {
		for _, dry := range []bool{false, true} {
			_, unlock, err := setup.Lock(dir, dry, "test")
			var me *workspace.MissingError
			if !errors.As(err, &me) || unlock != nil {
				t.Errorf("Lock(%s, dry %v) = %v; want a MissingError", dir, dry, err)
			}
		}
	}
	if testenv.TreeHash(t, tmp) != before {
		t.Fatal("a refused Lock created or changed something")
	}
}

// TestInit: a new path is made, an existing directory adopted with its
// bytes unchanged, and a second Init changes nothing; Lock then returns
// the identity Init gave.
func TestInit(t *testing.T) {
	ctx := context.Background()
	tmp := testenv.RealTempDir(t)
	fresh := filepath.Join(tmp, "a/b/ws")
	id, made, err := setup.Init(ctx, fresh, time.Now())
	if err != nil || !made || id.Origin != workspace.OriginNew {
		t.Fatalf("Init(new) = %+v, %v, %v", id, made, err)
	}
	got, unlock, err := setup.Lock(fresh, false, "test")
	if err != nil || got != id {
		t.Fatalf("Lock after Init = %+v, %v; want %+v", got, err, id)
	}
	unlock()

	adopted := filepath.Join(tmp, "openclaw")
	os.MkdirAll(filepath.Join(adopted, "memory/cards"), 0o755)
	os.WriteFile(filepath.Join(adopted, "memory/cards/deploy.md"), []byte("---\ntopic: d\n---\n"), 0o644)
	os.WriteFile(filepath.Join(adopted, "TOOLS.md"), []byte("# Tools\n"), 0o644)
	cards := testenv.Tree(t, filepath.Join(adopted, "memory"))
	tools, _ := os.ReadFile(filepath.Join(adopted, "TOOLS.md"))
	id, made, err = setup.Init(ctx, adopted, time.Now())
	if err != nil || !made || id.Origin != workspace.OriginAdopted {
		t.Fatalf("Init(existing) = %+v, %v, %v", id, made, err)
	}
	testenv.SameTree(t, "adopted memory", cards, testenv.Tree(t, filepath.Join(adopted, "memory")))
	if b, _ := os.ReadFile(filepath.Join(adopted, "TOOLS.md")); string(b) != string(tools) {
		t.Fatalf("TOOLS.md changed: %q", b)
	}

	before := testenv.TreeHash(t, adopted)
	again, made, err := setup.Init(ctx, adopted, time.Now())
	if err != nil || made || again != id {
		t.Fatalf("second Init = %+v, %v, %v; want %+v, not made", again, made, err, id)
	}
	if testenv.TreeHash(t, adopted) != before {
		t.Fatal("a second Init changed the workspace")
	}

	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o600)
	var we *workspace.Error
	if _, _, err := setup.Init(ctx, file, time.Now()); !errors.As(err, &we) {
		t.Fatalf("Init(a file) = %v; want a *workspace.Error", err)
	}
}

// TestLockUpgradesAnEarlierWorkspace: a workspace an earlier handoff made
// (a ledger, no identity) is accepted; a dry run leaves it as it is, the
// first applied Lock gives it an identity, file and ledger, and later
// ones keep it.
func TestLockUpgradesAnEarlierWorkspace(t *testing.T) {
	ws := filepath.Join(testenv.RealTempDir(t), "ws")
	os.MkdirAll(filepath.Join(ws, layout.StateDir), 0o700)
	led, err := ledger.Open(filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	led.Close()
	os.WriteFile(filepath.Join(ws, layout.LockFile), nil, 0o600)

	before := testenv.TreeHash(t, ws)
	id, unlock, err := setup.Lock(ws, true, "test")
	if err != nil || id.ID != "" {
		t.Fatalf("dry Lock = %+v, %v; want no identity and no error", id, err)
	}
	unlock()
	if testenv.TreeHash(t, ws) != before {
		t.Fatal("a dry run upgraded the workspace")
	}

	id, unlock, err = setup.Lock(ws, false, "test")
	if err != nil || id.Origin != workspace.OriginUpgraded || len(id.ID) != 32 {
		t.Fatalf("Lock = %+v, %v; want an upgraded identity", id, err)
	}
	unlock()
	if got, err := workspace.Read(ws); err != nil || got != id {
		t.Fatalf("identity file: %+v, %v; want %+v", got, err, id)
	}
	led, err = ledger.Open(filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := led.Identity(context.Background())
	led.Close()
	if err != nil || !ok || rec.ID != id.ID {
		t.Fatalf("ledger records %+v, %v, %v; want %s", rec, ok, err, id.ID)
	}
	again, unlock, err := setup.Lock(ws, false, "test")
	if err != nil || again != id {
		t.Fatalf("second Lock = %+v, %v; want %+v", again, err, id)
	}
	unlock()
}

// TestLockRefusesAMismatchedLedger: a workspace whose ledger records
// another workspace's id is refused (a *workspace.Error), and no file's
// content is changed.
func TestLockRefusesAMismatchedLedger(t *testing.T) {
	tmp := testenv.RealTempDir(t)
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	for _, d := range []string{a, b} {
		if _, _, err := setup.Init(context.Background(), d, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(b, layout.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(a, layout.IdentityFile), data, 0o600) // b's identity, a's ledger
	before := testenv.Tree(t, a)
	var we *workspace.Error
	if _, _, err := setup.Lock(a, false, "test"); !errors.As(err, &we) {
		t.Fatalf("Lock = %v; want a *workspace.Error", err)
	}
	after := testenv.Tree(t, a)
	// The lock file names its holder and when it took the lock: this
	// process, a moment later. Everything else is as it was.
	delete(before, layout.LockFile)
	delete(after, layout.LockFile)
	testenv.SameTree(t, "a refused Lock", before, after)
}

// TestInitRefusesNesting: a directory inside a workspace is never made a
// workspace of its own (a typo such as ~/ws/ws would start a second
// memory inside the first). Invariant: nothing is created.
func TestInitRefusesNesting(t *testing.T) {
	ctx := context.Background()
	outer := filepath.Join(testenv.RealTempDir(t), "ws")
	if _, _, err := setup.Init(ctx, outer, time.Now()); err != nil {
		t.Fatal(err)
	}
	before := testenv.TreeHash(t, outer)
	inner := filepath.Join(outer, "ws")
	var we *workspace.Error
	if _, _, err := setup.Init(ctx, inner, time.Now()); !errors.As(err, &we) || !strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("Init inside a workspace = %v; want a *workspace.Error saying it is inside one", err)
	}
	if after := testenv.TreeHash(t, outer); after != before {
		t.Error("a refused init changed the outer workspace")
	}
	if _, err := os.Stat(inner); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused init made %s: %v", inner, err)
	}
}
