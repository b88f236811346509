package handoff

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// pruneLater is a clock 40 days ahead: with --older-than 30d, everything
// the test made now is old, and a file dated 20 days ahead is young.
func pruneLater() time.Time { return time.Now().Add(40 * 24 * time.Hour) }

const thirtyDays = 30 * 24 * time.Hour

func setMtime(t *testing.T, p string, at time.Time) {
	t.Helper()
	tv := []unix.Timeval{unix.NsecToTimeval(at.UnixNano()), unix.NsecToTimeval(at.UnixNano())}
	if err := unix.Lutimes(p, tv); err != nil { // does not follow a symlink
		t.Fatal(err)
	}
}

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSizes(t *testing.T, paths []string) int64 {
	t.Helper()
	var n int64
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// pruneFixture: a synced workspace (promoted, routed, review, malformed),
// one handoff stored but not yet ingested, and processed/ directories
// holding things prune must leave alone.
type pruneFixture struct {
	*testEnv
	processed []string // the archived handoffs prune must remove
	spoolGone []string // spool files prune must remove
	keep      []string // paths that must survive, whatever their age
	outside   string   // a directory outside every inbox
}

func newPruneFixture(t *testing.T) *pruneFixture {
	e := newEnv(t)
	f := &pruneFixture{testEnv: e, outside: filepath.Join(e.dir, "outside")}
	e.put(e.inbox, "a.md", card("create-card", "x.md", goodFM))
	e.put(e.inbox, "b.md", "not a handoff")
	e.put(e.inbox, "r.md", doc("../etc/passwd", "x"))
	e.put(e.inbox2, "c.md", doc("TOOLS.md", "t"))
	r := e.sync(false)
	if r.Counts.Promoted != 1 || r.Counts.Routed != 1 || r.Counts.Review != 1 || r.Counts.Malformed != 1 {
		t.Fatalf("setup sync: %+v", r.Counts)
	}
	f.processed = append(glob(t, filepath.Join(e.inbox, "processed/*.md")), glob(t, filepath.Join(e.inbox2, "processed/*.md"))...)
	if len(f.processed) != 3 {
		t.Fatalf("processed: %v", f.processed)
	}
	for _, n := range []string{"a.md", "r.md", "c.md"} {
		f.spoolGone = append(f.spoolGone, filepath.Join(e.ws, layout.SpoolDir, claim.Name(sum(map[string]string{
			"a.md": card("create-card", "x.md", goodFM), "r.md": doc("../etc/passwd", "x"), "c.md": doc("TOOLS.md", "t")}[n]))))
	}
	old := time.Now().Add(-365 * 24 * time.Hour)

	// Never removed: malformed/, review drafts, the malformed handoff's
	// spool file.
	f.keep = append(f.keep, glob(t, filepath.Join(e.inbox, "malformed/*.md"))...)
	f.keep = append(f.keep, glob(t, filepath.Join(e.ws, layout.ReviewDir, "*.md"))...)
	f.keep = append(f.keep, filepath.Join(e.ws, layout.SpoolDir, claim.Name(sum("not a handoff"))))
	if len(f.keep) != 3 {
		t.Fatalf("keep: %v", f.keep)
	}
	for _, p := range f.keep {
		setMtime(t, p, old)
	}

	// A handoff stored but not ingested yet (a crash between the two).
	pending := doc("TOOLS.md", "pending")
	sp, err := claim.OpenSpool(filepath.Join(e.ws, layout.SpoolDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(map[string][]byte{sum(pending): []byte(pending)}); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	led, err := ingest.OpenLedger(filepath.Join(e.ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.RecordSources(context.Background(), "crashed", []claim.Source{{Host: "canonical", Inbox: e.inbox, Name: "p.md", SHA256: sum(pending), Size: int64(len(pending)), Parses: true}}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	f.keep = append(f.keep, filepath.Join(e.ws, layout.SpoolDir, claim.Name(sum(pending))))

	// In processed/: a young handoff, a symlink, a directory with a file
	// in it, a name that is not a plain *.md name. All old but the first.
	proc := filepath.Join(e.inbox, claim.ProcessedDir)
	young := filepath.Join(proc, "young.0123456789ab.md")
	mustWriteFile(t, young, "young")
	setMtime(t, young, time.Now().Add(20*24*time.Hour))
	target := filepath.Join(f.outside, "target.md")
	mustWriteFile(t, target, "outside")
	link := filepath.Join(proc, "link.0123456789ab.md")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(proc, "dir.0123456789ab.md")
	inner := filepath.Join(dir, "inner.md")
	mustWriteFile(t, inner, "inner")
	notes := filepath.Join(proc, "notes.txt")
	mustWriteFile(t, notes, "notes")
	hidden := filepath.Join(proc, ".hidden.md")
	mustWriteFile(t, hidden, "hidden")
	for _, p := range []string{target, link, inner, dir, notes, hidden} {
		setMtime(t, p, old)
	}
	f.keep = append(f.keep, young, target, link, inner, dir, notes, hidden)

	// A third inbox whose processed/ is a symlink to a directory of old
	// files: nothing below a symlink is touched.
	in3 := filepath.Join(e.dir, "repos/tool/.claude/memory-handoffs")
	if err := os.MkdirAll(in3, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(f.outside, "dir/victim.0123456789ab.md")
	mustWriteFile(t, victim, "victim")
	setMtime(t, victim, old)
	if err := os.Symlink(filepath.Dir(victim), filepath.Join(in3, claim.ProcessedDir)); err != nil {
		t.Fatal(err)
	}
	f.keep = append(f.keep, victim)
	return f
}

func mustWriteFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *pruneFixture) prune(dryRun bool) *PruneReport {
	f.t.Helper()
	r, err := Prune(context.Background(), PruneOptions{Manifest: f.m, OlderThan: thirtyDays, DryRun: dryRun, Now: pruneLater, Dial: f.dial})
	if err != nil {
		f.t.Fatalf("Prune: %v", err)
	}
	return r
}

func countRows(t *testing.T, ws string) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sources`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPrune(t *testing.T) {
	f := newPruneFixture(t)
	rows := countRows(t, f.ws)
	wantBytes := fileSizes(t, f.processed)
	wantSpoolBytes := fileSizes(t, f.spoolGone)

	// A dry run reports exactly what the real run then does, and changes
	// nothing at all.
	before := treeHash(t, f.dir)
	dry := f.prune(true)
	if after := treeHash(t, f.dir); after != before {
		t.Fatal("dry run changed the tree")
	}
	applied := f.prune(false)
	for _, r := range []*PruneReport{dry, applied} {
		if len(r.Hosts) != 1 || r.Failed() {
			t.Fatalf("hosts: %+v", r.Hosts)
		}
		h := r.Hosts[0]
		if h.Name != "canonical" || h.Removed != 3 || h.Bytes != wantBytes || h.Kept != 1 || h.Skipped != 4 {
			t.Errorf("dry=%v host: %+v, want 3 removed (%d bytes), 1 kept, 4 skipped", r.DryRun, h, wantBytes)
		}
		if r.Spool.Files != 3 || r.Spool.Bytes != wantSpoolBytes {
			t.Errorf("dry=%v spool: %+v, want 3 files (%d bytes)", r.DryRun, r.Spool, wantSpoolBytes)
		}
	}
	for _, p := range append(f.processed, f.spoolGone...) {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
	for _, p := range f.keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s must never be pruned: %v", p, err)
		}
	}
	if n := countRows(t, f.ws); n != rows || n != 5 {
		t.Errorf("ledger has %d source rows after prune, want %d", n, rows)
	}

	// Again: nothing left to remove.
	again := f.prune(false)
	if again.Hosts[0].Removed != 0 || again.Spool.Files != 0 {
		t.Fatalf("second prune removed more: %+v", again)
	}
}

// TestPruneKeepsYoung: with a cutoff before everything, nothing goes.
func TestPruneKeepsYoung(t *testing.T) {
	f := newPruneFixture(t)
	r, err := Prune(context.Background(), PruneOptions{Manifest: f.m, OlderThan: thirtyDays})
	if err != nil {
		t.Fatal(err)
	}
	if r.Hosts[0].Removed != 0 || r.Spool.Files != 0 {
		t.Fatalf("removed young handoffs: %+v", r)
	}
	for _, p := range f.processed {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

// TestPruneFailedHost: a host that cannot be reached is reported and the
// others are pruned.
func TestPruneFailedHost(t *testing.T) {
	f := newPruneFixture(t)
	yml := fmt.Sprintf(`version: 1
workspace: %s
hosts:
  - name: broken
    transport: local
    inboxes: [/nowhere/.claude/memory-handoffs]
  - name: canonical
    transport: local
    discover: [{root: %s, max_depth: 2}]
`, f.ws, filepath.Join(f.dir, "repos"))
	m, err := manifest.Parse([]byte(yml), filepath.Join(f.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		if h.Name == "broken" {
			return nil, errors.New("connection refused")
		}
		return transport.NewLocal(), nil
	}
	r, err := Prune(context.Background(), PruneOptions{Manifest: m, OlderThan: thirtyDays, Now: pruneLater, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Failed() || r.Hosts[0].Name != "broken" || !strings.Contains(r.Hosts[0].Error, "connection refused") {
		t.Fatalf("broken host not reported: %+v", r.Hosts)
	}
	if r.Hosts[1].Error != "" || r.Hosts[1].Removed != 3 {
		t.Fatalf("the other host was not pruned: %+v", r.Hosts[1])
	}
}

// TestPruneSelectedHostSpool: with --host, only spool files whose sources
// all came from the selected hosts go.
func TestPruneSelectedHostSpool(t *testing.T) {
	f := newPruneFixture(t)
	yml := fmt.Sprintf("version: 1\nworkspace: %s\nhosts:\n  - name: canonical\n    transport: local\n    discover: [{root: %s, max_depth: 2}]\n  - name: other\n    transport: local\n    inboxes: [/nowhere/.claude/memory-handoffs]\n",
		f.ws, filepath.Join(f.dir, "repos"))
	m, err := manifest.Parse([]byte(yml), filepath.Join(f.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Prune(context.Background(), PruneOptions{Manifest: m, Hosts: []string{"other"}, OlderThan: thirtyDays, Now: pruneLater})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != 1 || r.Hosts[0].Removed != 0 || r.Spool.Files != 0 {
		t.Fatalf("pruning host other touched canonical's handoffs: %+v", r)
	}
}

func TestPruneLockedAndUsage(t *testing.T) {
	f := newPruneFixture(t)
	fl := flock.New(filepath.Join(f.ws, layout.LockFile))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	for _, dry := range []bool{false, true} {
		_, err := Prune(context.Background(), PruneOptions{Manifest: f.m, OlderThan: thirtyDays, DryRun: dry, Now: pruneLater})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("dry=%v: %v, want ErrLocked", dry, err)
		}
	}
	fl.Unlock()
	for _, p := range f.processed {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("a prune that found the lock held removed %s", p)
		}
	}
	var ue *UsageError
	if _, err := Prune(context.Background(), PruneOptions{Manifest: f.m}); !errors.As(err, &ue) {
		t.Fatalf("zero --older-than: %v, want a usage error", err)
	}
	if _, err := Prune(context.Background(), PruneOptions{Manifest: f.m, OlderThan: time.Hour, Hosts: []string{"nope"}}); !errors.As(err, &ue) {
		t.Fatalf("unknown host: %v, want a usage error", err)
	}
}

// TestRelayLogProgress: a worker's progress lines become "pulling" updates
// for Options.Progress (and stay in the log); nothing else does, and
// nonsense counts read as 0. (It lives here because worker_test.go does not
// exist yet; move it there when it does.)
func TestRelayLogProgress(t *testing.T) {
	in := strings.Join([]string{
		`{"time":"t","level":"DEBUG","msg":"progress","host":"laptop","inboxes":2,"pulled":5}`,
		`{"time":"t","level":"INFO","msg":"handoff","name":"a.md"}`,
		`not json`,
		`{"level":"DEBUG","msg":"progress","inboxes":-3,"pulled":"many"}`,
	}, "\n") + "\n"
	var got []HostProgress
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	relayLog(strings.NewReader(in), "laptop", log, func(p HostProgress) { got = append(got, p) })
	want := []HostProgress{{Host: "laptop", State: "pulling", Inboxes: 2, Pulled: 5}, {Host: "laptop", State: "pulling"}}
	if !slices.Equal(got, want) {
		t.Fatalf("progress %+v, want %+v", got, want)
	}
	if !strings.Contains(logged.String(), "msg=handoff") || !strings.Contains(logged.String(), "msg=progress") {
		t.Fatalf("log lost lines:\n%s", logged.String())
	}
	relayLog(strings.NewReader(in), "laptop", log, nil) // no callback: logs only
}
