package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
)

// versions lists each source of name as "result/reason", in the order
// they were stored.
func (r *rig) versions(name string) []string {
	r.t.Helper()
	rows, err := r.led.DB().Query(`SELECT result, reason FROM sources WHERE name = ? ORDER BY id`, name)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var res, reason string
		rows.Scan(&res, &reason)
		if reason != "" {
			res += "/" + reason
		}
		out = append(out, res)
	}
	return out
}

func (r *rig) mustRun(batch int) {
	r.t.Helper()
	if _, err := r.run(batch, false); err != nil {
		r.t.Fatal(err)
	}
}

// TestRevisions: a handoff rewritten in place (same host, inbox and file
// name, other bytes), as agents do, pulled after its first version was
// applied or in the same run. Invariant: no document receives a second
// append from a revision, and a card is replaced by its revision only
// where it still holds what the first version wrote (hash-guarded, with a
// backup); each case's result and reason as docs/design.md "Revisions"
// says.
func TestRevisions(t *testing.T) {
	landed := docH("rules/deploy.md", "- landed as abc1234 on main")
	relanded := docH("rules/deploy.md", "- landed as def5678 on main")
	a1, a2 := cardContent("palette", "use blue"), cardContent("palette", "use teal")
	for _, batch := range []int{256, 1} {
		t.Run(fmt.Sprintf("document/later-run/batch%d", batch), func(t *testing.T) {
			r := newRig(t)
			r.store([2]string{"2026-12-03-0902-deploy.md", landed})
			r.mustRun(batch)
			r.store([2]string{"2026-12-03-0902-deploy.md", relanded})
			r.mustRun(batch)
			if got := r.versions("2026-12-03-0902-deploy.md"); strings.Join(got, " ") != "routed review/revised" {
				t.Errorf("versions %q; want routed, then review/revised", got)
			}
			doc := r.readWS("rules/deploy.md")
			if strings.Count(doc, "landed as") != 1 || !strings.Contains(doc, "abc1234") {
				t.Errorf("rules/deploy.md holds %q; want the first version's append once", doc)
			}
			r.checkClean()
		})
		t.Run(fmt.Sprintf("document/same-run/batch%d", batch), func(t *testing.T) {
			r := newRig(t)
			r.store([2]string{"d.md", landed})
			r.store([2]string{"d.md", relanded})
			r.mustRun(batch)
			if got := r.versions("d.md"); strings.Join(got, " ") != "routed review/revised" {
				t.Errorf("versions %q; want routed, then review/revised", got)
			}
			if doc := r.readWS("rules/deploy.md"); strings.Count(doc, "landed as") != 1 {
				t.Errorf("rules/deploy.md holds %q; want one append", doc)
			}
			r.checkClean()
		})
		t.Run(fmt.Sprintf("card/unchanged-since/batch%d", batch), func(t *testing.T) {
			r := newRig(t)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", a1)})
			r.mustRun(batch)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", a2)})
			r.mustRun(batch)
			if got := r.versions("c.md"); strings.Join(got, " ") != "promoted promoted/revised" {
				t.Errorf("versions %q; want promoted, then promoted/revised", got)
			}
			if got := r.readWS("memory/cards/palette.md"); got != a2+"\n" {
				t.Errorf("palette.md = %q; want the revision", got)
			}
			r.checkBackups()
			r.checkClean()
		})
		t.Run(fmt.Sprintf("card/changed-since/batch%d", batch), func(t *testing.T) {
			r := newRig(t)
			r.store([2]string{"c.md", cardH("create-card", "palette.md", a1)})
			r.mustRun(batch)
			u := cardContent("palette", "use red")
			r.store([2]string{"u.md", cardH("update-card", "palette.md", u, section{"Expected card SHA256", sum(a1 + "\n")})})
			r.store([2]string{"c.md", cardH("create-card", "palette.md", a2)})
			r.mustRun(batch)
			if got := r.versions("c.md"); strings.Join(got, " ") != "promoted review/revised" {
				t.Errorf("versions %q; want promoted, then review/revised", got)
			}
			if got := r.readWS("memory/cards/palette.md"); got != u+"\n" {
				t.Errorf("palette.md = %q; want the other handoff's update kept", got)
			}
			r.checkClean()
		})
	}
	t.Run("while-the-first-waits", func(t *testing.T) {
		r := newRig(t)
		secret := docH("TOOLS.md", "- token AKIA"+"IOSFODNN7EXAMPLE")
		r.store([2]string{"s.md", secret})
		r.mustRun(256)
		r.store([2]string{"s.md", docH("TOOLS.md", "- token in the vault")})
		r.mustRun(256)
		if got := r.versions("s.md"); strings.Join(got, " ") != "review/secret-like-content review/revised" {
			t.Errorf("versions %q; want both in review", got)
		}
		if doc := r.readWS("TOOLS.md"); doc != "" {
			t.Errorf("TOOLS.md = %q; want nothing applied while both wait", doc)
		}
		r.checkClean()
	})
	t.Run("malformed-first", func(t *testing.T) {
		r := newRig(t)
		r.store([2]string{"m.md", "not a handoff yet\n"})
		r.mustRun(256)
		r.store([2]string{"m.md", landed})
		r.mustRun(256)
		if got := r.versions("m.md"); strings.Join(got, " ") != "malformed/parse-error routed" {
			t.Errorf("versions %q; want a fixed handoff applied as new", got)
		}
	})
	t.Run("same-bytes-again", func(t *testing.T) {
		r := newRig(t)
		r.store([2]string{"d.md", landed})
		r.mustRun(256)
		r.store([2]string{"d.md", landed})
		r.mustRun(256)
		if got := r.versions("d.md"); strings.Join(got, " ") != "routed" {
			t.Errorf("versions %q; want the same bytes from the same name to be no new version", got)
		}
	})
}

