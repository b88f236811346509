package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/layout"
)

// rig is a workspace with a spool and a ledger, and sources stored in it,
// as a pull leaves them for the ingester.
type rig struct {
	t     *testing.T
	ws    string
	spool *spool.Dir
	led   *ledger.Ledger
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	sp, err := spool.Open(filepath.Join(ws, layout.SpoolDir))
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ws: ws, spool: sp, led: led}
	t.Cleanup(func() { r.led.Close(); r.spool.Close() })
	return r
}

// reopen closes and opens the spool and the ledger again, as the next run
// of a crashed process does.
func (r *rig) reopen() {
	r.t.Helper()
	r.led.Close()
	r.spool.Close()
	var err error
	if r.spool, err = spool.Open(filepath.Join(r.ws, layout.SpoolDir)); err != nil {
		r.t.Fatal(err)
	}
	if r.led, err = ledger.Open(filepath.Join(r.ws, layout.LedgerFile)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) writeWS(rel, content string) {
	r.t.Helper()
	p := filepath.Join(r.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) readWS(rel string) string {
	b, _ := os.ReadFile(filepath.Join(r.ws, rel))
	return string(b)
}

// store stores named handoffs, in order, as one pull would.
func (r *rig) store(named ...[2]string) {
	r.t.Helper()
	batch := map[string][]byte{}
	var srcs []claim.Source
	for _, nc := range named {
		sha := spool.Hash([]byte(nc[1]))
		batch[sha] = []byte(nc[1])
		srcs = append(srcs, claim.Source{Host: "h", Inbox: "/in", Name: nc[0], SHA256: sha, Size: int64(len(nc[1]))})
	}
	if err := r.spool.Put(batch); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.led.RecordSources(context.Background(), "pull", srcs); err != nil {
		r.t.Fatal(err)
	}
}

// run ingests with at most batch sources per batch.
func (r *rig) run(batch int, dry bool) ([]Entry, error) {
	r.t.Helper()
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run", DryRun: dry}, r.led, r.spool)
	if err != nil {
		r.t.Fatal(err)
	}
	defer in.Close()
	in.batchMax = batch
	return in.Run(context.Background())
}

// snapshot maps every regular file under the workspace, outside .handoff,
// to its content.
func (r *rig) snapshot() map[string]string {
	r.t.Helper()
	out := map[string]string{}
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.ws, p)
		if d.IsDir() && rel == layout.StateDir {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// checkClean asserts what every finished run leaves: no temporary file
// anywhere, no unfinished plan, every source with one result, the ledger
// intact.
func (r *rig) checkClean() {
	r.t.Helper()
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && durable.IsTemp(d.Name()) {
			r.t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	ctx := context.Background()
	if n, err := r.led.InterruptedPlans(ctx); err != nil || n != 0 {
		r.t.Errorf("%d plans left unfinished (%v)", n, err)
	}
	if err := r.led.IntegrityCheck(ctx); err != nil {
		r.t.Error(err)
	}
	var pending int
	r.led.DB().QueryRow(`SELECT count(*) FROM sources WHERE result = ''`).Scan(&pending)
	if pending != 0 {
		r.t.Errorf("%d sources without a result", pending)
	}
}

// checkBackups checks that every applied plan made on content the target
// held has a backup holding that content. A plan made on what an earlier
// plan on the same target leaves (a chain a batch writes once) may have
// none: that content need not ever have been on disk, and the chain's
// first plan backs up what was.
func (r *rig) checkBackups() {
	r.t.Helper()
	rows, err := r.led.DB().Query(`SELECT sha256, target, before_sha256, after_sha256, replans FROM plans WHERE state = 'done' ORDER BY id`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	written := map[string]bool{} // target + after-hash of an applied plan
	for rows.Next() {
		var sha, target, before, after string
		var replans int
		rows.Scan(&sha, &target, &before, &after, &replans)
		chained := written[target+before]
		written[target+after] = true
		if before == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.ws, layout.BackupsDir, BackupName(sha, replans, target)))
		if errors.Is(err, os.ErrNotExist) && chained {
			continue
		}
		if err != nil || sum(string(b)) != before {
			r.t.Errorf("backup of %s for plan %.12s: %v, content %.12s, want %.12s", target, sha, err, sum(string(b)), before)
		}
	}
}

// results maps source names to result/reason as the ledger has them.
func (r *rig) results() map[string]string {
	r.t.Helper()
	rows, err := r.led.DB().Query(`SELECT name, result, reason FROM sources`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, res, reason string
		rows.Scan(&n, &res, &reason)
		if reason != "" {
			res += "/" + reason
		}
		out[n] = res
	}
	return out
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func cardH(action, card, content string, extra ...section) string {
	secs := []section{{"Type", "setup"}, {"Title", "t " + card}, {"Summary", "s"},
		{"Recommended memory action", action}, {"Target card", card}, {"Suggested card content", content}}
	return string(build(append(secs, extra...)))
}

func docH(target, text string) string {
	return string(build([]section{{"Type", "workflow"}, {"Title", "t " + text}, {"Summary", "s"},
		{"Recommended memory action", "no-card"}, {"Target document", target}, {"Suggested document content", text}}))
}

func cardContent(topic, body string) string {
	return "---\ntopic: " + topic + "\ncategory: c\ntags: [x]\n---\n" + body
}

const existingCard = "---\ntopic: e\ncategory: c\ntags: [x]\n---\nold\n"

// chainFixture is a run's worth of handoffs with every outcome, and with
// several handoffs to one target: chains of appends to TOOLS.md and
// USER.md, a card created and then updated twice in the same run (the
// second update put back the first content: a chain that repeats a hash),
// duplicates of each other. want is every source's result.
func chainFixture(r *rig) (want map[string]string, markers map[string][]string) {
	r.writeWS("TOOLS.md", "# Tools\n")
	r.writeWS("memory/cards/existing.md", existingCard)
	a1 := cardContent("alpha", "A1")
	a2 := cardContent("alpha", "A2")
	e2 := cardContent("e", "new")
	r.store(
		[2]string{"c1.md", cardH("create-card", "alpha.md", a1)},
		[2]string{"t1.md", docH("TOOLS.md", "- marker-T1")},
		[2]string{"t2.md", docH("TOOLS.md", "- marker-T2")},
		[2]string{"dup-t1.md", docH("TOOLS.md", "- marker-T1")},
		[2]string{"c1-again.md", cardH("create-card", "alpha.md", cardContent("alpha", "other"))},
		[2]string{"u1.md", cardH("update-card", "alpha.md", a2, section{"Expected card SHA256", sum(a1 + "\n")})},
		[2]string{"r1.md", docH("rules/go.md", "- marker-R1")},
		[2]string{"m1.md", "not a handoff\n"},
		[2]string{"bad.md", docH("../outside.md", "- never")},
		[2]string{"t3.md", docH("TOOLS.md", "- marker-T3")},
		[2]string{"u1-stale.md", cardH("update-card", "alpha.md", cardContent("alpha", "A3"), section{"Expected card SHA256", sum(a1 + "\n")})},
		[2]string{"s1.md", docH("USER.md", "- marker-S1")},
		[2]string{"s2.md", docH("USER.md", "- marker-S2")},
		[2]string{"e1.md", cardH("update-card", "existing.md", e2, section{"Expected card SHA256", sum(existingCard)})},
		[2]string{"e2.md", cardH("update-card", "existing.md", strings.TrimSuffix(existingCard, "\n"), section{"Expected card SHA256", sum(e2 + "\n")})},
		[2]string{"l1.md", docH(".learnings/LEARNINGS.md", "- marker-L1")},
		[2]string{"dup-m1.md", "not a handoff\n"},
		[2]string{"nt.md", string(build([]section{{"Type", "workflow"}, {"Title", "t"}, {"Summary", "s"}, {"Recommended memory action", "no-card"}}))},
		[2]string{"t4.md", docH("TOOLS.md", "- marker-T4")},
		[2]string{"s3.md", docH("USER.md", "- marker-S3")},
	)
	want = map[string]string{
		"c1.md": "promoted", "t1.md": "routed", "t2.md": "routed", "dup-t1.md": "duplicate",
		"c1-again.md": "review/card-exists", "u1.md": "promoted", "r1.md": "routed", "m1.md": "malformed/parse-error",
		"bad.md": "review/unsafe-target", "t3.md": "routed", "u1-stale.md": "review/hash-conflict",
		"s1.md": "routed", "s2.md": "routed", "e1.md": "promoted", "e2.md": "promoted", "l1.md": "routed",
		"dup-m1.md": "duplicate", "nt.md": "review/no-target", "t4.md": "routed", "s3.md": "routed",
	}
	markers = map[string][]string{
		"TOOLS.md":                {"marker-T1", "marker-T2", "marker-T3", "marker-T4"},
		"USER.md":                 {"marker-S1", "marker-S2", "marker-S3"},
		"rules/go.md":             {"marker-R1"},
		".learnings/LEARNINGS.md": {"marker-L1"},
	}
	return want, markers
}

// checkMarkers asserts that every handoff's text is in its document
// exactly once, in the order the handoffs were stored.
func (r *rig) checkMarkers(markers map[string][]string) {
	r.t.Helper()
	for doc, ms := range markers {
		b := r.readWS(doc)
		last := -1
		for _, m := range ms {
			if c := strings.Count(b, m); c != 1 {
				r.t.Errorf("%s holds %s %d times, want exactly once:\n%s", doc, m, c, b)
			}
			if i := strings.Index(b, m); i < last {
				r.t.Errorf("%s: %s is out of order:\n%s", doc, m, b)
			} else {
				last = i
			}
		}
	}
}

// TestRunBatchSizes: batching changes no outcome. The same handoffs
// ingested one per batch, in small batches (chains split across batches,
// the next batch decided while the one before is applied) and in one
// batch give the same results, the same entries in storage order and the
// same workspace, byte for byte. Invariants: none applied twice, none
// lost, duplicates within a batch recognised as across batches.
func TestRunBatchSizes(t *testing.T) {
	var refSnap map[string]string
	var refEntries []Entry
	for _, size := range []int{1, 2, 3, 5, 256} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r := newRig(t)
			want, markers := chainFixture(r)
			entries, err := r.run(size, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.results(); !maps.Equal(got, want) {
				for n, w := range want {
					if got[n] != w {
						t.Errorf("%s: %q, want %q", n, got[n], w)
					}
				}
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name)
			}
			var stored []string
			rows, _ := r.led.DB().Query(`SELECT name FROM sources ORDER BY id`)
			for rows.Next() {
				var n string
				rows.Scan(&n)
				stored = append(stored, n)
			}
			rows.Close()
			if !slices.Equal(names, stored) {
				t.Errorf("entries in order %v, want storage order %v", names, stored)
			}
			r.checkMarkers(markers)
			r.checkClean()
			if got := r.readWS("memory/cards/existing.md"); got != existingCard {
				t.Errorf("existing.md = %q: the chain that puts its content back ended elsewhere", got)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(r.ws), "outside.md")); err == nil {
				t.Error("a file was written outside the workspace")
			}
			r.checkBackups()
			snap := r.snapshot()
			for i := range entries {
				entries[i].ArchivedAs = ""
			}
			if refSnap == nil {
				refSnap, refEntries = snap, entries
				return
			}
			if !maps.Equal(snap, refSnap) {
				t.Errorf("workspace differs from one handoff per batch:\n%v\nwant\n%v", snap, refSnap)
			}
			if !slices.Equal(entries, refEntries) {
				t.Errorf("entries differ from one handoff per batch:\n%+v\nwant\n%+v", entries, refEntries)
			}

			// A second run with the same contents again: all duplicates,
			// nothing changes.
			r.store([2]string{"again-t1.md", docH("TOOLS.md", "- marker-T1")}, [2]string{"again-c1.md", cardH("create-card", "alpha.md", cardContent("alpha", "A1"))})
			if _, err := r.run(size, false); err != nil {
				t.Fatal(err)
			}
			if got := r.results(); got["again-t1.md"] != "duplicate" || got["again-c1.md"] != "duplicate" {
				t.Errorf("second run: %q, %q; want duplicate", got["again-t1.md"], got["again-c1.md"])
			}
			if !maps.Equal(r.snapshot(), snap) {
				t.Error("a run of duplicates changed the workspace")
			}
		})
	}
}

