package transport

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenRootLocal: a root is proved through real directories only, is
// created below its base where asked, and refuses names that climb out.
// Invariant: nothing is made through a symlink or outside the root.
func TestOpenRootLocal(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "elsewhere"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRoot(ctx, Local{}, filepath.Join(base, "link/mirror"), RootOptions{Base: base, Create: true}); err == nil {
		t.Error("a root through a symlink was opened")
	}
	if _, err := os.Lstat(filepath.Join(base, "elsewhere/mirror")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something was made through the symlink: %v", err)
	}
	if _, err := OpenRoot(ctx, Local{}, filepath.Join(base, "a/b"), RootOptions{Base: base}); !errors.Is(err, ErrNotExist) {
		t.Errorf("a missing root without Create: %v; want ErrNotExist", err)
	}
	if _, err := OpenRoot(ctx, Local{}, filepath.Join(base, "a/b"), RootOptions{Base: base, CreateLast: true}); !errors.Is(err, ErrNotExist) {
		t.Errorf("CreateLast with a missing parent: %v; want ErrNotExist", err)
	}
	r, err := OpenRoot(ctx, Local{}, filepath.Join(base, "a/b"), RootOptions{Base: base, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a/../../x", ""} {
		if _, _, err := r.WriteNew(ctx, bad, []byte("x"), 0o600); !errors.Is(err, ErrNotProven) {
			t.Errorf("WriteNew(%q): %v; want ErrNotProven", bad, err)
		}
	}
	if _, _, err := r.WriteNew(ctx, "sub/x", []byte("x"), 0o600); !errors.Is(err, ErrNotProven) {
		t.Errorf("WriteNew into a directory never proved: %v; want ErrNotProven", err)
	}
	fi, _, err := r.WriteNew(ctx, ".tmp", []byte("hello"), 0o444)
	if err != nil || fi.Size != 5 {
		t.Fatalf("WriteNew: %v, %+v", err, fi)
	}
	if err := r.Replace(ctx, ".tmp", "f", nil, ".aside"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "a/b/f")); string(b) != "hello" {
		t.Errorf("f holds %q", b)
	}
}
