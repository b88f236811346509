package prune_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/prune"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
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
	*testenv.Env
	dial      setup.Dialer // nil: setup.Dial
	processed []string     // the archived handoffs prune must remove
	spoolGone []string     // stored contents (by SHA-256) prune must remove
	spoolKeep []string     // stored contents that must survive, whatever their age
	keep      []string     // paths that must survive, whatever their age
	outside   string       // a directory outside every inbox
}

func newPruneFixture(t *testing.T) *pruneFixture {
	e := testenv.NewEnv(t, "")
	f := &pruneFixture{Env: e, outside: filepath.Join(e.Dir, "outside")}
	e.Put(e.Inbox, "a.md", testenv.Card("x.md", "body"))
	e.Put(e.Inbox, "b.md", "not a handoff")
	e.Put(e.Inbox, "r.md", testenv.Doc("../etc/passwd", "x"))
	e.Put(e.Inbox2, "c.md", testenv.Doc("TOOLS.md", "t"))
	r := f.sync()
	if r.Counts.Promoted != 1 || r.Counts.Routed != 1 || r.Counts.Review != 1 || r.Counts.Malformed != 1 {
		t.Fatalf("setup sync: %+v", r.Counts)
	}
	f.processed = append(glob(t, filepath.Join(e.Inbox, "processed/*.md")), glob(t, filepath.Join(e.Inbox2, "processed/*.md"))...)
	if len(f.processed) != 3 {
		t.Fatalf("processed: %v", f.processed)
	}
	for _, n := range []string{"a.md", "c.md"} {
		f.spoolGone = append(f.spoolGone, testenv.Sum(map[string]string{
			"a.md": testenv.Card("x.md", "body"), "c.md": testenv.Doc("TOOLS.md", "t")}[n]))
	}
	old := time.Now().Add(-365 * 24 * time.Hour)

	// Never removed: malformed/, review drafts, the malformed handoff's
	// stored bytes.
	f.keep = append(f.keep, glob(t, filepath.Join(e.Inbox, "malformed/*.md"))...)
	f.keep = append(f.keep, glob(t, filepath.Join(e.WS, layout.ReviewDir, "*.md"))...)
	f.spoolKeep = append(f.spoolKeep, testenv.Sum("not a handoff"))
	// r.md waits in review: its exact bytes stay, however old.
	f.spoolKeep = append(f.spoolKeep, testenv.Sum(testenv.Doc("../etc/passwd", "x")))
	if len(f.keep) != 2 {
		t.Fatalf("keep: %v", f.keep)
	}
	for _, p := range f.keep {
		setMtime(t, p, old)
	}

	// A handoff stored but not ingested yet (a crash between the two).
	pending := testenv.Doc("TOOLS.md", "pending")
	led, err := ledger.Open(filepath.Join(e.WS, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.StoreSources(context.Background(), "crashed", []claim.Source{{Host: "canonical", Inbox: e.Inbox, Name: "p.md", SHA256: testenv.Sum(pending), Size: int64(len(pending)), Parses: true}},
		map[string][]byte{testenv.Sum(pending): []byte(pending)}); err != nil {
		t.Fatal(err)
	}
	led.Close()
	f.spoolKeep = append(f.spoolKeep, testenv.Sum(pending))

	// In processed/: a young handoff, a symlink, a directory with a file
	// in it, a name that is not a plain *.md name. All old but the first.
	proc := filepath.Join(e.Inbox, claim.ProcessedDir)
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
	in3 := filepath.Join(e.Dir, "repos/tool/.claude/memory-handoffs")
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

// sync runs one sync of the fixture's host.
func (f *pruneFixture) sync() *receipts.Receipt {
	f.T.Helper()
	r, err := handoff.Sync(context.Background(), handoff.Options{Manifest: f.M, Dial: f.dial})
	if err != nil {
		f.T.Fatalf("Sync: %v", err)
	}
	return r
}

func (f *pruneFixture) prune(dryRun bool) *prune.Report {
	f.T.Helper()
	r, err := prune.Run(context.Background(), prune.Options{Manifest: f.M, OlderThan: thirtyDays, DryRun: dryRun, Now: pruneLater, Dial: f.dial})
	if err != nil {
		f.T.Fatalf("Prune: %v", err)
	}
	return r
}

// stored reports whether the workspace's ledger holds sha's bytes.
func stored(t *testing.T, ws, sha string) bool {
	t.Helper()
	return storedSizes(t, ws, []string{sha})[sha] > 0
}

// storedSizes returns the sizes of the bytes the ledger holds, by hash,
// and in all under "".
func storedSizes(t *testing.T, ws string, shas []string) map[string]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int64{}
	for _, sha := range shas {
		var n int64
		if err := db.QueryRow(`SELECT coalesce(sum(length(data)), 0) FROM contents WHERE sha256 = ?`, sha).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out[sha] = n
		}
		out[""] += n
	}
	return out
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
	rows := countRows(t, f.WS)
	wantBytes := fileSizes(t, f.processed)
	wantSpoolBytes := storedSizes(t, f.WS, f.spoolGone)

	// A dry run reports exactly what the real run then does, and changes
	// nothing at all.
	before := testenv.TreeHash(t, f.Dir)
	dry := f.prune(true)
	if after := testenv.TreeHash(t, f.Dir); after != before {
		t.Fatal("dry run changed the tree")
	}
	applied := f.prune(false)
	for _, r := range []*prune.Report{dry, applied} {
		if len(r.Hosts) != 1 || r.Failed() {
			t.Fatalf("hosts: %+v", r.Hosts)
		}
		h := r.Hosts[0]
		if h.Name != "canonical" || h.Removed != 3 || h.Bytes != wantBytes || h.Kept != 0 || h.Unknown != 1 || h.Skipped != 4 {
			t.Errorf("dry=%v host: %+v, want 3 removed (%d bytes), 1 unknown, 4 skipped", r.DryRun, h, wantBytes)
		}
		if len(h.Names) != 3 {
			t.Errorf("dry=%v names %q, want the 3 removed", r.DryRun, h.Names)
		}
		if r.Receipts.Files != 0 {
			t.Errorf("dry=%v receipts: %+v, want the setup sync's kept: it is the newest", r.DryRun, r.Receipts)
		}
		if r.Spool.Files != 2 || r.Spool.Bytes != wantSpoolBytes[""] || r.Spool.Held != 1 {
			t.Errorf("dry=%v spool: %+v, want 2 files (%d bytes), 1 held for review", r.DryRun, r.Spool, wantSpoolBytes[""])
		}
	}
	for _, p := range f.processed {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
	for _, sha := range f.spoolGone {
		if stored(t, f.WS, sha) {
			t.Errorf("the bytes of %.12s not removed", sha)
		}
	}
	for _, sha := range f.spoolKeep {
		if !stored(t, f.WS, sha) {
			t.Errorf("the bytes of %.12s must never be pruned", sha)
		}
	}
	for _, p := range f.keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s must never be pruned: %v", p, err)
		}
	}
	if n := countRows(t, f.WS); n != rows || n != 5 {
		t.Errorf("ledger has %d source rows after prune, want %d", n, rows)
	}

	// Again: nothing left to remove.
	again := f.prune(false)
	if again.Hosts[0].Removed != 0 || again.Spool.Files != 0 {
		t.Fatalf("second prune removed more: %+v", again)
	}
}

