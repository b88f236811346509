package repoid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/transport"
)

// Bounds on what a host can make Read read.
const (
	// MaxGitFile bounds a ".git" file ("gitdir: …") and a "commondir"
	// file.
	MaxGitFile = 4 << 10
	// MaxConfig bounds a repository's git config. Real ones are a few
	// hundred bytes; a big one is refused rather than read.
	MaxConfig = 64 << 10
	// maxProblem bounds a Problem's text.
	maxProblem = 512
)

// Identity is what Read found of a repository on its host.
type Identity struct {
	// Path is the repository directory on the host.
	Path string `json:"path"`
	// Origin is the normalized URL of its origin remote (Normalize); ""
	// when it has none, or none that another host could share.
	Origin string `json:"origin,omitempty"`
	// Problem says why the origin could not be read: a symlinked .git,
	// a configuration too big or not text, a remote URL that does not
	// normalize. "" when nothing was wrong, also when the directory is
	// no git repository or has no origin.
	Problem string `json:"problem,omitempty"`
}

// Read finds the origin remote of the repository at repo through fsys:
// <repo>/.git is a directory, or a file naming the git directory
// ("gitdir: …", as worktrees and submodules have); a worktree's
// "commondir" file names the directory holding the shared config. Read
// never follows a symlinked .git, reads at most MaxGitFile and MaxConfig
// bytes, and gives every failure as the Identity's Problem; only a done
// ctx ends it early, with Problem saying so.
func Read(ctx context.Context, fsys transport.FS, repo string) Identity {
	id := Identity{Path: repo}
	origin, err := read(ctx, fsys, repo)
	switch {
	case err != nil:
		id.Problem = clip(err.Error())
	case origin != "":
		key, err := Normalize(origin)
		if err != nil && !errors.Is(err, ErrLocal) {
			id.Problem = clip("origin: " + err.Error())
		}
		id.Origin = key
	}
	return id
}

// read returns the origin's URL as written, "" when there is none.
func read(ctx context.Context, fsys transport.FS, repo string) (string, error) {
	dotgit := path.Join(repo, ".git")
	fi, err := fsys.Lstat(ctx, dotgit)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return "", nil // not a git repository: known by host and path
	case err != nil:
		return "", fmt.Errorf("lstat %s: %w", dotgit, err)
	case fi.IsSymlink():
		return "", fmt.Errorf("%s is a symlink; it is not followed", dotgit)
	}
	gitdir := dotgit
	switch {
	case fi.IsDir():
	case fi.IsRegular():
		dir, err := pointer(ctx, fsys, dotgit, "gitdir:")
		if err != nil {
			return "", err
		}
		gitdir = relTo(repo, dir)
	default:
		return "", fmt.Errorf("%s is a %s, neither a directory nor a gitdir file", dotgit, transport.Kind(fi.Mode))
	}
	// A worktree's git directory names the one holding the config.
	common := gitdir
	if dir, err := pointer(ctx, fsys, path.Join(gitdir, "commondir"), ""); err == nil {
		common = relTo(gitdir, dir)
	} else if !errors.Is(err, transport.ErrNotExist) {
		return "", err
	}
	cfg := path.Join(common, "config")
	data, _, err := fsys.ReadFile(ctx, cfg, MaxConfig)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return "", nil
	case errors.Is(err, transport.ErrTooLarge):
		return "", fmt.Errorf("%s is larger than %d bytes; not read", cfg, MaxConfig)
	case err != nil:
		return "", fmt.Errorf("read %s: %w", cfg, err)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", fmt.Errorf("%s is not a text file (NUL bytes or invalid UTF-8); not parsed", cfg)
	}
	url, _ := originURL(string(data))
	return url, nil
}

// pointer reads a small file that names a directory: its first line,
// after prefix when one is given.
func pointer(ctx context.Context, fsys transport.FS, name, prefix string) (string, error) {
	data, _, err := fsys.ReadFile(ctx, name, MaxGitFile)
	switch {
	case errors.Is(err, transport.ErrNotExist):
		return "", err
	case errors.Is(err, transport.ErrTooLarge):
		return "", fmt.Errorf("%s is larger than %d bytes; not read", name, MaxGitFile)
	case err != nil:
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSpace(line)
	dir, ok := strings.CutPrefix(line, prefix)
	dir = strings.TrimSpace(dir)
	if !ok || dir == "" || !utf8.ValidString(dir) || strings.ContainsFunc(dir, badRune) {
		return "", fmt.Errorf("%s does not name a directory", name)
	}
	return dir, nil
}

// relTo resolves p against dir unless it is absolute.
func relTo(dir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

// clip bounds a problem's text and keeps it valid UTF-8 without control
// characters (it may quote what a host sent).
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if badRune(r) && r != utf8.RuneError {
			return '?'
		}
		return r
	}, s)
	if len(s) > maxProblem {
		s = strings.ToValidUTF8(s[:maxProblem], "") + "…"
	}
	return s
}
