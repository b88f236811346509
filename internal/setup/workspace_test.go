package setup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
)

// TestInit: a new path is made, an existing directory adopted with its
// bytes unchanged, and a second Init changes nothing.
func TestInit(t *testing.T) {
	ctx := context.Background()
	tmp := testenv.RealTempDir(t)
	fresh := filepath.Join(tmp, "a/b/ws")
	id, made, err := setup.Init(ctx, fresh, time.Now())
	if err != nil || !made || id.Origin != workspace.OriginNew {
		t.Fatalf("Init(new) = %+v, %v, %v", id, made, err)
	}
	if got, err := workspace.Read(fresh); err != nil || got != id {
		t.Fatalf("Read after Init = %+v, %v; want %+v", got, err, id)
	}

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
