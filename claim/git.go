package claim

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/index"
	"golang.org/x/sync/semaphore"

	"github.com/handoff-sync/handoff/transport"
)

// Bounds on what a host can make us read to learn which files git tracks.
const (
	maxGitFile  = 4 << 10   // a worktree's ".git" file: "gitdir: <path>"
	maxGitIndex = 128 << 20 // the index of a very large repository (~1M files)
)

// errGitUnreadable marks an index that exists but cannot be read or decoded.
var errGitUnreadable = errors.New("git index unreadable")

// trackedSet holds the paths a repository's index tracks. A nil set means
// nothing is tracked (no .git, or no index yet).
type trackedSet map[string]bool

// readTracked reads repo's git index through the transport, so that hosts
// which only grant SFTP work. It follows a ".git" file (worktrees,
// submodules) to its gitdir. Only paths directly inside a memory-handoffs
// directory are kept.
//
// budget bounds the index bytes held by concurrent calls: the index is
// lstat'ed first and read only once its size is granted.
//
// memos holds the previous run's memos by index path: an index that
// matches its memo is checked by its last 20 bytes instead of being read
// (gitmemo.go). The memo returned is the one to keep for the next run
// (nil: none).
func readTracked(ctx context.Context, fsys transport.FS, repo string, budget *semaphore.Weighted, memos map[string]IndexMemo) (trackedSet, *IndexMemo, error) {
	dotgit := path.Join(repo, ".git")
	// Most repositories have a .git directory: ask for its index along
	// with .git itself, in the same round trip.
	fis, errs, err := lstatAll(ctx, fsys, dotgit, path.Join(dotgit, "index"))
	if err != nil {
		return nil, nil, err
	}
	fi, err, guess, guessErr := fis[0], errs[0], fis[1], errs[1]
	if errors.Is(err, transport.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var gitdir string
	switch {
	case fi.IsDir():
		gitdir = dotgit
	case fi.IsRegular():
		data, _, err := fsys.ReadFile(ctx, dotgit, maxGitFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: read %s: %v", errGitUnreadable, dotgit, err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		dir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok || strings.TrimSpace(dir) == "" {
			return nil, nil, fmt.Errorf("%w: %s is not a \"gitdir:\" file", errGitUnreadable, dotgit)
		}
		gitdir = strings.TrimSpace(dir)
		if !path.IsAbs(gitdir) {
			gitdir = path.Join(repo, gitdir)
		}
	default:
		return nil, nil, fmt.Errorf("%w: %s is neither a directory nor a gitdir file", errGitUnreadable, dotgit)
	}
	idxPath := path.Join(gitdir, "index")
	var known *transport.FileInfo
	if gitdir == dotgit && guessErr == nil {
		known = &guess
	}
	var memo *IndexMemo
	if m, ok := memos[idxPath]; ok {
		memo = &m
	}
	data, read, same, err := readIndex(ctx, fsys, idxPath, known, budget, memo)
	if errors.Is(err, transport.ErrNotExist) {
		if gitdir != dotgit {
			// A worktree whose main repository is not there: what it
			// tracks cannot be known, so nothing may be taken.
			if _, err := fsys.Lstat(ctx, gitdir); errors.Is(err, transport.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: gitdir %s does not exist", errGitUnreadable, gitdir)
			}
		}
		return nil, nil, nil // no commit and nothing staged yet
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: read %s: %v", errGitUnreadable, idxPath, err)
	}
	if same {
		return memo.set(), memo, nil // unchanged since the memo
	}
	defer budget.Release(int64(len(data)))
	if indexTracksNoInbox(data) {
		return nil, memoOf(idxPath, read, data, nil), nil
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
		return nil, nil, fmt.Errorf("%w: decode %s: %v", errGitUnreadable, idxPath, err)
	}
	set := trackedSet{}
	for _, e := range idx.Entries {
		if path.Base(path.Dir(e.Name)) == InboxDir {
			set[e.Name] = true
		}
	}
	return set, memoOf(idxPath, read, data, set), nil
}

// readIndex reads a git index once budget grants its size; on success the
// caller releases len(data) from budget when done with the data, and fi
// is the lstat the read was sized by. An index that grows between its
// lstat and its read (git is writing it) is tried once more.
//
// known, when not nil, is an lstat of name just taken. memo, when not nil,
// is the previous run's: if the lstat matches it and the index's last 20
// bytes are its sum, readIndex returns no data and no error, having read
// only those 20 bytes, and same.
func readIndex(ctx context.Context, fsys transport.FS, name string, known *transport.FileInfo, budget *semaphore.Weighted, memo *IndexMemo) (data []byte, fi transport.FileInfo, same bool, err error) {
	for attempt := 0; ; attempt++ {
		if known != nil && attempt == 0 {
			fi = *known
		} else {
			if fi, err = fsys.Lstat(ctx, name); err != nil {
				return nil, fi, false, err
			}
		}
		if fi.Size > maxGitIndex {
			return nil, fi, false, fmt.Errorf("%w (%d bytes, limit %d)", transport.ErrTooLarge, fi.Size, maxGitIndex)
		}
		if memo != nil && attempt == 0 && memo.matches(fi) {
			tail, err := transport.ReadTail(ctx, fsys, name, fi, sha1.Size)
			if err == nil && hex.EncodeToString(tail) == memo.Sum {
				return nil, fi, true, nil
			}
			if ctx.Err() != nil {
				return nil, fi, false, ctx.Err()
			}
			// Changed, or the tail could not be read: read it whole.
		}
		size := fi.Size
		if !fi.IsRegular() || size < 0 {
			size = 0 // ReadFile says what is wrong without reading anything
		}
		if err := budget.Acquire(ctx, size+1); err != nil {
			return nil, fi, false, err
		}
		// The index ends with a SHA-1 of everything before it, which the
		// decoder checks: an index that changes during the read fails
		// that check, so the read needs no stat of the open handle.
		data, err := transport.ReadContent(ctx, fsys, name, size)
		if err == nil {
			budget.Release(size + 1 - int64(len(data)))
			return data, fi, false, nil
		}
		budget.Release(size + 1)
		if !(errors.Is(err, transport.ErrTooLarge) || errors.Is(err, transport.ErrChanged)) || attempt == 1 || size != fi.Size {
			return nil, fi, false, err
		}
	}
}

// indexTracksNoInbox reports, without decoding it, that a whole git index
// tracks no file in a memory-handoffs directory, the usual case: decoding
// a large index entry by entry was a tenth of a pull's CPU. It says so only
// for an index of version 2 or 3, whose entries hold their paths in full,
// whose checksum is right (the read is whole and consistent) and in which
// "memory-handoffs/" appears nowhere; and never for an index whose entries
// may be elsewhere (a split index's "link" extension, a sparse index's
// "sdir"). Otherwise (false) the decoder decides, and reports what is
// wrong.
func indexTracksNoInbox(data []byte) bool {
	if len(data) < 12+sha1.Size || string(data[:4]) != "DIRC" {
		return false
	}
	if v := binary.BigEndian.Uint32(data[4:8]); v != 2 && v != 3 {
		return false // version 4 strips each path's prefix shared with the one before
	}
	body, sum := data[:len(data)-sha1.Size], data[len(data)-sha1.Size:]
	if s := sha1.Sum(body); !bytes.Equal(s[:], sum) {
		return false
	}
	for _, s := range []string{InboxDir + "/", "link", "sdir"} {
		if bytes.Contains(body, []byte(s)) {
			return false
		}
	}
	return true
}
