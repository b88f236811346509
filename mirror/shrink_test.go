package mirror

import (
	"fmt"
	iofs "io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/hostile"
)

// card is a read-only regular file on the hostile server, as a publish
// leaves it.
func card(data string) *hostile.Node {
	n := hostile.File(data)
	n.Mode = 0o444
	return n
}

// dirsUnder lists the directories the server holds directly under dir.
func dirsUnder(v *hostile.VFS, dir string) []string {
	var out []string
	for _, p := range v.Paths() {
		if path.Dir(p) == dir && v.Node(p).Mode.IsDir() {
			out = append(out, path.Base(p))
		}
	}
	slices.Sort(out)
	return out
}

// TestPublishAfterShrink: canonical memory shrinks from 4,009 cards to 9
// (4,000 deleted by hand on the canonical host). Invariant: the mirror
// publishes after any shrink: the listing of memory/cards is bounded by
// what the last publish left, not only by the new set, so the publish
// succeeds, removes the 4,000 cards and keeps the 9; nothing outside the
// mirror changes.
func TestPublishAfterShrink(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	v.Add(vhome+"/victim", hostile.File("keep"))
	before := outsideData(v, vhome+"/mirror")
	mir := vhome + "/mirror"
	prev := &State{Host: "hostile", Dir: mir, Generation: 1, Files: map[string]Stamp{}}
	var keep []File
	for i := range 4009 {
		rel := fmt.Sprintf("memory/cards/c%04d.md", i)
		data := fmt.Sprintf("card %d\n", i)
		n := v.Add(mir+"/"+rel, card(data))
		f := NewFile(rel, []byte(data))
		prev.Files[rel] = Stamp{SHA256: f.SHA256, Size: n.Size, ModTime: n.ModTime}
		if i < 9 {
			keep = append(keep, f)
		}
	}
	f := dialVFS(t, v)
	r, st := publishTo(t, f, "~/mirror", prev, keep)
	if r.Outcome != OutcomeOK {
		t.Fatalf("after a shrink from 4,009 cards to 9 the publish failed: %s", r.Error)
	}
	if n := len(r.Removed); n != 4000 {
		t.Errorf("removed %d files; want the 4,000 deleted cards", n)
	}
	var cards []string
	for _, p := range v.Paths() {
		if strings.HasPrefix(p, mir+"/memory/cards/") {
			cards = append(cards, path.Base(p))
		}
	}
	if len(cards) != 9 || cards[0] != "c0000.md" || cards[8] != "c0008.md" {
		t.Errorf("the mirror holds %d cards (%q…); want c0000.md to c0008.md", len(cards), cards[:min(3, len(cards))])
	}
	checkConfined(t, v, mir, before)
	// And the next, smaller still, publishes too.
	r, _ = publishTo(t, f, "~/mirror", st, keep[:1])
	if r.Outcome != OutcomeOK || len(r.Removed) != 8 {
		t.Errorf("a second shrink: outcome %s (%s), removed %d; want ok and 8", r.Outcome, r.Error, len(r.Removed))
	}
}

// TestPublishReposChurn: every sync brings 200 repositories that were
// not there before (a hostile host, or a CI host making a new clone
// path per job), nine times. Invariant: the mirror publishes after any
// churn of repositories: each emptied repos/<slug>/ directory is
// removed, so repos/ holds only the repositories of the last publish
// and no listing grows with the history.
func TestPublishReposChurn(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	v.Add(vhome+"/victim", hostile.File("keep"))
	mir := vhome + "/mirror"
	before := outsideData(v, mir)
	f := dialVFS(t, v)
	var st *State
	for round := range 9 {
		var repos []Repo
		var want []string
		for i := range 200 {
			slug := fmt.Sprintf("r%d-%03d", round, i)
			repos = append(repos, Repo{Slug: slug, Handoffs: []RecentHandoff{recent("a.md", 0)}})
			want = append(want, slug)
		}
		fs := append(files("HANDOFF.md", "guide\n"), ReposFiles(repos, DefaultRecent, reposNow)...)
		var r Result
		r, st = publishTo(t, f, "~/mirror", st, fs)
		if r.Outcome != OutcomeOK {
			t.Fatalf("round %d: %s", round, r.Error)
		}
		slices.Sort(want)
		if got := dirsUnder(v, mir+"/repos"); !slices.Equal(got, want) {
			t.Fatalf("round %d: repos/ holds %d directories; want the %d of this publish", round, len(got), len(want))
		}
	}
	checkConfined(t, v, mir, before)
	// repos/ turned off: it goes, directories and all.
	r, _ := publishTo(t, f, "~/mirror", st, files("HANDOFF.md", "guide\n"))
	if r.Outcome != OutcomeOK {
		t.Fatal(r.Error)
	}
	if n := v.Node(mir + "/repos"); n != nil {
		t.Errorf("repos/ is still there after repos was turned off: %q", dirsUnder(v, mir+"/repos"))
	}
	if !slices.Contains(r.Removed, "repos/") {
		t.Errorf("removed %d entries, not repos/", len(r.Removed))
	}
}

// TestPublishRemovesStrayDirs: a mirror that an older version left with
// 1,500 emptied repository directories (its listing past the old bound),
// more than one publish removes,
// one holding a file nobody published, one holding a directory, and one
// whose name no repository has. Invariant: the publish succeeds; only
// empty directories with a repository's name are removed, each proved
// inside the mirror; nothing else in or outside the mirror is touched.
func TestPublishRemovesStrayDirs(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	mir := vhome + "/mirror"
	v.Add(vhome+"/victim", hostile.File("keep"))
	before := outsideData(v, mir)
	for i := range 1500 {
		v.Add(fmt.Sprintf("%s/repos/old-%04d", mir, i), hostile.Dir())
	}
	v.Add(mir+"/repos/held/notes.txt", card("mine"))
	v.Add(mir+"/repos/nested/inner", hostile.Dir())
	v.Add(mir+"/repos/Not A Slug", hostile.Dir())
	fs := append(files("HANDOFF.md", "guide\n"), ReposFiles([]Repo{{Slug: "app", Handoffs: []RecentHandoff{recent("a.md", 0)}}}, DefaultRecent, reposNow)...)
	f := dialVFS(t, v)
	r, st := publishTo(t, f, "~/mirror", nil, fs)
	if r.Outcome != OutcomeOK {
		t.Fatal(r.Error)
	}
	// The first publish does not own the mirror yet; the next ones do,
	// and each removes at most maxStrays stray directories.
	for range 2 {
		r, st = publishTo(t, f, "~/mirror", st, fs)
		if r.Outcome != OutcomeOK {
			t.Fatal(r.Error)
		}
	}
	if got, want := dirsUnder(v, mir+"/repos"), []string{"Not A Slug", "app", "held", "nested"}; !slices.Equal(got, want) {
		t.Errorf("repos/ holds %d directories (%q…); want %q", len(got), got[:min(5, len(got))], want)
	}
	if v.Node(mir+"/repos/held/notes.txt") == nil || v.Node(mir+"/repos/nested/inner") == nil {
		t.Error("a directory that was not empty lost its content")
	}
	checkConfined(t, v, mir, before)
	if n := v.Node(mir + "/repos/app"); n == nil || !n.Mode.IsDir() || n.Mode&iofs.ModeSymlink != 0 {
		t.Error("repos/app is not a directory")
	}
}