// TestDryRunWritesNothing: a dry run decides every handoff (each planned
// on the document as it is on disk) and writes nothing at all to the
// workspace. Invariant: nothing written.
func TestDryRunWritesNothing(t *testing.T) {
	r := newRig(t)
	want, _ := chainFixture(r)
	before := map[string]string{}
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(r.ws, p)
			if !strings.HasPrefix(rel, layout.StateDir) {
				before[rel] = d.Type().String()
			}
		}
		return nil
	})
	snap := r.snapshot()
	entries, err := r.run(3, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	after := map[string]string{}
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(r.ws, p)
			if !strings.HasPrefix(rel, layout.StateDir) {
				after[rel] = d.Type().String()
			}
		}
		return nil
	})
	if !maps.Equal(before, after) || !maps.Equal(snap, r.snapshot()) {
		t.Errorf("a dry run changed the workspace:\nbefore %v\nafter  %v", before, after)
	}
	ents, _ := os.ReadDir(filepath.Join(r.ws, layout.BackupsDir))
	if len(ents) != 0 {
		t.Errorf("a dry run wrote %d backups", len(ents))
	}
	tools := sum("# Tools\n")
	for _, e := range entries {
		if e.Target == "TOOLS.md" && e.BeforeSHA256 != tools {
			t.Errorf("%s planned on %.12s, want TOOLS.md as it is on disk (%.12s)", e.Name, e.BeforeSHA256, tools)
		}
	}
}

