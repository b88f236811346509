package prune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/prune"
	"github.com/handoff-sync/handoff/receipts"
)

// retainEnv is a ledger and a receipts directory whose runs are recorded
// with the finish times a test gives.
type retainEnv struct {
	t    *testing.T
	led  *ledger.Ledger
	dir  string
	t0   time.Time
	busy []byte // a receipt of a run that promoted a handoff
	idle []byte // a compact receipt of an idle tick of 8 hosts × 200 inboxes
}

func newRetainEnv(t *testing.T) *retainEnv {
	t.Helper()
	dir := t.TempDir()
	led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	e := &retainEnv{t: t, led: led, dir: filepath.Join(dir, "receipts"), t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	idle := &receipts.Receipt{SchemaVersion: 1, Mode: receipts.ModeApply, Outcome: receipts.OutcomeOK, Status: receipts.StatusEmpty,
		Handoffs: []receipts.Handoff{}, Notify: receipts.Notify{OK: true}}
	for h := range 8 {
		host := receipts.Host{Name: fmt.Sprintf("host-%d", h), Transport: "ssh", Outcome: receipts.HostOK}
		for i := range 200 {
			host.Inboxes = append(host.Inboxes, receipts.Inbox{Path: fmt.Sprintf("/home/a/code/p-%03d/.claude/memory-handoffs", i), State: receipts.InboxOK})
		}
		idle.Hosts = append(idle.Hosts, host)
	}
	busy := *receipts.Compact(idle)
	busy.Status, busy.Counts = receipts.StatusIngested, receipts.Counts{Pulled: 1, Promoted: 1}
	busy.Handoffs = []receipts.Handoff{{Host: "host-0", Name: "a.md", Result: receipts.ResultPromoted, Target: "memory/cards/a.md"}}
	if e.idle, err = receipts.Marshal(receipts.Compact(idle)); err != nil {
		t.Fatal(err)
	}
	if e.busy, err = receipts.Marshal(&busy); err != nil {
		t.Fatal(err)
	}
	return e
}

// run records a run that finished at, with its receipt.
type run struct {
	at      time.Time
	mode    string
	outcome string
	data    []byte
}

// add records runs in one transaction and writes their receipts; it
// returns their receipt names.
func (e *retainEnv) add(runs ...run) []string {
	e.t.Helper()
	tx, err := e.led.DB().Begin()
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		id := r.at.Format("20060102T150405Z") + "-000000"
		at := r.at.Format(time.RFC3339Nano)
		name := id + ".json"
		if _, err := tx.Exec(`INSERT INTO runs (run_id, started_at, finished_at, mode, Outcome, status, receipt) VALUES (?, ?, ?, ?, ?, '', ?)`,
			id, at, at, r.mode, r.outcome, filepath.Join(e.dir, name)); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, name), r.data, 0o600); err != nil {
			e.t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
	return names
}

func (e *retainEnv) left() []string {
	e.t.Helper()
	ents, err := os.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	return names
}

