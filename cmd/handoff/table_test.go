package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
)

func TestDeferredWhy(t *testing.T) {
	m, err := manifest.Parse([]byte(`version: 1
workspace: /ws
defaults: {settle: 10s}
hosts:
  - {name: a, transport: local, inboxes: [/a/.claude/memory-handoffs]}
  - {name: b, transport: local, settle: 5m, inboxes: [/b/.claude/memory-handoffs]}
`), "/writers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &receipts.Receipt{Handoffs: []receipts.Handoff{
		{Host: "a", Result: "deferred", Reason: "too-young"},
		{Host: "a", Result: "deferred", Reason: "changing"},
		{Host: "b", Result: "deferred", Reason: "too-young"},
		{Host: "a", Result: "deferred", Reason: "too-young"},
		{Host: "a", Result: "promoted"},
		{Host: "b", Result: "deferred", Reason: "changing"},
	}}
	want := "2 too young for settle 10s, 2 changed while read, 1 too young for settle 5m"
	if got := deferredWhy(m, r); got != want {
		t.Fatalf("deferredWhy = %q, want %q", got, want)
	}
	if got := deferredWhy(m, &receipts.Receipt{}); got != "" {
		t.Fatalf("nothing deferred: %q", got)
	}
}

// TestRunTableBounded: a run over a big backlog prints maxTableRows rows
// and says how many more the receipt holds.
func TestRunTableBounded(t *testing.T) {
	m, err := manifest.Parse([]byte("version: 1\nworkspace: /ws\nhosts:\n  - {name: a, transport: local, inboxes: [/a/.claude/memory-handoffs]}\n"), "/writers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &receipts.Receipt{RunID: "20261201T000000Z-abcdef", Mode: receipts.ModeApply}
	for i := range maxTableRows + 7 {
		r.Handoffs = append(r.Handoffs, receipts.Handoff{Host: "a", Name: fmt.Sprintf("h%03d.md", i), Result: "malformed", Reason: "parse-error"})
	}
	var b bytes.Buffer
	printRunTable(&b, m, "/ws", r)
	out := b.String()
	if n := strings.Count(out, " malformed "); n != maxTableRows {
		t.Errorf("%d rows, want %d:\n%s", n, maxTableRows, out)
	}
	if !strings.Contains(out, "\n… and 7 more, see the receipt\nReceipt: /ws/.handoff/receipts/20261201T000000Z-abcdef.json\n") {
		t.Errorf("no pointer to the receipt for the rest:\n%s", out)
	}
}

// A mirrored host's line says what its mirror did, or why it did not:
// the first line of its error only, with what a terminal would act on
// escaped.
func TestMirrorLine(t *testing.T) {
	for _, tc := range []struct {
		m      receipts.Mirror
		dryRun bool
		want   string
	}{
		{receipts.Mirror{Outcome: "ok", Sent: []string{"memory/cards/x.md", "SHA256SUMS", "MIRROR.json"}, Removed: []string{"memory/cards/y.md"}, Bytes: 2150, Generation: 4}, false,
			"sent 3 file(s) (2.1 KiB), removed 1; generation 4"},
		{receipts.Mirror{Outcome: "ok", Sent: []string{"HANDOFF.md"}, Bytes: 900, Generation: 5}, true,
			"would send 1 file(s) (900 B), remove 0; generation 5"},
		{receipts.Mirror{Outcome: "ok", Generation: 4}, false, "up to date; generation 4"},
		{receipts.Mirror{Outcome: "skipped", Error: "the pull failed: ssh: refused"}, false, "skipped: the pull failed: ssh: refused"},
		{receipts.Mirror{Outcome: "error", Error: "mirror ~/m: \x1b[31mbad\nhint: more"}, false, `error: mirror ~/m: \x1b[31mbad`},
	} {
		if got := mirrorLine(&tc.m, tc.dryRun); got != tc.want {
			t.Errorf("mirrorLine(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}
