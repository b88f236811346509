package receipts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSummaryAndNoUpdates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     Receipt
		want  string
		noUpd bool
	}{
		{"empty apply", Receipt{Mode: ModeApply, Outcome: OutcomeOK},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\nNO_UPDATES\n", true},
		{"dry run", Receipt{Mode: ModeDryRun, Outcome: OutcomeOK, Counts: Counts{Pulled: 2, Promoted: 1, Duplicate: 1}},
			"[dry-run] Pulled 2  Promoted 1  Routed 0  Review 0  Malformed 0  Duplicate 1  Rejected 0  Deferred 0\n", false},
		{"only deferrals", Receipt{Mode: ModeDryRun, Outcome: OutcomeOK, Counts: Counts{Deferred: 3, Rejected: 1}},
			"[dry-run] Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 1  Deferred 3\n[dry-run] NO_UPDATES\n", true},
		// SPEC: NO_UPDATES only when the outcome is ok. A run whose
		// hosts all failed pulled nothing, and must not look idle.
		{"failed, nothing pulled", Receipt{Mode: ModeApply, Outcome: OutcomeFailed},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", true},
		{"partial, nothing pulled", Receipt{Mode: ModeApply, Outcome: OutcomePartial},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", true},
		// SPEC: NO_UPDATES only when nothing was published to a mirror
		// either. A run that sent mirror files (or would, in a dry run)
		// changed a host; one whose mirror was up to date did not.
		{"published a mirror", Receipt{Mode: ModeApply, Outcome: OutcomeOK, Hosts: []Host{
			{Name: "a", Mirror: &Mirror{Outcome: "ok", Sent: []string{}, Removed: []string{}}},
			{Name: "b", Mirror: &Mirror{Outcome: "ok", Sent: []string{"memory/cards/x.md", "SHA256SUMS", "MIRROR.json"}, Removed: []string{}}}}},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", false},
		{"removed from a mirror", Receipt{Mode: ModeApply, Outcome: OutcomeOK, Hosts: []Host{
			{Name: "a", Mirror: &Mirror{Outcome: "ok", Sent: []string{}, Removed: []string{"memory/cards/gone.md"}}}}},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", false},
		{"rewrote MIRROR.json only", Receipt{Mode: ModeApply, Outcome: OutcomeOK, Hosts: []Host{
			{Name: "a", Mirror: &Mirror{Outcome: "ok", Sent: []string{"MIRROR.json"}, Removed: []string{}}}}},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", false},
		{"dry run would publish", Receipt{Mode: ModeDryRun, Outcome: OutcomeOK, Hosts: []Host{
			{Name: "a", Mirror: &Mirror{Outcome: "ok", Sent: []string{"HANDOFF.md"}, Removed: []string{}}}}},
			"[dry-run] Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\n", false},
		{"mirror up to date", Receipt{Mode: ModeApply, Outcome: OutcomeOK, Hosts: []Host{
			{Name: "a", Mirror: &Mirror{Outcome: "ok", Sent: []string{}, Removed: []string{}}}, {Name: "b"}}},
			"Pulled 0  Promoted 0  Routed 0  Review 0  Malformed 0  Duplicate 0  Rejected 0  Deferred 0\nNO_UPDATES\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Summary(); got != tc.want {
				t.Errorf("Summary() = %q, want %q", got, tc.want)
			}
			if tc.r.NoUpdates() != tc.noUpd {
				t.Errorf("NoUpdates() = %v", !tc.noUpd)
			}
		})
	}
}

func TestTally(t *testing.T) {
	r := Receipt{Counts: Counts{Pulled: 4, Promoted: 99}}
	for _, res := range []string{"promoted", "routed", "routed", "review", "malformed", "duplicate", "rejected", "deferred", "deferred"} {
		r.Handoffs = append(r.Handoffs, Handoff{Result: res})
	}
	r.Tally()
	want := Counts{Pulled: 4, Promoted: 1, Routed: 2, Review: 1, Malformed: 1, Duplicate: 1, Rejected: 1, Deferred: 2}
	if r.Counts != want {
		t.Fatalf("Tally: %+v, want %+v", r.Counts, want)
	}
}

// TestWriteAndRead: the per-run file, latest.json and latest.log are
// written, and a receipt reads back strictly.
func TestWriteAndRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "receipts")
	r := &Receipt{SchemaVersion: 1, RunID: "20261129T203600Z-3f9a1c", Mode: ModeApply, Outcome: OutcomeOK, Status: StatusEmpty}
	p, err := Write(dir, r, []byte("log line\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, r.RunID+".json") {
		t.Errorf("path %s", p)
	}
	got, err := Read(filepath.Join(dir, "latest.json"))
	if err != nil || got.RunID != r.RunID {
		t.Fatalf("Read latest: %+v, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "latest.log")); string(b) != "log line\n" {
		t.Errorf("latest.log = %q", b)
	}
	run, _ := os.ReadFile(p)
	latest, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if len(run) == 0 || string(run) != string(latest) {
		t.Errorf("latest.json is not the run's receipt:\n%s\n%s", latest, run)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 3 {
		t.Errorf("receipts dir holds %d files (%v), want the run's receipt, latest.json and latest.log", len(ents), err)
	}
	if _, err := Decode([]byte(`{"schema_version": 2}`)); err == nil || !strings.Contains(err.Error(), "schema_version 2") {
		t.Errorf("Decode accepted schema 2: %v", err)
	}
}

// TestWriteFailureLeavesNoTemps: when a file cannot be put in place, Write
// says which and leaves no temporary file behind (nothing written outside
// the three names).
func TestWriteFailureLeavesNoTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "receipts")
	if err := os.MkdirAll(filepath.Join(dir, "latest.json", "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := &Receipt{SchemaVersion: 1, RunID: "20261129T203600Z-3f9a1c", Mode: ModeApply, Outcome: OutcomeOK, Status: StatusEmpty}
	_, err := Write(dir, r, []byte("log line\n"), false)
	if err == nil || !strings.Contains(err.Error(), "latest.json") {
		t.Fatalf("Write over a directory named latest.json: %v, want an error naming it", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".handoff-tmp.*")); len(left) != 0 {
		t.Errorf("Write left %v behind", left)
	}
}

// idleFleet is the receipt of an idle run over hosts hosts of inboxes
// inboxes each, every one listed, nothing pending: a fleet's timer tick.
func idleFleet(hosts, inboxes int) *Receipt {
	r := &Receipt{SchemaVersion: 1, RunID: "20261129T203600Z-3f9a1c", Mode: ModeApply, Outcome: OutcomeOK, Status: StatusEmpty,
		Workspace: "/home/agent/.openclaw/workspace", Handoffs: []Handoff{}, Notify: Notify{OK: true}}
	for h := range hosts {
		host := Host{Name: fmt.Sprintf("host-%02d", h), Transport: "ssh", Outcome: HostOK}
		for i := range inboxes {
			host.Inboxes = append(host.Inboxes, Inbox{Path: fmt.Sprintf("/home/agent/code/project-%03d/.claude/memory-handoffs", i), State: InboxOK})
		}
		r.Hosts = append(r.Hosts, host)
	}
	return r
}

// TestWriteCompactsQuietInboxes: the per-run receipt counts the inboxes
// with nothing to say and lists the others whole; latest.json lists every
// inbox (handoff instructions reads the discovered ones from it); with
// allInboxes the per-run file lists them all too. Invariant: no inbox
// that has something to say (pending, tracked, ignored names, an error,
// another state) is ever left out of a receipt.
func TestWriteCompactsQuietInboxes(t *testing.T) {
	r := idleFleet(2, 3)
	loud := []Inbox{
		{Path: "/p/pending", State: InboxOK, Pending: 1},
		{Path: "/p/tracked", State: InboxOK, Tracked: 2},
		{Path: "/p/ignored", State: InboxOK, Ignored: []string{`"\x00"`}, IgnoredCount: 1},
		{Path: "/p/missing", State: "missing"},
		{Path: "/p/error", State: InboxError, Error: "permission denied"},
		{Path: "/p/repo", State: InboxOK, Repo: &Repo{Path: "/p"}},
	}
	r.Hosts[1].Inboxes = append(r.Hosts[1].Inboxes, loud...)
	for _, all := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "receipts")
		p, err := Write(dir, r, nil, all)
		if err != nil {
			t.Fatal(err)
		}
		own, err := Read(p)
		if err != nil {
			t.Fatal(err)
		}
		latest, err := Read(filepath.Join(dir, "latest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(latest.Hosts[0].Inboxes) + len(latest.Hosts[1].Inboxes); n != 12 || latest.Hosts[1].QuietInboxes != 0 {
			t.Errorf("latest.json lists %d inboxes (quiet %d), want all 12", n, latest.Hosts[1].QuietInboxes)
		}
		if all {
			if n := len(own.Hosts[0].Inboxes) + len(own.Hosts[1].Inboxes); n != 12 {
				t.Errorf("allInboxes: the run's receipt lists %d inboxes, want 12", n)
			}
			continue
		}
		if h := own.Hosts[0]; len(h.Inboxes) != 0 || h.QuietInboxes != 3 {
			t.Errorf("host 0: %d listed, %d quiet, want 0 and 3", len(h.Inboxes), h.QuietInboxes)
		}
		if h := own.Hosts[1]; !reflect.DeepEqual(h.Inboxes, loud) || h.QuietInboxes != 3 {
			t.Errorf("host 1: listed %+v, %d quiet; want every inbox with something to say and 3", h.Inboxes, h.QuietInboxes)
		}
	}
	if len(r.Hosts[1].Inboxes) != 9 || r.Hosts[1].QuietInboxes != 0 {
		t.Error("Write changed the receipt it was given")
	}
}

// TestCompactIdleFleetSize: an idle tick of 8 hosts with 200 inboxes
// each, which the full listing writes as about a quarter of a megabyte,
// is under 4 KB compact: a year of ticks every 30 minutes (17,520) is
// then at most 70 MB even if retention kept them all.
func TestCompactIdleFleetSize(t *testing.T) {
	r := idleFleet(8, 200)
	full, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	small, err := Marshal(Compact(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle tick, 8 hosts × 200 inboxes: full %d bytes, compact %d bytes; a year of ticks: %.1f GB full, %.1f MB compact",
		len(full), len(small), float64(len(full))*17520/1e9, float64(len(small))*17520/1e6)
	if len(full) < 200_000 || len(small) > 4_000 {
		t.Fatalf("full %d bytes, compact %d: want a full listing over 200 KB and a compact one under 4 KB", len(full), len(small))
	}
}