// TestRetain: with keep 90d and keep_idle 7d, an idle ok run's receipt
// goes after 7 days and a busy, failed, partial or review run's after 90;
// the newest of each mode and the newest that was not ok stay however
// old, and so do a receipt that cannot be read and one of a run the
// ledger does not know. Invariant: the record of the last run, of the
// last failure and of every run that did something within the window is
// never removed by the timer.
func TestRetain(t *testing.T) {
	e := newRetainEnv(t)
	day := 24 * time.Hour
	now := e.t0.Add(200 * day)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	old := e.add(
		run{at(150 * day), receipts.ModeApply, receipts.OutcomeFailed, e.busy},    // newest not ok: stays
		run{at(120 * day), receipts.ModeReview, receipts.OutcomeOK, e.busy},       // newest review: stays
		run{at(100 * day), receipts.ModeApply, receipts.OutcomeOK, e.busy},        // busy, past 90d: goes
		run{at(30 * day), receipts.ModeApply, receipts.OutcomeOK, e.busy},         // busy, within 90d: stays
		run{at(20 * day), receipts.ModeApply, receipts.OutcomeOK, e.idle},         // idle, past 7d: goes
		run{at(19 * day), receipts.ModeApply, receipts.OutcomeOK, []byte("{not")}, // unreadable: stays
		run{at(8 * day), receipts.ModeImport, receipts.OutcomeOK, e.idle},         // newest import: stays
		run{at(3 * day), receipts.ModeApply, receipts.OutcomeOK, e.idle},          // idle, within 7d: stays
		run{at(time.Hour), receipts.ModeApply, receipts.OutcomeOK, e.idle},        // newest apply: stays
	)
	if err := os.WriteFile(filepath.Join(e.dir, "20250101T000000Z-abcdef.json"), e.idle, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := prune.Retain(context.Background(), e.led, e.dir, prune.Policy{Keep: 90 * day, KeepIdle: 7 * day}, now)
	if err != nil {
		t.Fatal(err)
	}
	gone := []string{old[2], old[4]}
	if !slices.Equal(res.Names, gone) {
		t.Errorf("removed %v, want %v", res.Names, gone)
	}
	want := append(slices.Delete(slices.Clone(old), 4, 5), "20250101T000000Z-abcdef.json")
	want = slices.Delete(want, 2, 3)
	slices.Sort(want)
	if got := e.left(); !slices.Equal(got, want) {
		t.Errorf("left %v\nwant %v", got, want)
	}
	// Keep 0 keeps everything, whatever keep_idle says.
	res, err = prune.Retain(context.Background(), e.led, e.dir, prune.Policy{}, now.Add(1000*day))
	if err != nil || res.Files != 0 {
		t.Fatalf("Retain with keep 0: %+v, %v; want nothing removed", res, err)
	}
}

// TestRetainYearOfTimer simulates a year of the timer with the defaults:
// a sync every 30 minutes over 8 hosts of 200 inboxes (17,520 runs), one
// run a day that promotes a handoff, the rest idle, each writing the
// receipt it would (compact), and retention run as sync runs it. Here it
// runs once a simulated week: what a run removes depends only on the
// ages at that time, so the year's end is the same as with a pass after
// every run, and a week's 336 receipts (about 0.7 MB) bound the
// difference in between. The receipts directory ends under 2 MB, where
// the full listings with no retention came to 4.7 GB. Invariant: the timer alone keeps the
// receipts bounded, and every busy run of the last 90 days keeps its
// receipt.
func TestRetainYearOfTimer(t *testing.T) {
	e := newRetainEnv(t)
	policy := prune.Policy{Keep: 90 * 24 * time.Hour, KeepIdle: 7 * 24 * time.Hour}
	var busy []string
	var now time.Time
	var week []run
	for d := range 365 {
		for i := range 48 {
			now = e.t0.Add(time.Duration(d*48+i) * 30 * time.Minute)
			r := run{now, receipts.ModeApply, receipts.OutcomeOK, e.idle}
			if i == 20 {
				r.data = e.busy
			}
			week = append(week, r)
		}
		if d%7 == 6 || d == 364 {
			names := e.add(week...)
			for i := 20; i < len(names); i += 48 {
				busy = append(busy, names[i])
			}
			week = week[:0]
			if _, err := prune.Retain(context.Background(), e.led, e.dir, policy, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	var size int64
	idle, kept := 0, 0
	names := e.left()
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(e.dir, n))
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
		if slices.Contains(busy, n) {
			kept++
		} else {
			idle++
		}
	}
	t.Logf("a year of 17,520 runs: %d receipts left (%d busy, %d idle), %d bytes; idle receipt %d bytes, busy %d",
		len(names), kept, idle, size, len(e.idle), len(e.busy))
	if kept != 90 || idle > 7*48 || idle < 6*48 || size > 2<<20 {
		t.Fatalf("left %d busy (want the last 90 days': 90), %d idle (want 7 days': about 336), %d bytes (want under 2 MiB)", kept, idle, size)
	}
	if last := busy[len(busy)-1]; !strings.HasPrefix(names[len(names)-1], now.Format("20060102")) || !slices.Contains(names, last) {
		t.Fatalf("the newest receipts are gone: %v", names[len(names)-3:])
	}
}
