package where_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/review"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/where"
)

// TestWhereDecisions: where answers for an accepted, an edited and a
// rejected handoff with the decision, who made it, the note and the
// hashes; for an edit, both the original and the handoff it made.
func TestWhereDecisions(t *testing.T) {
	e := newDrEnv(t, "")
	acc := testenv.Doc("TOOLS.md", "- key AKIAABCDEFGHIJKLMNOP")
	edi := testenv.Doc("../out.md", "- moved")
	rej := "not a handoff\n"
	e.Put(e.Inbox, "acc.md", acc)
	e.Put(e.Inbox, "edi.md", edi)
	e.Put(e.Inbox, "rej.md", rej)
	if r := e.sync(); r.Counts.Review != 2 || r.Counts.Malformed != 1 {
		t.Fatalf("fixture: %+v", r.Counts)
	}
	ctx := context.Background()
	o := review.Options{Workspace: e.WS, By: "ann@desk"}
	if _, err := review.Accept(ctx, o, testenv.Sum(acc)[:12], review.AcceptOptions{Note: "an example key", Allow: review.Allow{Secret: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := review.Reject(ctx, o, testenv.Sum(rej)[:12], "junk"); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(edi, "../out.md", "rules/moved.md", 1)
	out, err := review.Edit(ctx, o, testenv.Sum(edi)[:12], review.EditOptions{Note: "retargeted", Editor: func(p string) error {
		return os.WriteFile(p, []byte(edited), 0o600)
	}})
	if err != nil || out.Entry.Result != "routed" {
		t.Fatalf("edit: %+v %v", out, err)
	}

	a := drWhere(t, e.WS, "acc.md")
	if len(a) != 1 || a[0].Result != "promoted" && a[0].Result != "routed" || len(a[0].Decisions) != 1 {
		t.Fatalf("accepted: %+v", a)
	}
	if d := a[0].Decisions[0]; d.Decision != "accepted" || d.By != "ann@desk" || d.Note != "an example key" || d.WaitedAs != "review" ||
		d.Reason != "secret-like-content" || strings.Join(d.Overrides, ",") != "allow-secret" || d.Target != "TOOLS.md" || d.AfterSHA256 == "" || d.State != "done" {
		t.Errorf("accepted decision: %+v", d)
	}
	r := drWhere(t, e.WS, "rej.md")
	if len(r) != 1 || r[0].Result != "malformed" || len(r[0].Decisions) != 1 || r[0].Decisions[0].Decision != "rejected" || r[0].Decisions[0].By != "ann@desk" {
		t.Errorf("rejected: %+v", r)
	}
	ms := drWhere(t, e.WS, "edi.md")
	if len(ms) != 2 {
		t.Fatalf("edited: %d matches, want the original and the edit: %+v", len(ms), ms)
	}
	var orig, made *where.Match
	for i := range ms {
		if ms[i].SHA256 == testenv.Sum(edi) {
			orig = &ms[i]
		} else {
			made = &ms[i]
		}
	}
	if orig == nil || len(orig.Decisions) != 1 || orig.Decisions[0].Decision != "edited" || orig.Decisions[0].EditedSHA256 != testenv.Sum(edited) || orig.Result != "review" {
		t.Errorf("original: %+v", orig)
	}
	if made == nil || made.SHA256 != testenv.Sum(edited) || made.Result != "routed" || made.Target != "rules/moved.md" ||
		made.EditedFrom == nil || made.EditedFrom.OriginalSHA256 != testenv.Sum(edi) || made.EditedFrom.By != "ann@desk" || made.ArchivedAs != "" {
		t.Errorf("the edit: %+v (from %+v)", made, made.EditedFrom)
	}
}
