package continuity

import (
	"context"
	"slices"
	"testing"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/repoid"
	"github.com/handoff-sync/handoff/mirror"
)

// TestPrivateTargets: a card or document that a private handoff wrote
// (its repository's entry private, or its inbox under a private discover
// root) is withheld from every other host's mirror, and only from them.
// Invariant: nothing of a private handoff on another host's tree; a
// public handoff's card reaches every host.
func TestPrivateTargets(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	lapSecret, vpsClient := "/home/me/code/secret/.claude/memory-handoffs", "/srv/clients/acme/.claude/memory-handoffs"
	lapApp := "/home/me/code/app/.claude/memory-handoffs"
	w.store(t, "laptop", lapSecret, "s.md", handoffText("CONFIDENTIAL-CLIENTX"), "routed", "", ".learnings/LEARNINGS.md")
	w.store(t, "vps", vpsClient, "c.md", handoffText("clientx SSO is SAML only"), "promoted", "", "memory/cards/clientx-sso.md")
	w.store(t, "laptop", lapApp, "a.md", handoffText("Pick the queue"), "promoted", "", "memory/cards/queue.md")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{
			lapSecret: {Path: "/home/me/code/secret", Origin: "github.com/acme/secret"},
			lapApp:    {Path: "/home/me/code/app", Origin: "github.com/acme/app"},
		}),
		report("vps", "/root", map[string]repoid.Identity{vpsClient: {Path: "/srv/clients/acme", Origin: "github.com/acme/client"}}),
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := PrivateTargets(ctx, w.led, w.m)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string][]string{
		"laptop": {"memory/cards/clientx-sso.md"},
		"vps":    {".learnings/LEARNINGS.md"},
		"ci":     {".learnings/LEARNINGS.md", "memory/cards/clientx-sso.md"},
	} {
		if !slices.Equal(got[host], want) {
			t.Errorf("%s withholds %q; want %q", host, got[host], want)
		}
	}
	files := []mirror.File{mirror.NewFile(".learnings/LEARNINGS.md", nil), mirror.NewFile("memory/cards/clientx-sso.md", nil), mirror.NewFile("memory/cards/queue.md", nil)}
	kept := mirror.Withhold(files, got["ci"])
	if len(kept) != 1 || kept[0].Path != "memory/cards/queue.md" {
		t.Errorf("ci's mirror holds %v; want the public card alone", kept)
	}
}
