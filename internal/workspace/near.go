package workspace

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds of Near's search.
const (
	// maxListed is how many entries Near reads from one directory.
	maxListed = 4096
	// maxNear is how many workspaces Near names.
	maxNear = 3
	// maxTypo is the edit distance within which a sibling's name counts
	// as a typo of the name asked for.
	maxTypo = 2
)

// Near returns the workspaces near dir (an absolute path that is no
// workspace), nearest first and at most three: a directory above it
// (dir is inside a workspace), one just below it (dir is the parent of
// one), and the directories whose name is a typo of a component of dir,
// within two edits: a sibling of dir, or of the first component of dir
// that does not exist (~/smal/ws finds ~/small/ws). It only lists and
// stats, and reads at most a bounded number of entries per directory.
func Near(dir string) []string {
	dir = filepath.Clean(dir)
	type cand struct {
		path string
		dist int
	}
	var out []cand
	seen := map[string]bool{dir: true}
	add := func(p string, dist int) {
		if !seen[p] && Has(p) {
			seen[p] = true
			out = append(out, cand{p, dist})
		}
	}
	// Above: dir lies inside a workspace.
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		add(d, 0)
		if filepath.Dir(d) == d {
			break
		}
	}
	// The deepest part of dir that exists, and what follows it.
	base, rest := dir, ""
	for {
		if fi, err := os.Stat(base); err == nil && fi.IsDir() {
			break
		}
		parent := filepath.Dir(base)
		if parent == base {
			return nil
		}
		rest = filepath.Join(filepath.Base(base), rest)
		base = parent
	}
	if rest == "" {
		// dir exists: its children, and its siblings.
		for _, name := range list(dir) {
			add(filepath.Join(dir, name), 1)
		}
		parent := filepath.Dir(dir)
		if parent != dir {
			typos(parent, filepath.Base(dir), "", add)
		}
	} else {
		first, tail, _ := strings.Cut(rest, string(filepath.Separator))
		typos(base, first, tail, add)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].dist != out[j].dist {
			return out[i].dist < out[j].dist
		}
		return out[i].path < out[j].path
	})
	var paths []string
	for i, c := range out {
		if i == maxNear {
			break
		}
		paths = append(paths, c.path)
	}
	return paths
}

// typos offers add every parent/<sibling>/tail whose sibling's name is
// within maxTypo edits of name (and not name itself), with the distance.
func typos(parent, name, tail string, add func(string, int)) {
	for _, sib := range list(parent) {
		if sib == name || strings.HasPrefix(sib, ".") != strings.HasPrefix(name, ".") {
			continue
		}
		d := distance(sib, name)
		if d > maxTypo || d >= len([]rune(name)) {
			continue // too far, or every letter changed: not a typo
		}
		add(filepath.Join(parent, sib, tail), d)
	}
}

// list returns the names of at most maxListed directories in dir.
func list(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(maxListed)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// distance is the Levenshtein distance between a and b, by rune.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