// TestBatchBytesBound: a batch closes once its new files add up to the
// byte bound, so memory stays bounded whatever the documents' sizes.
func TestBatchBytesBound(t *testing.T) {
	r := newRig(t)
	chainFixture(r)
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run"}, r.led, r.spool)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	in.batchBytes = 1
	st := durable.NewWriter(in.ws.root, stageWorkers)
	defer st.Close()
	srcs, err := r.led.PendingSources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := in.decideBatch(context.Background(), st, srcs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.cleanup()
	// c1.md is the first source with a file to write.
	if len(b.items) != 1 || b.items[0].src.Name != "c1.md" {
		t.Fatalf("batch holds %d items, want only the first", len(b.items))
	}
}

// TestEditorBetweenPlanAndReplace: another writer appends to a document
// after a batch planned three appends to it and before it replaces it; the
// next batch, planned meanwhile on what this one was to write, holds more
// appends to it. Invariants: the other writer's line is kept; each
// handoff's text is in the document exactly once (the changed target's
// plans are applied one at a time, re-planned on the new content, and the
// next batch is planned again); nothing is left behind.
func TestEditorBetweenPlanAndReplace(t *testing.T) {
	r := newRig(t)
	r.writeWS("TOOLS.md", "# Tools\n")
	var named [][2]string
	var marks []string
	for i := range 7 {
		m := fmt.Sprintf("- marker-%d", i)
		marks = append(marks, m)
		named = append(named, [2]string{fmt.Sprintf("t%d.md", i), docH("TOOLS.md", m)})
	}
	named = append(named, [2]string{"c.md", cardH("create-card", "c.md", cardContent("c", "C"))})
	r.store(named...)
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run"}, r.led, r.spool)
	if err != nil {
		t.Fatal(err)
	}
	in.batchMax = 3
	edits := 0
	in.beforeReplace = func() {
		if edits == 0 {
			f, err := os.OpenFile(filepath.Join(r.ws, "TOOLS.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("- editor-line\n")
			f.Close()
		}
		edits++
	}
	entries, err := in.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	final := r.readWS("TOOLS.md")
	if !strings.Contains(final, "- editor-line\n") {
		t.Errorf("the other writer's line is lost:\n%s", final)
	}
	r.checkMarkers(map[string][]string{"TOOLS.md": marks})
	for _, e := range entries {
		if e.Result != ResultRouted && e.Result != ResultPromoted {
			t.Errorf("%s: %s/%s", e.Name, e.Result, e.Reason)
		}
	}
	if len(entries) != 8 {
		t.Errorf("%d entries, want 8", len(entries))
	}
	// The replaced files are removed when the ingester is closed.
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	r.checkClean()
}

// TestErrorWhileDecidingNextBatch: a spool file found corrupt while the
// next batch is decided (during the apply of the one before) ends the run
// with an error after that batch is done. Invariants: nothing of the
// failed batch is applied or left behind (its new files are removed, its
// sources stay pending), and once the spool file is sound again the next
// run applies everything exactly once.
func TestErrorWhileDecidingNextBatch(t *testing.T) {
	r := newRig(t)
	want, markers := chainFixture(r)
	srcs, err := r.led.PendingSources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(r.ws, layout.SpoolDir, srcs[12].SHA256+".md") // s2.md, in the fifth batch of three
	good, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := r.run(3, false)
	if err == nil {
		t.Fatal("run over a corrupt spool file succeeded")
	}
	if len(entries) != 12 {
		t.Errorf("%d entries before the error, want the 12 of the first four batches", len(entries))
	}
	filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && durable.IsTemp(d.Name()) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if n, _ := r.led.InterruptedPlans(context.Background()); n != 0 {
		t.Errorf("%d plans recorded for the batch that failed", n)
	}
	if u := r.readWS("USER.md"); !strings.Contains(u, "marker-S1") || strings.Contains(u, "marker-S2") {
		t.Errorf("USER.md = %q: want the fourth batch's append and not the failed batch's", u)
	}
	if r.readWS("memory/cards/existing.md") != existingCard {
		t.Error("the failed batch's card update was applied")
	}
	if err := os.WriteFile(bad, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(3, false); err != nil {
		t.Fatal(err)
	}
	if got := r.results(); !maps.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
	r.checkMarkers(markers)
	r.checkClean()
}

// TestReplacedFilesRemovedAtClose: a sync runs Run several times while it
// pulls. The target files its appends replace stay, under temporary names,
// until Close, so that no inode is freed while the pulls are still
// creating spool files; a later Run must not take them for a crashed
// run's leftovers either. Invariant: every append applied exactly once,
// and nothing temporary left once the ingester is closed.
func TestReplacedFilesRemovedAtClose(t *testing.T) {
	r := newRig(t)
	r.writeWS("TOOLS.md", "# Tools\n")
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run"}, r.led, r.spool)
	if err != nil {
		t.Fatal(err)
	}
	temps := func() int {
		n := 0
		filepath.WalkDir(r.ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && durable.IsTemp(d.Name()) {
				n++
			}
			return nil
		})
		return n
	}
	var marks []string
	for pass := range 2 {
		m := fmt.Sprintf("- pass-%d", pass)
		marks = append(marks, m)
		r.store([2]string{fmt.Sprintf("t%d.md", pass), docH("TOOLS.md", m)})
		entries, err := in.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Target != "TOOLS.md" || entries[0].AfterSHA256 == "" {
			t.Fatalf("pass %d: %+v", pass, entries)
		}
		if got := temps(); got != pass+1 {
			t.Errorf("after pass %d: %d replaced files kept, want %d", pass, got, pass+1)
		}
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	r.checkMarkers(map[string][]string{"TOOLS.md": marks})
	r.checkClean()
}

// olderReader is how the ingester's tests written for TOOLS.md see the
// workspace's OpenClaw: pinned to the layout before 2026.9, where a
// TOOLS.md note lands in TOOLS.md, and with no config of the machine's
// read. openclaw_test.go covers the 2026.9 layout.
var olderReader = OpenClawOptions{Layout: "pre-2026.9", Config: "/nonexistent/openclaw.json"}
