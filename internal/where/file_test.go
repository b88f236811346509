package where

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// Invariant: where reads nothing outside the workspace and follows no
// symlink. WorkspaceFile hashes a regular file in the workspace and names
// its kind; a path that leaves the workspace, a symlinked file or parent
// directory, and a directory name no file.
func TestWorkspaceFile(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	card := []byte("---\ntopic: t\ncategory: c\ntags: [x]\n---\nby hand\n")
	for p, data := range map[string][]byte{"memory/cards/deploy.md": card, "TOOLS.md": []byte("- x\n"), "notes.txt": []byte("n")} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o700)
		if err := os.WriteFile(filepath.Join(ws, p), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(outside, "secret.md"), []byte("secret"), 0o600)
	os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(ws, "memory/cards/link.md"))
	os.Symlink(outside, filepath.Join(ws, "rules"))
	sum := sha256.Sum256(card)
	for _, tc := range []struct {
		query, kind string
	}{
		{"memory/cards/deploy.md", "card"},
		{"./memory/cards/deploy.md", "card"},
		{filepath.Join(ws, "memory/cards/deploy.md"), "card"},
		{"TOOLS.md", "document"},
		{"notes.txt", "file"},
		{"memory/cards/link.md", ""},
		{"rules/secret.md", ""},
		{"../" + filepath.Base(outside) + "/secret.md", ""},
		{filepath.Join(outside, "secret.md"), ""},
		{"memory/cards", ""},
		{"memory/cards/absent.md", ""},
	} {
		f, err := WorkspaceFile(ws, tc.query)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		switch {
		case tc.kind == "" && f != nil:
			t.Errorf("%s: %+v, want no file", tc.query, f)
		case tc.kind != "" && (f == nil || f.Kind != tc.kind):
			t.Errorf("%s: %+v, want a %s", tc.query, f, tc.kind)
		case tc.kind == "card" && (f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(card)) || f.Path != "memory/cards/deploy.md"):
			t.Errorf("%s: %+v", tc.query, f)
		}
	}
}
