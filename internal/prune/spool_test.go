package prune

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/receipts"
)

// spoolFixture is a ledger holding one content per case: in its store, or
// (legacy) in a spool directory as earlier versions wrote them.
type spoolFixture struct {
	t      *testing.T
	led    *ledger.Ledger
	legacy bool
	dir    string // the legacy spool
	shas   map[string]string
	rows   int
	bytes  map[string]int64
}

func newSpoolFixture(t *testing.T, legacy bool) *spoolFixture {
	t.Helper()
	dir := t.TempDir()
	led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	return &spoolFixture{t: t, led: led, legacy: legacy, dir: filepath.Join(dir, "spool"), shas: map[string]string{}, bytes: map[string]int64{}}
}

// source stores content under key (once) and records one source of it with
// the given host, result and ingestion time ("" result: pending).
func (f *spoolFixture) source(key, host, name, result string, ingested time.Time) {
	f.t.Helper()
	data := []byte("# Memory Handoff\n\n## Title\n" + key + "\n")
	sha := spool.Hash(data)
	f.shas[key] = sha
	f.bytes[key] = int64(len(data))
	contents := map[string][]byte{sha: data}
	if f.legacy {
		sp, err := spool.Open(f.dir)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := sp.Put(contents); err != nil {
			f.t.Fatal(err)
		}
		sp.Close()
		contents = nil
	}
	ctx := context.Background()
	src := claim.Source{Host: host, Inbox: "/in", Name: name, SHA256: sha, Size: int64(len(data)), ArchivedAs: "processed/" + name, Parses: true}
	if _, err := f.led.StoreSources(ctx, "run-1", []claim.Source{src}, contents); err != nil {
		f.t.Fatal(err)
	}
	f.rows++
	if result == "" {
		return
	}
	if _, err := f.led.DB().ExecContext(ctx, `UPDATE sources SET result = ?, ingest_run = 'run-1', ingested_at = ? WHERE host = ? AND name = ? AND sha256 = ?`,
		result, ingested.UTC().Format(time.RFC3339Nano), host, name, sha); err != nil {
		f.t.Fatal(err)
	}
	// The first copy with a result of its own is the handoff's, as the
	// ingester records it.
	if result == receipts.ResultDuplicate {
		return
	}
	if _, err := f.led.DB().ExecContext(ctx, `INSERT OR IGNORE INTO handoffs (sha256, source_id, result, run_id, ingested_at)
		SELECT sha256, id, result, ingest_run, ingested_at FROM sources WHERE host = ? AND name = ? AND sha256 = ?`, host, name, sha); err != nil {
		f.t.Fatal(err)
	}
}

// decide records a person's decision about key's handoff, made at at;
// result, when not "", is what the handoff became.
func (f *spoolFixture) decide(key, decision, state string, at time.Time, result string) {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.led.DB().ExecContext(ctx, `INSERT INTO decisions (sha256, decision, state, by, at, run_id, from_result)
		VALUES (?, ?, ?, 'me@host', ?, 'run-review', 'review')`, f.shas[key], decision, state, at.UTC().Format(time.RFC3339Nano)); err != nil {
		f.t.Fatal(err)
	}
	if result == "" {
		return
	}
	if _, err := f.led.DB().ExecContext(ctx, `UPDATE handoffs SET result = ? WHERE sha256 = ?`, result, f.shas[key]); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.led.DB().ExecContext(ctx, `UPDATE sources SET result = ? WHERE sha256 = ?`, result, f.shas[key]); err != nil {
		f.t.Fatal(err)
	}
}

// exists reports whether key's bytes are still stored where the fixture
// put them.
func (f *spoolFixture) exists(key string) bool {
	if f.legacy {
		_, err := os.Lstat(filepath.Join(f.dir, spool.Name(f.shas[key])))
		return err == nil
	}
	ok, err := f.led.Store(nil).Has(f.shas[key])
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

// bothStores runs a test over contents in the ledger's store and in a
// legacy spool directory.
func bothStores(t *testing.T, test func(t *testing.T, f *spoolFixture)) {
	for _, legacy := range []bool{false, true} {
		name := "ledger"
		if legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) { test(t, newSpoolFixture(t, legacy)) })
	}
}

