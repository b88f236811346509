package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
)

// maxFile bounds one file of canonical memory that the mirror reads.
const maxFile = 16 << 20

// File is one file of the mirror: where it goes, relative to the mirror
// directory and slash-separated, and its exact bytes.
type File struct {
	Path   string
	Data   []byte
	SHA256 string
}

// NewFile returns a file with its hash.
func NewFile(p string, data []byte) File {
	sum := sha256.Sum256(data)
	return File{Path: p, Data: data, SHA256: hex.EncodeToString(sum[:])}
}

// Places in the mirror besides the workspace's own layout.
const (
	SumsFile  = "SHA256SUMS"
	InfoFile  = "MIRROR.json"
	GuideFile = "HANDOFF.md"
)

// The workspace's documents that a mirror with documents holds: these at
// the top, and the .md files of these directories. AGENTS.md holds the
// local tool notes on OpenClaw 2026.9, where TOOLS.md is retired.
var (
	topDocuments = []string{"AGENTS.md", "TOOLS.md", "USER.md"}
	documentDirs = []string{"rules", ".learnings"}
)

// dirs are the directories of a mirror, parents first.
var dirs = []string{".", "memory", layout.CardsDir, "rules", ".learnings"}

// Snapshot reads from the workspace ws the files a mirror holding include
// (manifest.MirrorCards, manifest.MirrorDocuments) publishes, sorted by
// path. It reads through an os.Root, skips symlinks and other non-regular
// files, and refuses names a mirror could not hold.
func Snapshot(ws string, include []string) ([]File, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("mirror: open workspace: %w", err)
	}
	defer root.Close()
	var names []string
	for _, what := range include {
		switch what {
		case manifest.MirrorCards:
			ns, err := mdFiles(root, layout.CardsDir)
			if err != nil {
				return nil, err
			}
			names = append(names, ns...)
		case manifest.MirrorDocuments:
			for _, n := range topDocuments {
				if fi, err := root.Lstat(n); err == nil && fi.Mode().IsRegular() {
					names = append(names, n)
				}
			}
			for _, d := range documentDirs {
				ns, err := mdFiles(root, d)
				if err != nil {
					return nil, err
				}
				names = append(names, ns...)
			}
		}
	}
	sort.Strings(names)
	files := make([]File, 0, len(names))
	for _, n := range names {
		data, err := durable.ReadRegular(root, n, maxFile)
		if err != nil {
			return nil, fmt.Errorf("mirror: read %s from the workspace: %w", n, err)
		}
		files = append(files, NewFile(n, data))
	}
	return files, nil
}

// mdFiles lists the regular .md files of dir in the workspace; a missing
// dir holds none.
func mdFiles(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: list %s in the workspace: %w", dir, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("mirror: list %s in the workspace: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		// Hidden names are never cards or documents; the ingester's own
		// temporary files are among them.
		if e.Type().IsRegular() && strings.HasSuffix(n, ".md") && !strings.HasPrefix(n, ".") && !oddName(n) {
			out = append(out, path.Join(dir, n))
		}
	}
	return out, nil
}

// oddName reports whether a name reported by a host (or found in the
// workspace) is one no file of a mirror could have: empty, "." or "..",
// longer than 255 bytes, not UTF-8, or holding a slash, a backslash
// (which sha256sum would escape), NUL or another control character.
func oddName(n string) bool {
	if n == "" || n == "." || n == ".." || len(n) > 255 || !utf8.ValidString(n) {
		return true
	}
	return strings.ContainsFunc(n, func(r rune) bool { return r == '/' || r == '\\' || r < 0x20 || r == 0x7f })
}

// Temporary names: a file being written, and an old file moved aside on
// a server that cannot replace atomically.
const (
	tmpPrefix   = ".handoff-tmp-"
	asidePrefix = ".handoff-old-"
)

// ours reports whether a name is one of the publisher's temporary names.
func ours(n string) bool {
	return strings.HasPrefix(n, tmpPrefix) || strings.HasPrefix(n, asidePrefix)
}