// TestCrashOnRevisions kills the ingester at every failpoint while it
// decides and applies revisions (a document append and a card, both
// rewritten after the first versions were applied), then runs it again.
// Invariants: none applied twice (the document holds the first append
// once, never the revision's), none lost (every source has its result),
// the card ends as the revision with a backup of the first version.
func TestCrashOnRevisions(t *testing.T) {
	if testing.Short() {
		t.Skip("many child processes")
	}
	a1, a2 := cardContent("palette", "use blue"), cardContent("palette", "use teal")
	for _, fp := range ingestPoints {
		for n := 1; ; n++ {
			spec := fmt.Sprintf("%s@%d", fp, n)
			reached := false
			t.Run(spec, func(t *testing.T) {
				r := newRig(t)
				r.store([2]string{"d.md", docH("rules/deploy.md", "- marker-first")}, [2]string{"c.md", cardH("create-card", "palette.md", a1)})
				r.mustRun(256)
				r.store([2]string{"d.md", docH("rules/deploy.md", "- marker-second")}, [2]string{"c.md", cardH("create-card", "palette.md", a2)})
				if reached = r.runChild(spec, 256); !reached {
					if n == 1 {
						t.Fatalf("failpoint %s never reached", fp)
					}
					return
				}
				r.mustRun(256)
				if got := r.versions("d.md"); strings.Join(got, " ") != "routed review/revised" {
					t.Errorf("d.md versions %q", got)
				}
				if got := r.versions("c.md"); got[0] != "promoted" || !strings.HasPrefix(got[1], "promoted") {
					t.Errorf("c.md versions %q", got)
				}
				r.checkMarkers(map[string][]string{"rules/deploy.md": {"marker-first"}})
				if doc := r.readWS("rules/deploy.md"); strings.Contains(doc, "marker-second") {
					t.Errorf("the revision was appended: %q", doc)
				}
				if got := r.readWS("memory/cards/palette.md"); got != a2+"\n" {
					t.Errorf("palette.md = %q", got)
				}
				r.checkBackups()
				r.checkClean()
			})
			if !reached {
				break
			}
		}
	}
}

// TestReplaceAppended: an earlier version's appended text is found only
// as whole lines, and replaced only when the document holds it exactly
// once.
func TestReplaceAppended(t *testing.T) {
	for _, tc := range []struct {
		cur, old, content, want string
		n                       int
	}{
		{"# T\n\n- old\n", "- old", "- new", "# T\n\n- new\n", 1},
		{"- old\n", "- old", "- new", "- new\n", 1},
		{"- a\n\n- old\n\n- later\n", "- old", "- new\n- more", "- a\n\n- new\n- more\n\n- later\n", 1},
		{"- old", "- old", "- new", "- new", 1},
		{"- a\n\n- old thing\n", "- old", "- new", "", 0}, // not whole lines
		{"- a\n\n- bold\n", "old", "new", "", 0},          // inside a line
		{"- old\n\n- old\n", "- old", "- new", "", 2},     // ambiguous
		{"- a\n", "- old", "- new", "", 0},                // gone
		{"", "- old", "- new", "", 0},                     // no document
		{"- x\n- old\n- y\n", "- old", "- new", "- x\n- new\n- y\n", 1},
	} {
		got, n := replaceAppended([]byte(tc.cur), tc.old, tc.content)
		if n != tc.n || (n == 1 && string(got) != tc.want) || (n != 1 && got != nil) {
			t.Errorf("replaceAppended(%q, %q, %q) = %q, %d; want %q, %d", tc.cur, tc.old, tc.content, got, n, tc.want, tc.n)
		}
	}
}

