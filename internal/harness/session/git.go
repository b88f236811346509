package session

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// Bounds on the git files read.
const (
	maxGitSmall = 4 << 10  // HEAD, a ref, a gitdir or commondir file
	maxPacked   = 16 << 20 // packed-refs
	maxGitIndex = 64 << 20 // the index of a large repository
)

// GitState is what a session's changes are measured against: the commit
// checked out and what the index holds (not its stat cache, which `git
// status` refreshes without any change).
type GitState struct {
	Head    string `json:"head"`    // HEAD and the commit its branch names
	Entries string `json:"entries"` // SHA-256 over every entry's path, mode, stage and blob hash
}

// gitDirs finds a repository's git directory (following a "gitdir:"
// file, as worktrees and submodules have) and its common directory
// (where the refs are).
func gitDirs(repo string) (gitdir, common string, err error) {
	dotgit := filepath.Join(repo, ".git")
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return "", "", err
	}
	switch {
	case fi.IsDir():
		gitdir = dotgit
	case fi.Mode().IsRegular():
		data, err := readSmall(dotgit, maxGitSmall)
		if err != nil {
			return "", "", err
		}
		line, _, _ := strings.Cut(string(data), "\n")
		dir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return "", "", fmt.Errorf("%s is not a gitdir file", dotgit)
		}
		gitdir = strings.TrimSpace(dir)
		if !filepath.IsAbs(gitdir) {
			gitdir = filepath.Join(repo, gitdir)
		}
	default:
		return "", "", fmt.Errorf("%s is neither a directory nor a gitdir file", dotgit)
	}
	common = gitdir
	if data, err := readSmall(filepath.Join(gitdir, "commondir"), maxGitSmall); err == nil {
		c := strings.TrimSpace(string(data))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitdir, c)
		}
		common = c
	}
	return gitdir, common, nil
}

func readSmall(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, limit)
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if n == len(buf) {
		err = nil
	}
	return buf[:n], err
}

// readGit reads a repository's git state and its index (nil when it has
// none yet).
func readGit(ctx context.Context, repo string) (*GitState, *index.Index, error) {
	gitdir, common, err := gitDirs(repo)
	if err != nil {
		return nil, nil, err
	}
	head, err := readSmall(filepath.Join(gitdir, "HEAD"), maxGitSmall)
	if err != nil {
		return nil, nil, err
	}
	st := &GitState{Head: strings.TrimSpace(string(head))}
	if ref, ok := strings.CutPrefix(st.Head, "ref: "); ok && strings.HasPrefix(ref, "refs/") && !strings.Contains(ref, "..") {
		if data, err := readSmall(filepath.Join(common, filepath.FromSlash(ref)), maxGitSmall); err == nil {
			st.Head += " " + strings.TrimSpace(string(data))
		} else if c := packedRef(filepath.Join(common, "packed-refs"), ref); c != "" {
			st.Head += " " + c
		}
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	data, err := readSmall(filepath.Join(gitdir, "index"), maxGitIndex)
	if errors.Is(err, os.ErrNotExist) {
		st.Entries = "none"
		return st, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
		return nil, nil, fmt.Errorf("decode the git index: %w", err)
	}
	h := sha256.New()
	var n [4]byte
	for _, e := range idx.Entries {
		binary.BigEndian.PutUint32(n[:], uint32(len(e.Name)))
		h.Write(n[:])
		h.Write([]byte(e.Name))
		binary.BigEndian.PutUint32(n[:], uint32(e.Mode)<<2|uint32(e.Stage))
		h.Write(n[:])
		h.Write(e.Hash[:])
	}
	st.Entries = hex.EncodeToString(h.Sum(nil))
	return st, &idx, nil
}

// packedRef finds ref's commit in a packed-refs file; "" when it is not
// there.
func packedRef(name, ref string) string {
	f, err := os.OpenFile(name, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(&limited{f, maxPacked})
	for sc.Scan() {
		if sha, r, ok := strings.Cut(sc.Text(), " "); ok && r == ref {
			return sha
		}
	}
	return ""
}

type limited struct {
	f *os.File
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}
