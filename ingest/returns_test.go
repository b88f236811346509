package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/ingest/ledger"
)

// TestReturns: a handoff rewritten back to an earlier version's bytes
// (v1, v2, then v1 again under the same name) is a revision of v2, not a
// duplicate of v1 (issue 48, item 2). Invariants: the writer's last word
// is what the card holds, nothing is applied twice (a return listed again
// before its archive is one source, and a document never gets a second
// append from it), and every step keeps a backup of what it replaced.
func TestReturns(t *testing.T) {
	v1, v2 := cardContent("palette", "use blue"), cardContent("palette", "use teal")
	for _, batch := range []int{256, 1} {
		t.Run(fmt.Sprintf("card/batch%d", batch), func(t *testing.T) {
			r := newRig(t)
			for _, v := range []string{v1, v2, v1, v2, v1} {
				r.store([2]string{"c.md", cardH("create-card", "palette.md", v)})
				r.store([2]string{"c.md", cardH("create-card", "palette.md", v)}) // listed again before its archive
				r.mustRun(batch)
				if got := r.readWS("memory/cards/palette.md"); got != v+"\n" {
					t.Fatalf("palette.md = %q; want the last version written, %q", got, v)
				}
			}
			want := "promoted promoted/revised promoted/revised promoted/revised promoted/revised"
			if got := r.versions("c.md"); strings.Join(got, " ") != want {
				t.Errorf("versions %q; want %s", got, want)
			}
			r.checkBackups()
			r.checkClean()
		})
	}
	t.Run("same-run", func(t *testing.T) {
		// All three pending at once (the runs between failed): the return
		// waits for the batch that decides v1 and v2.
		r := newRig(t)
		r.store([2]string{"c.md", cardH("create-card", "palette.md", v1)})
		r.store([2]string{"c.md", cardH("create-card", "palette.md", v2)})
		r.store([2]string{"c.md", cardH("create-card", "palette.md", v1)})
		r.mustRun(256)
		if got := r.readWS("memory/cards/palette.md"); got != v1+"\n" {
			t.Errorf("palette.md = %q; want v1, the last version", got)
		}
		if got := r.versions("c.md"); strings.Join(got, " ") != "promoted promoted/revised promoted/revised" {
			t.Errorf("versions %q", got)
		}
		r.checkBackups()
		r.checkClean()
	})
	t.Run("document", func(t *testing.T) {
		// A document append's return waits in review, as any revision of
		// an append does; the document holds one append.
		r := newRig(t)
		d1, d2 := docH("rules/deploy.md", "- landed as abc1234 on main"), docH("rules/deploy.md", "- landed as def5678 on main")
		for _, d := range []string{d1, d2, d1} {
			r.store([2]string{"d.md", d})
			r.mustRun(256)
		}
		if got := r.versions("d.md"); strings.Join(got, " ") != "routed review/revised review/revised" {
			t.Errorf("versions %q; want routed, then two revisions in review", got)
		}
		if doc := r.readWS("rules/deploy.md"); strings.Count(doc, "landed as") != 1 {
			t.Errorf("rules/deploy.md holds %q; want one append", doc)
		}
		items, err := r.led.ReviewItems(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 2 || items[1].Source.ID != 3 {
			t.Errorf("review items %+v; want v2 and the return (source 3)", items)
		}
		r.checkClean()
	})
}

// TestCrashApplyingReturn kills the ingester at each failpoint it passes
// while it applies a return, then runs it again. Invariants: no handoff
// lost and none applied twice (the card ends at the return's bytes, the
// content keeps one handoff row), and the return's backup keeps v2's card.
func TestCrashApplyingReturn(t *testing.T) {
	v1, v2 := cardContent("palette", "use blue"), cardContent("palette", "use teal")
	for _, point := range ingestPoints {
		t.Run(point, func(t *testing.T) {
			r := newRig(t)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", v1)})
			r.mustRun(256)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", v2)})
			r.mustRun(256)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", v1)})
			r.runChild(point, 256)
			r.mustRun(256)
			if got := r.readWS("memory/cards/palette.md"); got != v1+"\n" {
				t.Errorf("palette.md = %q; want v1 back", got)
			}
			var rows int
			r.led.DB().QueryRow(`SELECT count(*) FROM handoffs`).Scan(&rows)
			if rows != 2 {
				t.Errorf("%d handoff rows; want 2, one a content", rows)
			}
			if got := r.versions("c.md"); strings.Join(got, " ") != "promoted promoted/revised promoted/revised" {
				t.Errorf("versions %q", got)
			}
			r.checkBackups()
			r.checkClean()
		})
	}
}

// TestReturnDecided: a document append rewritten back and forth, each
// revision accepted by a person as it waits in review. Invariants: a
// return of a content a person decided before waits again and can be
// accepted (the earlier decision is past, not a block), the document
// holds one note, the one accepted last, and every accept keeps a backup.
func TestReturnDecided(t *testing.T) {
	r := newRig(t)
	d1, d2 := docH("rules/deploy.md", "- landed as abc1234 on main"), docH("rules/deploy.md", "- landed as def5678 on main")
	r.store([2]string{"d.md", d1})
	r.mustRun(256)
	ctx := context.Background()
	for i, d := range []string{d2, d1, d2} {
		r.store([2]string{"d.md", d})
		r.mustRun(256)
		var src ledger.SourceRow
		if err := r.led.DB().QueryRow(`SELECT id, sha256, size, host, inbox, name, archived_as FROM sources WHERE name = 'd.md' ORDER BY id DESC LIMIT 1`).
			Scan(&src.ID, &src.SHA256, &src.Size, &src.Host, &src.Inbox, &src.Name, &src.ArchivedAs); err != nil {
			t.Fatal(err)
		}
		items, err := r.led.ReviewItems(ctx, false)
		if err != nil || len(items) != 1 || items[0].Source.ID != src.ID {
			t.Fatalf("step %d: review items %+v (%v); want the newest version alone", i, items, err)
		}
		prev := d1
		if d == d1 {
			prev = d2
		}
		ev := &Earlier{SHA256: sum(prev), Result: ResultRouted, Target: "rules/deploy.md", Data: []byte(prev)}
		in := r.ingester(false)
		e, _, err := in.Decide(ctx, Decision{Source: src, Data: []byte(d), Override: Override{Workspace: true}, Record: r.decision(src, ledger.DecisionAccepted), Earlier: ev})
		if err != nil {
			t.Fatalf("step %d: accept: %v", i, err)
		}
		if e.Result != ResultRouted || e.Reason != ReasonRevised {
			t.Errorf("step %d: accepted as %s/%s; want routed/revised (replaced in place)", i, e.Result, e.Reason)
		}
		doc := r.readWS("rules/deploy.md")
		want := "def5678"
		if d == d1 {
			want = "abc1234"
		}
		if strings.Count(doc, "landed as") != 1 || !strings.Contains(doc, want) {
			t.Errorf("step %d: rules/deploy.md holds %q; want only the accepted version's note", i, doc)
		}
	}
	r.checkBackups()
	r.checkClean()
}
