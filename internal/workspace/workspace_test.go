package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// mkws makes dir a workspace with an identity, as init would (without the
// lock, which this package leaves to its callers).
func mkws(t *testing.T, dir string) workspace.Identity {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, layout.StateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	id, made, err := workspace.Establish(context.Background(), dir, workspace.OriginNew, time.Now())
	if err != nil || !made {
		t.Fatalf("workspace.Establish(%s) = %v, %v", dir, made, err)
	}
	return id
}

// TestEstablish: the identity is written to the file and the ledger, and
// read back the same; a second Establish changes nothing, not a byte.
func TestEstablish(t *testing.T) {
	dir := filepath.Join(testenv.RealTempDir(t), "ws")
	id := mkws(t, dir)
	if len(id.ID) != 32 || id.Origin != workspace.OriginNew || id.CreatedAt.IsZero() {
		t.Fatalf("identity %+v", id)
	}
	got, err := workspace.Read(dir)
	if err != nil || got != id {
		t.Fatalf("workspace.Read = %+v, %v; want %+v", got, err, id)
	}
	led, err := ledger.Open(filepath.Join(dir, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := led.Identity(context.Background())
	led.Close()
	if err != nil || !ok || rec.ID != id.ID || !rec.CreatedAt.Equal(id.CreatedAt) || rec.Origin != id.Origin {
		t.Fatalf("ledger records %+v, %v, %v; want %+v", rec, ok, err, id)
	}
	fi, err := os.Stat(filepath.Join(dir, layout.IdentityFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, %v; want mode 0600", fi, err)
	}
	before := testenv.TreeHash(t, dir)
	again, made, err := workspace.Establish(context.Background(), dir, workspace.OriginAdopted, time.Now())
	if err != nil || made || again != id {
		t.Fatalf("second workspace.Establish = %+v, %v, %v; want %+v unchanged", again, made, err, id)
	}
	if testenv.TreeHash(t, dir) != before {
		t.Fatal("a second workspace.Establish changed the workspace")
	}
}

// TestEstablishKeepsTheLedgersID: a workspace whose ledger records an
// identity but lost the file (a crash between the two writes, or the file
// removed) gets that same id back, never a second one.
func TestEstablishKeepsTheLedgersID(t *testing.T) {
	dir := filepath.Join(testenv.RealTempDir(t), "ws")
	id := mkws(t, dir)
	if err := os.Remove(filepath.Join(dir, layout.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	got, made, err := workspace.Establish(context.Background(), dir, workspace.OriginUpgraded, time.Now().Add(time.Hour))
	if err != nil || !made || got != id {
		t.Fatalf("workspace.Establish = %+v, %v, %v; want the ledger's %+v", got, made, err, id)
	}
}

// TestReconcile: a ledger that records no identity is given the file's;
// one that records another workspace's is a *workspace.Error naming both ids, and
// is not changed.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(testenv.RealTempDir(t), "ws")
	id := mkws(t, dir)
	if err := workspace.Reconcile(ctx, dir, id); err != nil {
		t.Fatalf("workspace.Reconcile with its own id: %v", err)
	}
	// The ledger moved aside: a new one is given the file's id.
	if err := os.Remove(filepath.Join(dir, layout.LedgerFile)); err != nil {
		t.Fatal(err)
	}
	if err := workspace.Reconcile(ctx, dir, id); err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(filepath.Join(dir, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, _ := led.Identity(ctx)
	led.Close()
	if !ok || rec.ID != id.ID {
		t.Fatalf("new ledger records %+v, %v; want %s", rec, ok, id.ID)
	}
	other := workspace.New(time.Now(), workspace.OriginNew)
	err = workspace.Reconcile(ctx, dir, other)
	var we *workspace.Error
	if !errors.As(err, &we) || !strings.Contains(err.Error(), other.ID) || !strings.Contains(err.Error(), id.ID) || we.Hint() == "" {
		t.Fatalf("workspace.Reconcile with another id: %v; want a *workspace.Error naming both ids, with a hint", err)
	}
	led, _ = ledger.Open(filepath.Join(dir, layout.LedgerFile))
	rec, _, _ = led.Identity(ctx)
	led.Close()
	if rec.ID != id.ID {
		t.Fatalf("the ledger's identity changed to %s", rec.ID)
	}
}

// TestRead: no directory and no file are ErrNoIdentity; a broken file,
// a symlinked one, and one from a newer handoff are *Errors with a hint.
func TestRead(t *testing.T) {
	tmp := testenv.RealTempDir(t)
	if _, err := workspace.Read(filepath.Join(tmp, "nope")); !errors.Is(err, workspace.ErrNoIdentity) {
		t.Errorf("no directory: %v", err)
	}
	if _, err := workspace.Read(tmp); !errors.Is(err, workspace.ErrNoIdentity) {
		t.Errorf("no file: %v", err)
	}
	good := string(workspace.Marshal(workspace.New(time.Now(), workspace.OriginNew)))
	for _, tc := range []struct{ name, content, want string }{
		{"garbage", "{", "not valid JSON"},
		{"newer", strings.Replace(good, `"schema_version": 1`, `"schema_version": 2`, 1), "newer than this handoff"},
		{"bad id", strings.Replace(good, `"id": "`, `"id": "zz`, 1), "is not 32 lowercase hex digits"},
		{"no time", `{"schema_version": 1, "id": "0123456789abcdef0123456789abcdef"}`, "created_at is missing"},
		{"symlink", "", "workspace.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, layout.StateDir), 0o700)
			p := filepath.Join(dir, layout.IdentityFile)
			if tc.name == "symlink" {
				other := filepath.Join(t.TempDir(), "id.json")
				os.WriteFile(other, []byte(good), 0o600)
				os.Symlink(other, p)
			} else {
				os.WriteFile(p, []byte(tc.content), 0o600)
			}
			_, err := workspace.Read(dir)
			var we *workspace.Error
			if !errors.As(err, &we) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(we.Hint(), "handoff init --workspace") {
				t.Fatalf("workspace.Read = %v; want a *workspace.Error containing %q with init's hint", err, tc.want)
			}
			if _, _, err := workspace.Check(dir); !errors.As(err, &we) {
				t.Fatalf("workspace.Check = %v; want the same *Error", err)
			}
		})
	}
}

// TestCheck: a workspace with an identity, one an earlier handoff made (a
// ledger, no identity: legacy), and no workspace (a *workspace.MissingError, for a
// directory that exists and one that does not), with nothing created by
// asking.
func TestCheck(t *testing.T) {
	tmp := testenv.RealTempDir(t)
	ws := filepath.Join(tmp, "ws")
	id := mkws(t, ws)
	if got, legacy, err := workspace.Check(ws); err != nil || legacy || got != id {
		t.Errorf("workspace.Check(workspace) = %+v, %v, %v", got, legacy, err)
	}
	old := filepath.Join(tmp, "old")
	os.MkdirAll(filepath.Join(old, layout.StateDir), 0o700)
	os.WriteFile(filepath.Join(old, layout.LedgerFile), nil, 0o600)
	if _, legacy, err := workspace.Check(old); err != nil || !legacy {
		t.Errorf("workspace.Check(an earlier handoff's workspace) = %v, %v; want legacy", legacy, err)
	}
	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(filepath.Join(empty, layout.StateDir), 0o700) // .handoff alone is no workspace
	before := testenv.TreeHash(t, tmp)
	for _, tc := range []struct {
		dir    string
		exists bool
	}{{filepath.Join(tmp, "nope", "deeper"), false}, {empty, true}} {
		_, _, err := workspace.Check(tc.dir)
		var me *workspace.MissingError
		if !errors.As(err, &me) || !errors.Is(err, workspace.ErrNoIdentity) || me.Exists != tc.exists || me.Path != tc.dir {
			t.Errorf("workspace.Check(%s) = %v; want a workspace.MissingError, exists %v", tc.dir, err, tc.exists)
			continue
		}
		if !strings.HasSuffix(me.Hint(), "handoff init --workspace "+tc.dir+" "+map[bool]string{false: "makes a new workspace there: a memory of its own", true: "makes that directory a workspace, as it is: a memory of its own"}[tc.exists]) {
			t.Errorf("hint %q", me.Hint())
		}
	}
	// A workspace near the path: the hint says plainly that one made
	// there is a second, separate memory, and asks for --new-memory.
	near := &workspace.MissingError{Path: filepath.Join(tmp, "wss"), Near: []string{filepath.Join(tmp, "ws")}}
	if h := near.Hint(); !strings.HasSuffix(h, "only to start a second, separate memory there: handoff init --workspace "+filepath.Join(tmp, "wss")+" --new-memory (handoffs synced into it never reach "+filepath.Join(tmp, "ws")+")") {
		t.Errorf("hint with a workspace near: %q", h)
	}
	if testenv.TreeHash(t, tmp) != before {
		t.Error("workspace.Check changed something")
	}
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o600)
	var we *workspace.Error
	if _, _, err := workspace.Check(file); !errors.As(err, &we) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("workspace.Check(a file) = %v", err)
	}
}

// TestNear: the workspaces a typo'd or misplaced path is near: a sibling
// within two edits, the same below a typo'd parent, a parent and a child;
// nothing for names further away, or one-letter names.
func TestNear(t *testing.T) {
	tmp := testenv.RealTempDir(t)
	at := func(rel string) string { return filepath.Join(tmp, filepath.FromSlash(rel)) }
	mkws(t, at("small/ws"))
	mkws(t, at("big/memory-ws"))
	old := at("small/old-ws")
	os.MkdirAll(filepath.Join(old, layout.StateDir), 0o700)
	os.WriteFile(filepath.Join(old, layout.LedgerFile), nil, 0o600) // an earlier handoff's
	os.MkdirAll(at("small/wsx-plain"), 0o700)                       // no workspace
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"small/wss", []string{"small/ws"}},             // a letter too many
		{"small/w5", []string{"small/ws"}},              // one changed
		{"smal/ws", []string{"small/ws"}},               // in the parent
		{"small/ws/memory", []string{"small/ws"}},       // inside a workspace
		{"small", []string{"small/old-ws", "small/ws"}}, // the parent of two
		{"big/memory-wss", []string{"big/memory-ws"}},
		{"big/memory-xyz", nil}, // three edits
		{"elsewhere/ws", nil},
		{"small/w", nil},                            // every letter of a one-letter name changed is no typo
		{"small/old-wsq", []string{"small/old-ws"}}, // an earlier handoff's counts
	} {
		var want []string
		for _, w := range tc.want {
			want = append(want, at(w))
		}
		if got := workspace.Near(at(tc.dir)); !slices.Equal(got, want) {
			t.Errorf("workspace.Near(%s) = %v; want %v", tc.dir, got, want)
		}
	}
}
