package claim

import (
	"crypto/sha1"
	"encoding/hex"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/transport"
)

// An IndexMemo is what one run learnt from a repository's git index: the
// index's size and modification time as lstat gave them, its last 20
// bytes (git's SHA-1 of everything before them) in hex, and the inbox
// files it tracks. The next run that finds the index at the same size and
// time reads only those 20 bytes; when they are the same, the memo stands
// for the index, which is then neither read nor decoded
// (docs/design.md, "Git index memos").
type IndexMemo struct {
	Path    string    `json:"path"` // the index file on the host
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	Sum     string    `json:"sum"`
	// Tracked is the repository-relative paths of the files directly in a
	// memory-handoffs directory that the index tracks, sorted.
	Tracked []string `json:"tracked,omitempty"`
}

// maxMemoTracked bounds the tracked paths one memo holds; an index that
// tracks more is read every run.
const maxMemoTracked = 1024

// valid reports whether a memo read from a hint file is one this code
// could have written: a clean absolute path, a size an index can have, a
// 40-digit lower-case hex sum, and tracked paths that are clean, relative
// and directly inside a memory-handoffs directory.
func (m IndexMemo) valid() bool {
	if !cleanAbs(m.Path) || m.Size < 12+sha1.Size || m.Size > maxGitIndex {
		return false
	}
	if len(m.Sum) != 2*sha1.Size || strings.ToLower(m.Sum) != m.Sum {
		return false
	}
	if _, err := hex.DecodeString(m.Sum); err != nil {
		return false
	}
	if len(m.Tracked) > maxMemoTracked {
		return false
	}
	for _, p := range m.Tracked {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") || path.Base(path.Dir(p)) != InboxDir {
			return false
		}
	}
	return true
}

// matches reports whether fi, a fresh lstat of the memo's index, has the
// size and time the memo was taken at.
func (m IndexMemo) matches(fi transport.FileInfo) bool {
	return fi.IsRegular() && fi.Size == m.Size && fi.ModTime.Equal(m.ModTime)
}

// set is the tracked paths as a trackedSet (nil when there are none).
func (m IndexMemo) set() trackedSet {
	if len(m.Tracked) == 0 {
		return nil
	}
	set := make(trackedSet, len(m.Tracked))
	for _, p := range m.Tracked {
		set[p] = true
	}
	return set
}

// memoOf is the memo of an index read whole: data, as lstat fi described
// it, tracking set. It is nil when the read was not of the whole file or
// the set is too large to keep.
func memoOf(name string, fi transport.FileInfo, data []byte, set trackedSet) *IndexMemo {
	if int64(len(data)) != fi.Size || len(data) < 12+sha1.Size || len(set) > maxMemoTracked {
		return nil
	}
	m := &IndexMemo{Path: name, Size: fi.Size, ModTime: fi.ModTime, Sum: hex.EncodeToString(data[len(data)-sha1.Size:])}
	for p := range set {
		m.Tracked = append(m.Tracked, p)
	}
	slices.Sort(m.Tracked)
	return m
}
