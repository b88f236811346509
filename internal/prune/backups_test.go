package prune_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/prune"
)

const day = 24 * time.Hour

// backupsEnv is a workspace with a ledger, a .handoff/backups directory
// and a directory outside the workspace, with file times a test sets.
type backupsEnv struct {
	t       *testing.T
	ws      string
	outside string
	led     *ledger.Ledger
	now     time.Time
}

func newBackupsEnv(t *testing.T) *backupsEnv {
	t.Helper()
	root := t.TempDir()
	e := &backupsEnv{t: t, ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "outside"), now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, d := range []string{filepath.Join(e.ws, layout.BackupsDir), filepath.Join(e.ws, layout.ReceiptsDir), filepath.Join(e.ws, "rules"), e.outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	led, err := ledger.Open(filepath.Join(e.ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	e.led = led
	return e
}

// sha is the SHA-256 of a handoff named s.
func sha(s string) string { return spool.Hash([]byte("# Memory Handoff\n" + s + "\n")) }

// backup writes the backup of the plan of handoff h on target, ago old,
// and returns its name.
func (e *backupsEnv) backup(h, target string, ago time.Duration) string {
	e.t.Helper()
	name := ingest.BackupName(sha(h), 0, target)
	e.file(filepath.Join(layout.BackupsDir, name), ago)
	return name
}

// file writes name (relative to the workspace, or absolute) ago old.
func (e *backupsEnv) file(name string, ago time.Duration) {
	e.t.Helper()
	if !filepath.IsAbs(name) {
		name = filepath.Join(e.ws, name)
	}
	if err := os.WriteFile(name, []byte("was: "+filepath.Base(name)+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.age(name, ago)
}

// age sets name's times (a symlink's own) to ago before now.
func (e *backupsEnv) age(name string, ago time.Duration) {
	e.t.Helper()
	ts := unix.NsecToTimespec(e.now.Add(-ago).UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		e.t.Fatal(err)
	}
}

// openPlan records an open plan (state planned, as a crash leaves it) of
// handoff h on target.
func (e *backupsEnv) openPlan(h, target string) {
	e.t.Helper()
	ctx := context.Background()
	src := claim.Source{Host: "laptop", Inbox: "/r/.claude/memory-handoffs", Name: h + ".md", SHA256: sha(h), Size: 1}
	if _, err := e.led.RecordSources(ctx, "run", []claim.Source{src}); err != nil {
		e.t.Fatal(err)
	}
	rows, err := e.led.PendingSources(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range rows {
		if r.SHA256 == sha(h) {
			p := &ledger.Plan{SHA256: r.SHA256, SourceID: r.ID, Kind: "document", Action: "no-card", Target: target, Before: "x", After: "y", Content: []byte("text")}
			if err := e.led.InsertPlans(ctx, "run", []*ledger.Plan{p}); err != nil {
				e.t.Fatal(err)
			}
			return
		}
	}
	e.t.Fatalf("source of %s not pending", h)
}

// tree is every entry below the workspace and the outside directory, with
// its mode, size and modification time (the ledger's files left out:
// SQLite keeps them).
func (e *backupsEnv) tree() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, top := range []string{e.ws, e.outside} {
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(filepath.Base(p), "ledger.db") {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			out[p] = fi.Mode().String() + " " + fi.ModTime().UTC().Format(time.RFC3339Nano) + " " + string(rune('0'+fi.Size()%10))
			return nil
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}

// layoutOld fills the workspace with every kind of entry retention
// meets, and returns the names of the backups a 90-day retention
// removes, sorted.
func (e *backupsEnv) layoutOld() []string {
	e.t.Helper()
	long := "rules/" + strings.Repeat("ü", 40) + ".md" // a name ingest cuts to its last 64 bytes
	gone := []string{
		e.backup("a1", "rules/a.md", 100*day), // older than the newest of a.md
		e.backup("d1", "rules/d.md", 200*day),
		e.backup("d2", "rules/d.md", 150*day),
		e.backup("l1", long, 300*day),
	}
	e.backup("a2", "rules/a.md", 95*day) // the newest of a.md: the undo of its last change
	e.backup("d3", "rules/d.md", 100*day)
	e.backup("l2", long, 200*day)
	e.backup("c1", "rules/c.md", 89*day) // within the 90 days
	e.backup("c2", "rules/c.md", 10*day)
	// An open plan's backup, however old; and an older done one of its
	// target, which recovery might also read.
	e.openPlan("b-open", "rules/b.md")
	e.backup("b-open", "rules/b.md", 100*365*day)
	e.backup("b0", "rules/b.md", 300*day)
	e.backup("b2", "rules/b.md", 10*day)
	// Never plan backups: another writer's late bytes, the card index's
	// backup, a temporary file, a directory and a symlink named like a
	// backup, a stranger's file.
	e.file(filepath.Join(layout.BackupsDir, "late.0123456789ab.0123456789abcdef"), 400*day)
	e.file(filepath.Join(layout.BackupsDir, "index.MEMORY.md"), 400*day)
	e.file(filepath.Join(layout.BackupsDir, ".handoff-tmp.0123456789ab.0.0123456789abcdef.x"), 400*day)
	e.file(filepath.Join(layout.BackupsDir, "notes.txt"), 400*day)
	e.file(filepath.Join(layout.BackupsDir, "mine.0.0123456789abcdef.rules_a.md"), 400*day)
	e.file(filepath.Join(layout.BackupsDir, "0123456789ab.x.0123456789abcdef.rules_a.md"), 400*day)
	dir := filepath.Join(e.ws, layout.BackupsDir, ingest.BackupName(sha("dir"), 0, "rules/a.md"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	e.age(dir, 400*day)
	victim := filepath.Join(e.outside, "victim.md")
	e.file(victim, 400*day)
	link := filepath.Join(e.ws, layout.BackupsDir, ingest.BackupName(sha("link"), 0, "rules/a.md"))
	if err := os.Symlink(victim, link); err != nil {
		e.t.Fatal(err)
	}
	e.age(link, 400*day)
	// Old files outside .handoff/backups.
	e.file("rules/a.md", 400*day)
	e.file(filepath.Join(layout.ReceiptsDir, ingest.BackupName(sha("r"), 0, "rules/a.md")), 400*day)
	e.file(filepath.Join(e.outside, ingest.BackupName(sha("o"), 0, "rules/a.md")), 400*day)
	slices.Sort(gone)
	return gone
}

// TestBackups: with keep 90d, the backups of finished plans older than
// 90 days go, except the newest of each target; an open plan's backup
// stays at any age, and so do the other backups of its target; late
// edits, index.MEMORY.md, temporary files, directories, symlinks and
// names that are no plan backup stay; nothing outside .handoff/backups
// is touched. Invariants: recovery always finds an open plan's backup;
// another writer's saved bytes and the undo of each target's last change
// are never removed; nothing outside the backups directory changes.
func TestBackups(t *testing.T) {
	e := newBackupsEnv(t)
	gone := e.layoutOld()
	before := e.tree()
	res, err := prune.Backups(context.Background(), e.led, prune.BackupsOptions{Workspace: e.ws, Keep: 90 * day, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Names, gone) || res.Files != len(gone) {
		t.Errorf("removed %q; want %q", res.Names, gone)
	}
	if res.Open != 2 || res.Newest != 3 {
		t.Errorf("kept %d open and %d newest; want 2 (b-open, b0) and 3 (a2, d3, l2)", res.Open, res.Newest)
	}
	after := e.tree()
	for p, v := range before {
		removed := slices.Contains(gone, filepath.Base(p)) && filepath.Dir(p) == filepath.Join(e.ws, layout.BackupsDir)
		switch w, ok := after[p]; {
		case removed && ok:
			t.Errorf("%s is still there", p)
		case !removed && !ok:
			t.Errorf("%s was removed", p)
		case !removed && p != filepath.Join(e.ws, layout.BackupsDir) && w != v:
			t.Errorf("%s changed: %s, was %s", p, w, v)
		}
	}
	if len(after) != len(before)-len(gone) {
		t.Errorf("%d entries after, %d before: something appeared", len(after), len(before))
	}
}

// TestBackupsDryRun: a dry run lists what a real one removes and writes
// nothing. Invariant: --dry-run changes nothing anywhere.
func TestBackupsDryRun(t *testing.T) {
	e := newBackupsEnv(t)
	gone := e.layoutOld()
	before := e.tree()
	res, err := prune.Backups(context.Background(), e.led, prune.BackupsOptions{Workspace: e.ws, Keep: 90 * day, Now: e.now, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Names, gone) {
		t.Errorf("would remove %q; want %q", res.Names, gone)
	}
	if after := e.tree(); !mapsEqual(after, before) {
		t.Error("a dry run changed the workspace")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestBackupsSymlinkedDir: a .handoff/backups that is a symlink is
// refused, and whatever it points at stays. Invariant: retention never
// removes anything below a symlink, outside the workspace or in it.
func TestBackupsSymlinkedDir(t *testing.T) {
	e := newBackupsEnv(t)
	bk := filepath.Join(e.ws, layout.BackupsDir)
	if err := os.Remove(bk); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{e.outside, filepath.Join(e.ws, "rules")} {
		os.Remove(bk)
		if err := os.Symlink(target, bk); err != nil {
			t.Fatal(err)
		}
		name := ingest.BackupName(sha("x"), 0, "rules/a.md")
		e.file(filepath.Join(target, name), 400*day)
		e.file(filepath.Join(target, ingest.BackupName(sha("y"), 0, "rules/a.md")), 300*day)
		_, err := prune.Backups(context.Background(), e.led, prune.BackupsOptions{Workspace: e.ws, Keep: 90 * day, Now: e.now})
		if !errors.Is(err, prune.ErrBackupsDir) {
			t.Errorf("backups -> %s: %v; want ErrBackupsDir", target, err)
		}
		if _, err := os.Lstat(filepath.Join(target, name)); err != nil {
			t.Errorf("backups -> %s: %v", target, err)
		}
	}
}

// TestRetainBackupsOnceADay: sync's retention looks at most once a day
// (by the stamp's time), again after a day or when the stamp is in the
// future, never with keep 0, and a pass that failed leaves no stamp, so
// the next run tries again. Invariant: the idle tick pays one stat, and
// a clock set back cannot stop retention for good.
func TestRetainBackupsOnceADay(t *testing.T) {
	e := newBackupsEnv(t)
	ctx := context.Background()
	first := e.backup("a1", "rules/a.md", 200*day)
	e.backup("a2", "rules/a.md", 100*day)
	res, looked, err := prune.RetainBackups(ctx, e.led, e.ws, 0, e.now)
	if err != nil || looked || res.Files != 0 {
		t.Fatalf("keep 0: looked %v, removed %d, %v; want nothing", looked, res.Files, err)
	}
	res, looked, err = prune.RetainBackups(ctx, e.led, e.ws, 90*day, e.now)
	if err != nil || !looked || !slices.Equal(res.Names, []string{first}) {
		t.Fatalf("first pass: looked %v, removed %q, %v; want %s", looked, res.Names, err, first)
	}
	fi, err := os.Stat(filepath.Join(e.ws, layout.BackupsStamp))
	if err != nil || !fi.ModTime().Equal(e.now) {
		t.Fatalf("stamp: %v, %v; want its time %v", fi, err, e.now)
	}

	second := e.backup("a0", "rules/a.md", 300*day)
	for _, later := range []time.Duration{time.Minute, 23 * time.Hour} {
		if _, looked, err := prune.RetainBackups(ctx, e.led, e.ws, 90*day, e.now.Add(later)); looked || err != nil {
			t.Fatalf("%v later: looked %v, %v; want it to wait for the day", later, looked, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.ws, layout.BackupsDir, second)); err != nil {
		t.Fatal(err)
	}
	res, looked, err = prune.RetainBackups(ctx, e.led, e.ws, 90*day, e.now.Add(day))
	if err != nil || !looked || !slices.Equal(res.Names, []string{second}) {
		t.Fatalf("a day later: looked %v, removed %q, %v; want %s", looked, res.Names, err, second)
	}

	// A clock set back a week: the stamp is in the future.
	if _, looked, _ := prune.RetainBackups(ctx, e.led, e.ws, 90*day, e.now.Add(-7*day)); !looked {
		t.Error("a stamp in the future held retention off")
	}

	// A failed pass (the backups directory a symlink) leaves the stamp as
	// it was, so the next run looks again.
	bk := filepath.Join(e.ws, layout.BackupsDir)
	if err := os.Rename(bk, bk+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bk+".real", bk); err != nil {
		t.Fatal(err)
	}
	stampAt := e.now.Add(3 * day)
	if _, _, err := prune.RetainBackups(ctx, e.led, e.ws, 90*day, stampAt); !errors.Is(err, prune.ErrBackupsDir) {
		t.Fatalf("symlinked backups: %v; want ErrBackupsDir", err)
	}
	if _, looked, _ := prune.RetainBackups(ctx, e.led, e.ws, 90*day, stampAt.Add(time.Minute)); !looked {
		t.Error("a failed pass set the stamp: the next run did not look again")
	}
}