// TestPruneKeepsYoung: with a cutoff before everything, nothing goes,
// however old the writers' modification times: files are aged by when
// the ledger says they were archived.
func TestPruneKeepsYoung(t *testing.T) {
	f := newPruneFixture(t)
	for _, p := range f.processed {
		setMtime(t, p, time.Now().Add(-365*24*time.Hour))
	}
	r, err := prune.Run(context.Background(), prune.Options{Manifest: f.M, OlderThan: thirtyDays})
	if err != nil {
		t.Fatal(err)
	}
	if r.Hosts[0].Removed != 0 || r.Hosts[0].Kept != 3 || r.Spool.Files != 0 || r.Receipts.Files != 0 {
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
`, f.WS, filepath.Join(f.Dir, "repos"))
	m, err := manifest.Parse([]byte(yml), filepath.Join(f.Dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		if h.Name == "broken" {
			return nil, errors.New("connection refused")
		}
		return transport.NewLocal(), nil
	}
	r, err := prune.Run(context.Background(), prune.Options{Manifest: m, OlderThan: thirtyDays, Now: pruneLater, Dial: dial})
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
		f.WS, filepath.Join(f.Dir, "repos"))
	m, err := manifest.Parse([]byte(yml), filepath.Join(f.Dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := prune.Run(context.Background(), prune.Options{Manifest: m, Hosts: []string{"other"}, OlderThan: thirtyDays, Now: pruneLater})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != 1 || r.Hosts[0].Removed != 0 || r.Spool.Files != 0 {
		t.Fatalf("pruning host other touched canonical's handoffs: %+v", r)
	}
}

func TestPruneLockedAndUsage(t *testing.T) {
	f := newPruneFixture(t)
	fl := flock.New(filepath.Join(f.WS, layout.LockFile))
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	for _, dry := range []bool{false, true} {
		_, err := prune.Run(context.Background(), prune.Options{Manifest: f.M, OlderThan: thirtyDays, DryRun: dry, Now: pruneLater})
		if !errors.Is(err, setup.ErrLocked) {
			t.Fatalf("dry=%v: %v, want ErrLocked", dry, err)
		}
	}
	fl.Unlock()
	for _, p := range f.processed {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("a prune that found the lock held removed %s", p)
		}
	}
	var ue *setup.UsageError
	if _, err := prune.Run(context.Background(), prune.Options{Manifest: f.M}); !errors.As(err, &ue) {
		t.Fatalf("zero --older-than: %v, want a usage error", err)
	}
	if _, err := prune.Run(context.Background(), prune.Options{Manifest: f.M, OlderThan: time.Hour, Hosts: []string{"nope"}}); !errors.As(err, &ue) {
		t.Fatalf("unknown host: %v, want a usage error", err)
	}
}

// TestPruneReceipts: old per-run receipts go; latest.*, the newest
// receipt (the one latest.json copies), the newest receipt of a run that
// was not ok, receipts of runs not finished or not in the ledger, and
// young ones stay. Invariant: the record of the last run and of the last
// failure is never lost.
func TestPruneReceipts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	rdir := filepath.Join(dir, "receipts")
	runs := []struct{ id, outcome string }{
		{"r1-ok", "ok"}, {"r2-partial", "partial"}, {"r3-failed", "failed"}, {"r4-ok", "ok"}, {"r5-unfinished", ""},
	}
	for _, r := range runs {
		if err := led.StartRun(ctx, r.id, "apply"); err != nil {
			t.Fatal(err)
		}
		if r.outcome != "" {
			if err := led.FinishRun(ctx, r.id, r.outcome, "", filepath.Join(rdir, r.id+".json")); err != nil {
				t.Fatal(err)
			}
		}
		mustWriteFile(t, filepath.Join(rdir, r.id+".json"), "{}")
	}
	// Distinct finish times, in this order, a day apart.
	for i, r := range runs {
		at := time.Now().Add(time.Duration(i-10) * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
		if _, err := led.DB().Exec(`UPDATE runs SET finished_at = ? WHERE run_id = ? AND finished_at != ''`, at, r.id); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"latest.json", "latest.log", "stranger.json"} {
		mustWriteFile(t, filepath.Join(rdir, n), "x")
	}
	opts := prune.ReceiptsOptions{Dir: rdir, Before: time.Now().Add(time.Hour)}
	dry := opts
	dry.DryRun = true
	before := testenv.TreeHash(t, rdir)
	d, err := prune.Receipts(ctx, led, dry)
	if err != nil {
		t.Fatal(err)
	}
	if after := testenv.TreeHash(t, rdir); after != before {
		t.Fatal("dry run changed the tree")
	}
	r, err := prune.Receipts(ctx, led, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "r1-ok.json r2-partial.json"
	for _, res := range []prune.ReceiptsResult{d, r} {
		if got := strings.Join(res.Names, " "); got != want || res.Files != 2 {
			t.Errorf("removed %q (%d), want %q", got, res.Files, want)
		}
	}
	for _, n := range []string{"r3-failed.json", "r4-ok.json", "r5-unfinished.json", "latest.json", "latest.log", "stranger.json"} {
		if _, err := os.Lstat(filepath.Join(rdir, n)); err != nil {
			t.Errorf("%s must stay: %v", n, err)
		}
	}
	// Nothing is old before the cutoff.
	opts.Before = time.Now().Add(-time.Hour)
	if r, err := prune.Receipts(ctx, led, opts); err != nil || r.Files != 0 {
		t.Fatalf("young receipts removed: %+v, %v", r, err)
	}
}

// TestPruneHostsAtOnce: with no Parallel set, prune works on as many hosts
// at once as sync pulls at once (fanout.HostsAtOnce), not a fixed 8.
// Invariant: every host is pruned once and reported in manifest order,
// whatever the fan-out.
func TestPruneHostsAtOnce(t *testing.T) {
	const n = 12 // more than fanout.MinHosts, so the old fixed 8 shows
	e := testenv.NewEnv(t, "")
	m := testenv.DownFleet(t, e.WS, e.Dir, n)
	synctest.Test(t, func(t *testing.T) {
		dial := testenv.NewHeldDial()
		before := fanout.Available()
		type result struct {
			r   *prune.Report
			err error
		}
		done := make(chan result)
		go func() {
			r, err := prune.Run(context.Background(), prune.Options{Manifest: m, OlderThan: thirtyDays, Dial: dial.Dial})
			done <- result{r, err}
		}()
		synctest.Wait() // every host that can start is held in its dial
		got := dial.Dialing.Load()
		close(dial.Release)
		res := <-done
		after := fanout.Available()
		lo, hi := fanout.HostsAtOnce(n, min(before, after)), fanout.HostsAtOnce(n, max(before, after))
		if got < int64(lo) || got > int64(hi) {
			t.Errorf("%d hosts pruned at once, want fanout.HostsAtOnce(%d) = %d..%d", got, n, lo, hi)
		}
		if res.err != nil {
			t.Fatal(res.err)
		}
		for i, h := range res.r.Hosts {
			if h.Name != fmt.Sprintf("h%d", i) || !strings.Contains(h.Error, "down") {
				t.Errorf("host %d: %+v, want h%d, down", i, h, i)
			}
		}
		if len(res.r.Hosts) != n {
			t.Errorf("%d hosts reported, want %d", len(res.r.Hosts), n)
		}
	})
}