func (f *spoolFixture) sourceRows() int {
	var n int
	if err := f.led.DB().QueryRow(`SELECT count(*) FROM sources`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestPruneSpool: the bytes of handoffs done with go, from the ledger's
// store and from a legacy spool, and nothing else: not a pending, young,
// malformed, half-done or planned one's, and in a legacy spool not a
// symlink's target or a file the ledger does not know. A dry run counts
// the same and removes nothing.
func TestPruneSpool(t *testing.T) { bothStores(t, testPruneSpool) }

func testPruneSpool(t *testing.T, f *spoolFixture) {
	now := time.Now()
	old, young := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	cutoff := now.Add(-30 * 24 * time.Hour)
	f.source("promoted-old", "laptop", "a.md", receipts.ResultPromoted, old)
	f.source("routed-old", "laptop", "b.md", receipts.ResultRouted, old.Add(time.Second))
	f.source("review-old", "laptop", "c.md", receipts.ResultReview, old)
	f.source("promoted-young", "laptop", "d.md", receipts.ResultPromoted, young)
	f.source("pending", "laptop", "e.md", "", time.Time{})
	f.source("malformed-old", "laptop", "f.md", receipts.ResultMalformed, old)
	// The same content twice: one copy applied long ago, one still pending.
	f.source("half", "laptop", "g.md", receipts.ResultPromoted, old)
	f.source("half", "vps", "g.md", "", time.Time{})
	// The same content twice, both finished, the duplicate recently.
	f.source("dup", "laptop", "h.md", receipts.ResultPromoted, old)
	f.source("dup", "vps", "h.md", receipts.ResultDuplicate, young)
	// Finished long ago but a plan for it is still open (a crashed run).
	f.source("open-plan", "laptop", "i.md", receipts.ResultPromoted, old)
	if _, err := f.led.DB().Exec(`INSERT INTO plans (sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at)
		SELECT sha_id, sha256, id, 'card', 'create-card', 'memory/cards/x.md', '', '', x'', 'planned', 'run-1', '' FROM sources WHERE name = 'i.md'`); err != nil {
		t.Fatal(err)
	}
	gone := []string{"promoted-old", "routed-old"}
	kept := []string{"review-old", "promoted-young", "pending", "malformed-old", "half", "dup", "open-plan"}
	target := filepath.Join(t.TempDir(), "target.md")
	orphan := filepath.Join(f.dir, spool.Name(spool.Hash([]byte("orphan"))))
	if f.legacy {
		// Finished long ago, but its spool file is a symlink: left alone.
		f.source("symlink", "laptop", "j.md", receipts.ResultRouted, old)
		sp := filepath.Join(f.dir, spool.Name(f.shas["symlink"]))
		os.Remove(sp)
		if err := os.WriteFile(target, []byte("not the spool's"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, sp); err != nil {
			t.Fatal(err)
		}
		// A spool file the ledger does not know.
		if err := os.WriteFile(orphan, []byte("orphan"), 0o600); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, "symlink")
	}
	var wantBytes int64
	for _, k := range gone {
		wantBytes += f.bytes[k]
	}

	ctx := context.Background()
	opts := SpoolOptions{Dir: f.dir, Before: cutoff, DryRun: true}
	got, err := Spool(ctx, f.led, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != len(gone) || got.Bytes != wantBytes {
		t.Fatalf("dry run: %+v, want %d files, %d bytes", got, len(gone), wantBytes)
	}
	for k := range f.shas {
		if !f.exists(k) {
			t.Fatalf("dry run removed %s", k)
		}
	}

	opts.DryRun = false
	got, err = Spool(ctx, f.led, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != len(gone) || got.Bytes != wantBytes {
		t.Fatalf("prune: %+v, want %d files, %d bytes", got, len(gone), wantBytes)
	}
	for _, k := range gone {
		if f.exists(k) {
			t.Errorf("%s: spool file kept, want removed", k)
		}
	}
	for _, k := range kept {
		if !f.exists(k) {
			t.Errorf("%s: spool file removed, want kept", k)
		}
	}
	if f.legacy {
		if _, err := os.Stat(orphan); err != nil {
			t.Errorf("a spool file the ledger does not know was removed: %v", err)
		}
		if _, err := os.Stat(target); err != nil {
			t.Errorf("a symlink's target was touched: %v", err)
		}
	}
	if n := f.sourceRows(); n != f.rows {
		t.Errorf("ledger has %d source rows after prune, want all %d", n, f.rows)
	}

	// Again: nothing left to do.
	got, err = Spool(ctx, f.led, opts)
	if err != nil || got.Files != 0 {
		t.Fatalf("second prune: %+v, %v; want nothing", got, err)
	}
}

// TestPruneSpoolKeepsWhatWaitsForAPerson: the exact bytes of a handoff
// that still waits for a person, or was rejected less than the retention
// ago, are never pruned, however long ago it was ingested.
func TestPruneSpoolKeepsWhatWaitsForAPerson(t *testing.T) {
	bothStores(t, testPruneSpoolKeepsWhatWaitsForAPerson)
}

func testPruneSpoolKeepsWhatWaitsForAPerson(t *testing.T, f *spoolFixture) {
	now := time.Now()
	cutoff := now.Add(-24 * time.Hour)
	old, young := now.Add(-40*24*time.Hour), now.Add(-time.Hour)
	f.source("waits", "laptop", "a.md", receipts.ResultReview, old)
	f.source("waits-again", "laptop", "b.md", receipts.ResultReview, old)
	f.decide("waits-again", "accepted", "abandoned", young, "")
	f.source("accepting", "laptop", "c.md", receipts.ResultReview, old)
	f.decide("accepting", "accepted", "started", young, "")
	f.source("rejected-young", "laptop", "d.md", receipts.ResultReview, old)
	f.decide("rejected-young", "rejected", "done", young, "")
	f.source("rejected-old", "laptop", "e.md", receipts.ResultReview, old)
	f.decide("rejected-old", "rejected", "done", old.Add(time.Hour), "")
	f.source("accepted", "laptop", "f.md", receipts.ResultReview, old)
	f.decide("accepted", "accepted", "done", young, receipts.ResultPromoted)
	f.source("promoted", "laptop", "g.md", receipts.ResultPromoted, old)

	got, err := Spool(context.Background(), f.led, SpoolOptions{Dir: f.dir, Before: cutoff})
	if err != nil {
		t.Fatal(err)
	}
	kept := []string{"waits", "waits-again", "accepting", "rejected-young"}
	gone := []string{"rejected-old", "accepted", "promoted"}
	if got.Files != len(gone) || got.Held != len(kept) {
		t.Fatalf("%+v, want %d files removed and %d held", got, len(gone), len(kept))
	}
	for _, k := range kept {
		if !f.exists(k) {
			t.Errorf("%s: the bytes a person may still act on were pruned", k)
		}
	}
	for _, k := range gone {
		if f.exists(k) {
			t.Errorf("%s: spool file kept, want removed", k)
		}
	}
}

// TestPruneSpoolHosts: with hosts selected, only content whose every source
// came from them goes.
func TestPruneSpoolHosts(t *testing.T) { bothStores(t, testPruneSpoolHosts) }

func testPruneSpoolHosts(t *testing.T, f *spoolFixture) {
	old := time.Now().Add(-48 * time.Hour)
	f.source("laptop-only", "laptop", "a.md", receipts.ResultPromoted, old)
	f.source("vps-only", "vps", "b.md", receipts.ResultPromoted, old)
	f.source("both", "laptop", "c.md", receipts.ResultPromoted, old)
	f.source("both", "vps", "c.md", receipts.ResultDuplicate, old)
	got, err := Spool(context.Background(), f.led, SpoolOptions{Dir: f.dir, Before: time.Now().Add(-time.Hour), Hosts: []string{"laptop"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != 1 {
		t.Fatalf("removed %d files, want 1", got.Files)
	}
	var left []string
	for k := range f.shas {
		if f.exists(k) {
			left = append(left, k)
		}
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"both", "vps-only"}) {
		t.Fatalf("left %v, want [both vps-only]", left)
	}
}

// TestPruneSpoolNoSpool: a workspace whose spool is missing prunes nothing
// and creates nothing.
func TestPruneSpoolNoSpool(t *testing.T) {
	f := newSpoolFixture(t, true)
	f.source("x", "laptop", "a.md", receipts.ResultPromoted, time.Now().Add(-48*time.Hour))
	os.RemoveAll(f.dir)
	got, err := Spool(context.Background(), f.led, SpoolOptions{Dir: f.dir, Before: time.Now()})
	if err != nil || got.Files != 0 {
		t.Fatalf("%+v, %v", got, err)
	}
	if _, err := os.Stat(f.dir); !os.IsNotExist(err) {
		t.Fatalf("spool directory created: %v", err)
	}
}

// TestPruneSpoolRemovesLegacyTemps: the temporary files an earlier
// version's crashed writer left in the legacy spool go with a prune, not
// with a dry run, and the stored handoffs beside them stay (nothing
// stored is lost). Runs no longer look there (nothing writes there).
func TestPruneSpoolRemovesLegacyTemps(t *testing.T) {
	f := newSpoolFixture(t, true)
	f.source("young", "laptop", "a.md", receipts.ResultPromoted, time.Now())
	tmp := filepath.Join(f.dir, durable.TempPrefix+"crashed.md")
	if err := os.WriteFile(tmp, []byte("half a hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Hour)
	got, err := Spool(context.Background(), f.led, SpoolOptions{Dir: f.dir, Before: before, DryRun: true})
	if err != nil || got.Temps != 0 {
		t.Fatalf("dry run: %+v, %v", got, err)
	}
	if _, err := os.Lstat(tmp); err != nil {
		t.Fatalf("a dry run removed a temporary file: %v", err)
	}
	got, err = Spool(context.Background(), f.led, SpoolOptions{Dir: f.dir, Before: before})
	if err != nil || got.Temps != 1 || got.Files != 0 {
		t.Fatalf("prune: %+v, %v; want one temporary file and no handoff", got, err)
	}
	if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is still there: %v", err)
	}
	if !f.exists("young") {
		t.Fatal("a young handoff's bytes went with the temporary files")
	}
}
