package durable

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// swapWorld is a workspace-like root holding a secret (what must never
// be read under another name) and memory/cards/x.md, a regular card.
func swapWorld(t *testing.T) (dir string, root *os.Root) {
	t.Helper()
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "memory/cards"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.json"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory/cards/x.md"), []byte("card"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, openRoot(t, dir)
}

// TestReadRegularRefusesSwappedSymlink: a name checked with Lstat and
// then swapped for a symlink to another file inside the root is refused
// by the read, never read through (issue 48, item 15: os.Root.OpenFile
// follows such a symlink even with O_NOFOLLOW). Invariant: a read by
// name never returns another file's bytes. The swap is made between the
// check and the read, deterministically.
func TestReadRegularRefusesSwappedSymlink(t *testing.T) {
	dir, root := swapWorld(t)
	for _, target := range []string{"../../secret.json", filepath.Join(dir, "secret.json")} {
		fi, err := root.Lstat("memory/cards/x.md")
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("Lstat before the swap: %v, %v", fi, err)
		}
		card := filepath.Join(dir, "memory/cards/x.md")
		os.Remove(card)
		if err := os.Symlink(target, card); err != nil {
			t.Fatal(err)
		}
		data, err := ReadRegular(root, "memory/cards/x.md", 0)
		if !errors.Is(err, ErrSymlink) || data != nil {
			t.Fatalf("symlink to %s: read %q, %v; want ErrSymlink and nothing", target, data, err)
		}
		os.Remove(card)
		os.WriteFile(card, []byte("card"), 0o600)
	}
	// A top-level name too, and names that are not clean paths.
	os.Symlink("secret.json", filepath.Join(dir, "TOOLS.md"))
	if data, err := ReadRegular(root, "TOOLS.md", 0); !errors.Is(err, ErrSymlink) {
		t.Fatalf("TOOLS.md -> secret.json: read %q, %v", data, err)
	}
	for _, bad := range []string{"..", "../secret.json", "/etc/passwd", "memory/../secret.json", ""} {
		if data, err := ReadRegular(root, bad, 0); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("ReadRegular(%q): %q, %v; want fs.ErrInvalid", bad, data, err)
		}
	}
}

// TestReadRegularUnderSwapping: while another goroutine keeps swapping
// the card between a regular file and a symlink to the secret, every
// read gives the card or an error, never the secret. A fixed number of
// swaps and reads, no clock.
func TestReadRegularUnderSwapping(t *testing.T) {
	dir, root := swapWorld(t)
	card := filepath.Join(dir, "memory/cards/x.md")
	tmp := filepath.Join(dir, "memory/cards/.swap")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// The card's name is, by turns, a symlink to the secret
			// and a regular file, each put in place by an atomic rename.
			if i%2 == 0 {
				os.Symlink("../../secret.json", tmp)
			} else {
				os.WriteFile(tmp, []byte("card"), 0o600)
			}
			os.Rename(tmp, card)
		}
	})
	secrets, links := 0, 0
	for range 20000 {
		data, err := ReadRegular(root, "memory/cards/x.md", 0)
		if err == nil && bytes.Equal(data, []byte("SECRET")) {
			secrets++
		}
		if errors.Is(err, ErrSymlink) {
			links++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d of 20000 reads found the symlink and refused it", links)
	if secrets > 0 {
		t.Fatalf("%d reads of memory/cards/x.md returned the secret it was swapped to", secrets)
	}
}
