package demo

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// The api repository is a git repository with two files staged: a README
// and a handoff template that lives in the inbox. Discovery reads the git
// index and leaves the tracked template alone.
const (
	apiRepo     = "laptop/home/code/api"
	apiTemplate = ".codex/memory-handoffs/TEMPLATE.md"
)

var apiTracked = []struct{ name, body string }{
	{"README.md", "# api\n\nThe notes app's sync API.\n"},
	{apiTemplate, `# Memory Handoff

## Type
workflow

## Title
(one line)

## Summary
(what happened and why it matters later)

## Recommended memory action
no-card
`},
}

// writeGitRepo makes repo a git repository (no commit yet) whose index
// stages apiTracked, with the blobs stored as loose objects, as
// `git init && git add` would leave it.
func writeGitRepo(repo string) error {
	gitDir := filepath.Join(repo, ".git")
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	meta := map[string]string{
		"HEAD":   "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
	}
	for name, body := range meta {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	// Backdate the work tree so that git need not treat the entries as
	// racily clean.
	old := time.Now().Add(-time.Hour)
	idx := &index.Index{Version: 2}
	for _, f := range apiTracked {
		p := filepath.Join(repo, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h, err := writeBlob(gitDir, []byte(f.body))
		if err != nil {
			return err
		}
		idx.Entries = append(idx.Entries, &index.Entry{
			Hash: h, Name: f.name, Mode: filemode.Regular,
			ModifiedAt: fi.ModTime(), CreatedAt: fi.ModTime(), Size: uint32(fi.Size()),
		})
	}
	var buf bytes.Buffer
	if err := index.NewEncoder(&buf).Encode(idx); err != nil {
		return fmt.Errorf("git index: %w", err)
	}
	return os.WriteFile(filepath.Join(gitDir, "index"), buf.Bytes(), 0o644)
}

// writeBlob stores data as a loose blob object and returns its hash.
func writeBlob(gitDir string, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	fmt.Fprintf(zw, "blob %d\x00", len(data))
	zw.Write(data)
	if err := zw.Close(); err != nil {
		return h, err
	}
	hex := h.String()
	dir := filepath.Join(gitDir, "objects", hex[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return h, err
	}
	return h, os.WriteFile(filepath.Join(dir, hex[2:]), z.Bytes(), 0o444)
}