// TestAcceptRevisionReplaces: accepting a revision of a routed document
// append replaces the earlier version's text in place, hash-guarded, with
// a backup of the document and a plan of its own; where the document no
// longer holds that text exactly, the proposal appends and says why.
// Invariant: the document never holds both versions' text after a
// replacing accept, and every byte it held before is in the backup.
func TestAcceptRevisionReplaces(t *testing.T) {
	ctx := context.Background()
	v1 := docH("rules/deploy.md", "- landed as abc1234 on main")
	v2 := docH("rules/deploy.md", "- landed as def5678 on main")
	setup := func(t *testing.T) (*rig, ledger.SourceRow, *Earlier) {
		r := newRig(t)
		r.writeWS("rules/deploy.md", "- deploys go through CI\n")
		r.store([2]string{"d.md", v1})
		r.mustRun(256)
		r.store([2]string{"d.md", v2})
		r.mustRun(256)
		var src ledger.SourceRow
		if err := r.led.DB().QueryRow(`SELECT id, sha256, size, host, inbox, name FROM sources WHERE sha256 = ?`, sum(v2)).
			Scan(&src.ID, &src.SHA256, &src.Size, &src.Host, &src.Inbox, &src.Name); err != nil {
			t.Fatal(err)
		}
		return r, src, &Earlier{SHA256: sum(v1), Result: ResultRouted, Target: "rules/deploy.md", Data: []byte(v1)}
	}
	t.Run("replaces", func(t *testing.T) {
		r, src, e := setup(t)
		before := r.readWS("rules/deploy.md")
		in := r.ingester(false)
		pr, err := in.InspectRevision(src, []byte(v2), Override{Workspace: true}, e)
		if err != nil || !pr.OK() || pr.Replaces != sum(v1) || pr.Kind != kindReplace {
			t.Fatalf("proposal %+v %v", pr, err)
		}
		want := "- deploys go through CI\n\n- landed as def5678 on main\n"
		if string(pr.Next) != want {
			t.Errorf("proposal leaves %q, want %q", pr.Next, want)
		}
		ent, _, err := in.Decide(ctx, Decision{Source: src, Data: []byte(v2), Override: Override{Workspace: true}, Record: r.decision(src, ledger.DecisionAccepted), Earlier: e})
		if err != nil {
			t.Fatal(err)
		}
		if ent.Result != ResultRouted || ent.Reason != ReasonRevised || ent.BeforeSHA256 != sum(before) || ent.AfterSHA256 != sum(want) {
			t.Errorf("entry %+v", ent)
		}
		if got := r.readWS("rules/deploy.md"); got != want {
			t.Errorf("document %q, want %q", got, want)
		}
		if b := r.readWS(layout.BackupsDir + "/" + BackupName(src.SHA256, 0, "rules/deploy.md")); b != before {
			t.Errorf("backup %q, want the document as it was, %q", b, before)
		}
		var kind, state string
		r.led.DB().QueryRow(`SELECT kind, state FROM plans WHERE sha256 = ?`, src.SHA256).Scan(&kind, &state)
		if kind != kindReplace || state != "done" {
			t.Errorf("plan %s %s", kind, state)
		}
		r.checkClean()
	})
	t.Run("edited-since", func(t *testing.T) {
		r, src, e := setup(t)
		r.writeWS("rules/deploy.md", "- deploys go through CI\n\n- landed as abc1234 on main (hotfix)\n")
		pr, err := r.ingester(true).InspectRevision(src, []byte(v2), Override{Workspace: true}, e)
		if err != nil || !pr.OK() || pr.Replaces != "" || pr.Kind != kindDocument || !strings.Contains(pr.AppendOnly, "no longer holds") {
			t.Fatalf("proposal %+v %v", pr, err)
		}
	})
	t.Run("pruned", func(t *testing.T) {
		r, src, e := setup(t)
		e.Data = nil
		pr, _ := r.ingester(true).InspectRevision(src, []byte(v2), Override{Workspace: true}, e)
		if pr.Replaces != "" || !strings.Contains(pr.AppendOnly, "no longer stored") {
			t.Fatalf("proposal %+v", pr)
		}
	})
	t.Run("moved-under-it", func(t *testing.T) {
		// The document changes after the plan is recorded and before it
		// is applied: the compare-and-swap refuses, the decision is
		// abandoned and the handoff waits again. Nothing is lost.
		r, src, e := setup(t)
		in := r.ingester(false)
		pr, err := in.InspectRevision(src, []byte(v2), Override{Workspace: true}, e)
		if err != nil || !pr.OK() {
			t.Fatal(err)
		}
		p := pr.p
		if err := r.led.StartDecision(ctx, r.decision(src, ledger.DecisionAccepted), &p.Plan, nil); err != nil {
			t.Fatal(err)
		}
		r.writeWS("rules/deploy.md", "- someone else\n")
		ent, err := in.apply(ctx, src, p, nil, nil)
		if err != nil || ent.Result != ResultReview {
			t.Fatalf("entry %+v %v", ent, err)
		}
		if got := r.readWS("rules/deploy.md"); got != "- someone else\n" {
			t.Errorf("document %q", got)
		}
	})
}
