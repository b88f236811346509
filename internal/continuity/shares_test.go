package continuity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/repoid"
)

// storeMany stores texts (name to text) as pulled from host's inbox in
// one transaction, each ingested with result.
func (w *world) storeMany(t testing.TB, host, inbox string, texts map[string]string, result, reason string) {
	t.Helper()
	ctx := context.Background()
	var srcs []claim.Source
	contents := map[string][]byte{}
	for name, text := range texts {
		sha := hsum(text)
		contents[sha] = []byte(text)
		srcs = append(srcs, claim.Source{Host: host, Inbox: inbox, Name: name, SHA256: sha, Size: int64(len(text)),
			ArchivedAs: "processed/" + claim.ArchiveName(name, sha), Parses: result != "malformed"})
	}
	// Junk needs no bytes: the build never reads them.
	if result != "malformed" {
		if err := w.sp.Put(contents); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.led.RecordSources(ctx, "run-1", srcs); err != nil {
		t.Fatal(err)
	}
	pending, err := w.led.PendingSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fs []ledger.Finished
	for _, row := range pending {
		fs = append(fs, ledger.Finished{Src: row, O: ledger.Outcome{Result: result, Reason: reason, Action: "no-card", Target: "TOOLS.md"}})
	}
	if err := w.led.FinishAll(ctx, "run-1", fs); err != nil {
		t.Fatal(err)
	}
}

func (w *world) build(t testing.TB, now time.Time) map[string]string {
	t.Helper()
	files, err := Build(context.Background(), Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: now}, w.m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for host, fs := range files {
		for _, f := range fs {
			out[host+":"+f.Path] = string(f.Data)
		}
	}
	return out
}

const (
	lapInbox = "/home/me/code/app/.claude/memory-handoffs"
	vpsInbox = "/srv/app/.codex/memory-handoffs"
)

func recordApp(t testing.TB, w *world, extra map[string]repoid.Identity) {
	t.Helper()
	vps := map[string]repoid.Identity{vpsInbox: {Path: "/srv/app", Origin: "github.com/acme/app"}}
	for k, v := range extra {
		vps[k] = v
	}
	reports := []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{lapInbox: {Path: "/home/me/code/app", Origin: "github.com/acme/app"}}),
		report("vps", "/root", vps),
	}
	if err := Record(context.Background(), w.led, w.sp, "run-1", reports, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestJunkNeverCounts: after laptop's handoff, vps's inbox of the same
// repository fills with 16,001 files that are no handoff. Invariant: one
// host never removes or hides another host's notes: rows that are no
// handoff never count against a bound, so laptop's notes stay in every
// host's RECENT.md.
func TestJunkNeverCounts(t *testing.T) {
	w := newWorld(t)
	w.store(t, "laptop", lapInbox, "2026-12-01-1000-a.md", handoffText("LAPTOP-NOTE", "Next steps", "- ship it"), "routed", "", "TOOLS.md")
	junk := map[string]string{}
	for i := range maxSources + 1 {
		junk[fmt.Sprintf("junk-%05d.md", i)] = fmt.Sprintf("x%d", i)
	}
	w.storeMany(t, "vps", vpsInbox, junk, "malformed", "parse-error")
	recordApp(t, w, nil)
	got := w.build(t, time.Now())
	for _, host := range []string{"laptop", "vps"} {
		if app := got[host+":repos/app/RECENT.md"]; !strings.Contains(app, "LAPTOP-NOTE") || !strings.Contains(app, "ship it") {
			t.Errorf("%s: 16,001 junk files hid laptop's note:\n%.600s", host, app)
		}
	}
}

// TestReposShare: laptop has one repository; vps brings 201 fresh ones,
// each with a handoff newer than laptop's. Invariant: one host never
// removes or hides another host's notes: the repositories kept are
// shared among the hosts, so laptop's repository stays in every host's
// repos/.
func TestReposShare(t *testing.T) {
	w := newWorld(t)
	w.store(t, "laptop", lapInbox, "a.md", handoffText("LAPTOP-REPO"), "routed", "", "TOOLS.md")
	extra := map[string]repoid.Identity{}
	for i := range 201 {
		inbox := fmt.Sprintf("/srv/r%03d/.codex/memory-handoffs", i)
		extra[inbox] = repoid.Identity{Path: fmt.Sprintf("/srv/r%03d", i), Origin: fmt.Sprintf("github.com/evil/r%03d", i)}
		w.store(t, "vps", inbox, "b.md", handoffText(fmt.Sprintf("fresh %d", i)), "routed", "", "TOOLS.md")
	}
	recordApp(t, w, extra)
	got := w.build(t, time.Now())
	for _, host := range []string{"laptop", "vps"} {
		if app := got[host+":repos/app/RECENT.md"]; !strings.Contains(app, "LAPTOP-REPO") {
			t.Errorf("%s: 201 repositories of vps pushed laptop's repository out", host)
		}
		if idx := got[host+":repos/INDEX.md"]; !strings.Contains(idx, "less recently active repositories are not shown") {
			t.Errorf("%s: INDEX.md does not say what it left out", host)
		}
	}
}

// TestRecentShare: in a repository both hosts work in, laptop leaves
// three handoffs, then vps twenty trivial ones. Invariant: one host never
// removes or hides another host's notes: each host has a share of the
// handoffs RECENT.md shows, so laptop's three stay.
func TestRecentShare(t *testing.T) {
	w := newWorld(t)
	for i := range 3 {
		w.store(t, "laptop", lapInbox, fmt.Sprintf("a%d.md", i), handoffText(fmt.Sprintf("LAPTOP-%d", i)), "routed", "", "TOOLS.md")
	}
	for i := range 20 {
		w.store(t, "vps", vpsInbox, fmt.Sprintf("b%02d.md", i), handoffText(fmt.Sprintf("trivial %d", i)), "routed", "", "TOOLS.md")
	}
	recordApp(t, w, nil)
	got := w.build(t, time.Now())
	app := got["laptop:repos/app/RECENT.md"]
	for i := range 3 {
		if !strings.Contains(app, fmt.Sprintf("LAPTOP-%d", i)) {
			t.Errorf("20 trivial handoffs of vps hid laptop's LAPTOP-%d:\n%.800s", i, app)
		}
	}
	if n := strings.Count(app, "> summary of trivial "); n != 17 {
		t.Errorf("%d of vps's handoffs shown; want the 17 the count leaves", n)
	}
}
