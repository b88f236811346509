package continuity

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/repoid"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
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

const perHostYAML = `version: 1
hosts:
  - name: laptop
    transport: local
    discover: [{root: /home/me/code}, {root: /home/me/clients, private: true}]
    mirror: {path: /home/me/mirror, include: [cards, repos]}
  - name: vps
    transport: local
    discover: [{root: /srv}]
    mirror: {path: /srv/mirror, include: [cards, repos]}
repos:
  - name: clientx
    origins: [git@github.com:acme/client.git, https://gitlab.example.com/acme/client-mirror]
    paths: [{host: laptop, path: ~/code/client}]
    private: true
`

// TestPrivatePerHost: privacy is per host. A private entry's name does
// not change the slug of another host's public repository; a clone on
// another host that claims one origin of a private entry gets its own
// notes under a slug of its own origin and learns neither the entry's
// name nor its other origins; and a clone on another host that claims
// the origin of a repository under a private root never joins its
// notes, which context on the private host still finds.
// Invariant: nothing of a private entry reaches a host by claiming its
// origin, and no other host's handoff is in a private repository's
// RECENT.md.
func TestPrivatePerHost(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	m, err := manifest.Parse([]byte(perHostYAML), filepath.Join(w.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w.m = m
	lapClient, lapBank := "/home/me/code/client/.claude/memory-handoffs", "/home/me/clients/bank/.claude/memory-handoffs"
	vpsClient, vpsBank, vpsPublic := "/srv/client/.claude/memory-handoffs", "/srv/bank/.claude/memory-handoffs", "/srv/clientx/.claude/memory-handoffs"
	w.store(t, "laptop", lapClient, "c.md", handoffText("CLIENTX-PLAN"), "routed", "", "TOOLS.md")
	w.store(t, "laptop", lapBank, "b.md", handoffText("BANK-PLAN"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsClient, "fc.md", handoffText("FORGED-CLIENT"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsBank, "fb.md", handoffText("FORGED-BANK"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsPublic, "p.md", handoffText("PUBLIC-CLIENTX"), "routed", "", "TOOLS.md")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{
			lapClient: {Path: "/home/me/code/client", Origin: "github.com/acme/client"},
			lapBank:   {Path: "/home/me/clients/bank", Origin: "github.com/acme/bank"},
		}),
		report("vps", "/root", map[string]repoid.Identity{
			vpsClient: {Path: "/srv/client", Origin: "github.com/acme/client"},
			vpsBank:   {Path: "/srv/bank", Origin: "github.com/acme/bank"},
			vpsPublic: {Path: "/srv/clientx", Origin: "github.com/other/clientx"},
		}),
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: m, Now: time.Now()}, m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	index := func(host string) mirror.Index {
		var idx mirror.Index
		if err := json.Unmarshal([]byte(fileOf(t, files[host], "repos/INDEX.json")), &idx); err != nil {
			t.Fatal(err)
		}
		return idx
	}

	vps := ""
	for _, f := range files["vps"] {
		vps += string(f.Data)
	}
	for _, leak := range []string{"client-mirror", "gitlab.example.com", "CLIENTX-PLAN", "BANK-PLAN", "/home/me"} {
		if strings.Contains(vps, leak) {
			t.Errorf("vps's repos/ holds %q of laptop's private repositories", leak)
		}
	}
	for _, r := range index("vps").Repos {
		switch {
		case slices.Contains(r.Origins, "github.com/other/clientx"):
			if r.Slug != "clientx" {
				t.Errorf("vps's public clientx is %q: a private entry's name changed it", r.Slug)
			}
		case slices.Contains(r.Origins, "github.com/acme/client"):
			if r.Slug == "clientx" || !slices.Equal(r.Origins, []string{"github.com/acme/client"}) {
				t.Errorf("vps's clone claiming the private origin is %+v; want its own origin's slug and origin alone", r)
			}
		}
	}

	// On laptop, context finds each private clone by its path, and its
	// RECENT.md holds laptop's handoffs alone.
	mdir := t.TempDir()
	for _, f := range files["laptop"] {
		writeFile(t, filepath.Join(mdir, f.Path), string(f.Data))
	}
	for dir, want := range map[string]string{"/home/me/clients/bank": "BANK-PLAN", "/home/me/code/client": "CLIENTX-PLAN"} {
		origin := "github.com/acme/" + filepath.Base(dir)
		slug, _, err := lookup(ctx, transport.NewLocal(), mdir, repoid.Identity{Path: dir, Origin: origin}, "laptop")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		recent := fileOf(t, files["laptop"], "repos/"+slug+"/RECENT.md")
		if !strings.Contains(recent, want) || strings.Contains(recent, "FORGED") {
			t.Errorf("laptop's %s (repos/%s) shows another host's handoff, or not its own:\n%s", dir, slug, recent)
		}
	}
}

// TestPrivateAppends: the ingester's rule for a private handoff's
// document append. Invariants: a private append never enters a document
// that another host's mirror shows (one a public handoff wrote, or one no
// handoff wrote), so that document keeps flowing; a document only private
// handoffs wrote, or a new one, takes it (it is withheld at publish); a
// public handoff is never held; an inbox no pull recorded yet is judged
// by its path.
func TestPrivateAppends(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	lapSecret, lapApp := "/home/me/code/secret/.claude/memory-handoffs", "/home/me/code/app/.claude/memory-handoffs"
	w.store(t, "laptop", lapApp, "a.md", handoffText("public"), "routed", "", "TOOLS.md")
	w.store(t, "laptop", lapSecret, "s.md", handoffText("private"), "routed", "", "rules/secret.md")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{
			lapSecret: {Path: "/home/me/code/secret", Origin: "github.com/acme/secret"},
			lapApp:    {Path: "/home/me/code/app", Origin: "github.com/acme/app"},
		}),
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	hold := PrivateAppends(ctx, w.led, w.m)
	for _, tc := range []struct {
		host, inbox, target string
		exists, want        bool
	}{
		{"laptop", lapSecret, "TOOLS.md", true, true},                              // a public handoff's document
		{"laptop", lapSecret, "USER.md", true, true},                               // the person's own document
		{"laptop", lapSecret, "rules/secret.md", true, false},                      // private already
		{"laptop", lapSecret, "rules/new.md", false, false},                        // new: private from its first line
		{"laptop", lapApp, "TOOLS.md", true, false},                                // a public handoff
		{"laptop", lapApp, "rules/secret.md", true, false},                         // a public handoff, a private document
		{"vps", "/srv/clients/new/.codex/memory-handoffs", "TOOLS.md", true, true}, // under a private root, never pulled before
		{"vps", "/srv/app/.codex/memory-handoffs", "TOOLS.md", true, false},
		{"gone", "/x/.claude/memory-handoffs", "TOOLS.md", true, false}, // no host: no privacy
	} {
		if got := hold(tc.host, tc.inbox, tc.target, tc.exists); got != tc.want {
			t.Errorf("%s %s -> %s (exists %v): hold %v; want %v", tc.host, tc.inbox, tc.target, tc.exists, got, tc.want)
		}
	}
}

// TestShareNotes: a host with share_notes: false keeps its handoffs,
// clones and origins out of every other host's repos/, and still sees
// the other hosts' notes of the repositories it shares.
// Invariant: nothing a keep-home host's agents wrote reaches another
// host's repos/.
func TestShareNotes(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	m, err := manifest.Parse([]byte(strings.Replace(manifestYAML, "    discover: [{root: /srv}, {root: /srv/clients, private: true}]\n",
		"    discover: [{root: /srv}, {root: /srv/clients, private: true}]\n    share_notes: false\n", 1)), filepath.Join(w.dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := m.Host("vps"); !cfg.KeepNotes {
		t.Fatalf("vps: share_notes: false does not resolve to KeepNotes")
	}
	if cfg, _ := m.Host("laptop"); cfg.KeepNotes {
		t.Fatalf("laptop: share_notes left out keeps notes home")
	}
	w.m = m
	lapApp, vpsApp, vpsOwn := "/home/me/code/app/.claude/memory-handoffs", "/srv/app/.codex/memory-handoffs", "/srv/tool/.codex/memory-handoffs"
	w.store(t, "laptop", lapApp, "a.md", handoffText("LAPTOP-NOTE"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsApp, "v.md", handoffText("VPS-NOTE"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsOwn, "t.md", handoffText("VPS-TOOL"), "routed", "", "TOOLS.md")
	if err := Record(ctx, w.led, w.sp, "run-1", []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{lapApp: {Path: "/home/me/code/app", Origin: "github.com/acme/app"}}),
		report("vps", "/root", map[string]repoid.Identity{
			vpsApp: {Path: "/srv/app", Origin: "github.com/acme/app"},
			vpsOwn: {Path: "/srv/tool", Origin: "github.com/vps/tool"},
		}),
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: m, Now: time.Now()}, m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	lap := ""
	for _, f := range files["laptop"] {
		lap += string(f.Data)
	}
	for _, leak := range []string{"VPS-NOTE", "VPS-TOOL", "vps/tool", "/srv/", "from vps"} {
		if strings.Contains(lap, leak) {
			t.Errorf("laptop's repos/ holds %q of a host whose notes stay home", leak)
		}
	}
	if !strings.Contains(lap, "LAPTOP-NOTE") {
		t.Errorf("laptop lost its own note")
	}
	app := fileOf(t, files["vps"], "repos/app/RECENT.md")
	if !strings.Contains(app, "LAPTOP-NOTE") || !strings.Contains(app, "VPS-NOTE") {
		t.Errorf("vps's repos/app/RECENT.md must show both hosts' notes:\n%s", app)
	}
	if !strings.Contains(fileOf(t, files["vps"], "repos/tool/RECENT.md"), "VPS-TOOL") {
		t.Errorf("vps's own repository is missing from its mirror: %q", paths(files["vps"]))
	}
}

// TestNothingPrivateReadsNothing: a manifest that keeps nothing private
// has no hold rule and withholds nothing, without reading the ledger (a
// closed ledger would fail any read). Invariant: an idle tick's cost does
// not grow with the sources a workspace stored when privacy is not used.
func TestNothingPrivateReadsNothing(t *testing.T) {
	w := newWorld(t)
	m, err := manifest.Parse([]byte("version: 1\nworkspace: /ws\nhosts:\n  - name: laptop\n    transport: local\n    discover: [{root: /code}]\n"), filepath.Join(t.TempDir(), "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	w.led.Close()
	if hold := PrivateAppends(context.Background(), w.led, m); hold != nil {
		t.Error("a hold rule for a manifest that keeps nothing private")
	}
	got, err := PrivateTargets(context.Background(), w.led, m)
	if err != nil || len(got) != 0 {
		t.Errorf("PrivateTargets = %v, %v; want nothing, without reading the closed ledger", got, err)
	}
	if !w.m.KeepsPrivate() {
		t.Error("the test world's manifest, which has private entries, does not keep anything private")
	}
}
