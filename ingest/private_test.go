package ingest

import (
	"context"
	"testing"
)

// TestPrivateAppendWaits: a private handoff's append to a document the
// other hosts see waits in review (private-append), and one to a document
// that does not exist yet is applied. Invariants: the private bytes never
// enter a shared document without a person's decision, so the document
// keeps reaching every host; the person's accept overrides exactly this
// rule.
func TestPrivateAppendWaits(t *testing.T) {
	r := newRig(t)
	r.writeWS("TOOLS.md", "# Tools\n\n- make lint\n")
	doc := func(target, text string) string {
		return "# Memory Handoff\n\n## Type\nworkflow\n\n## Title\nt\n\n## Summary\ns\n\n## Recommended memory action\nno-card\n\n" +
			"## Target document\n" + target + "\n\n## Suggested document content\n" + text + "\n"
	}
	r.store([2]string{"a.md", doc("TOOLS.md", "- CONFIDENTIAL-CLIENTX uses SAML")}, [2]string{"b.md", doc("rules/clientx.md", "- CLIENTX rule")})
	var asked []string
	got := r.runHolding(func(host, inbox, target string, exists bool) bool {
		asked = append(asked, target)
		return host == "h" && inbox == "/in" && exists
	})
	if e := got["a.md"]; e.Result != ResultReview || e.Reason != ReasonPrivateAppend {
		t.Errorf("the append to the shared TOOLS.md: %s %s; want review %s", e.Result, e.Reason, ReasonPrivateAppend)
	}
	if r.readWS("TOOLS.md") != "# Tools\n\n- make lint\n" {
		t.Errorf("TOOLS.md changed: %q", r.readWS("TOOLS.md"))
	}
	if e := got["b.md"]; e.Result != ResultRouted {
		t.Errorf("the append to a new document: %s %s; want routed", e.Result, e.Reason)
	}
	if len(asked) != 2 {
		t.Errorf("HoldPrivate asked about %q; want both targets", asked)
	}
	if !IsWorkspaceReason(ReasonPrivateAppend) {
		t.Error("accept does not override private-append")
	}
	r.checkClean()
}

// TestPrivateCardWaits: a private handoff's update of a card the other
// hosts see waits in review (private-card); its new card is applied.
// Invariants: a private host cannot take a shared card off the other
// hosts' mirrors without a person's decision (the card is unchanged);
// the person's accept overrides exactly this rule.
func TestPrivateCardWaits(t *testing.T) {
	r := newRig(t)
	shared := cardContent("deploy", "deploys go through the queue")
	r.writeWS("memory/cards/deploy.md", shared+"\n")
	r.store([2]string{"u.md", cardH("update-card", "deploy.md", cardContent("deploy", "CONFIDENTIAL-CLIENTX deploys by hand"), section{"Expected card SHA256", sum(shared + "\n")})},
		[2]string{"n.md", cardH("create-card", "clientx.md", cardContent("clientx", "CLIENTX uses SAML"))})
	got := r.runHolding(func(host, inbox, target string, exists bool) bool { return exists })
	if e := got["u.md"]; e.Result != ResultReview || e.Reason != ReasonPrivateCard {
		t.Errorf("the update of the shared card: %s %s; want review %s", e.Result, e.Reason, ReasonPrivateCard)
	}
	if r.readWS("memory/cards/deploy.md") != shared+"\n" {
		t.Errorf("the shared card changed: %q", r.readWS("memory/cards/deploy.md"))
	}
	if e := got["n.md"]; e.Result != ResultPromoted {
		t.Errorf("the new card: %s %s; want promoted", e.Result, e.Reason)
	}
	if !IsWorkspaceReason(ReasonPrivateCard) {
		t.Error("accept does not override private-card")
	}
	r.checkClean()
}

// runHolding ingests with hold as Options.HoldPrivate and returns the
// entries by handoff name.
func (r *rig) runHolding(hold func(host, inbox, target string, exists bool) bool) map[string]Entry {
	r.t.Helper()
	in, err := New(Options{OpenClaw: olderReader, Workspace: r.ws, RunID: "run", HoldPrivate: hold}, r.led, r.spool)
	if err != nil {
		r.t.Fatal(err)
	}
	defer in.Close()
	entries, err := in.Run(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	return got
}
