package ledger

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIdentity: a new ledger records no identity; the first one recorded
// stays, the same again is a no-op, another is ErrOtherWorkspace and
// changes nothing; a read-only view reads it.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.Identity(ctx); ok || err != nil {
		t.Fatalf("new ledger: ok %v, %v; want no identity", ok, err)
	}
	id := Identity{ID: strings.Repeat("ab", 16), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Origin: "new"}
	if err := l.RecordIdentity(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordIdentity(ctx, id); err != nil {
		t.Fatalf("the same again: %v", err)
	}
	other := Identity{ID: strings.Repeat("cd", 16), CreatedAt: time.Now(), Origin: "new"}
	if err := l.RecordIdentity(ctx, other); !errors.Is(err, ErrOtherWorkspace) || !strings.Contains(err.Error(), id.ID) {
		t.Fatalf("another: %v; want ErrOtherWorkspace naming %s", err, id.ID)
	}
	l.Close()
	v, err := OpenReadOnly(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	got, ok, err := v.Identity(ctx)
	if err != nil || !ok || got.ID != id.ID || !got.CreatedAt.Equal(id.CreatedAt) || got.Origin != "new" {
		t.Fatalf("view reads %+v, %v, %v; want %+v", got, ok, err, id)
	}
}
