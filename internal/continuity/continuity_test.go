package continuity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/repoid"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
)

func hsum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func handoffText(title string, extra ...string) string {
	s := "# Memory Handoff\n\n## Type\ndecision\n\n## Title\n" + title + "\n\n## Summary\nsummary of " + title +
		"\n\n## Recommended memory action\nno-card\n\n## Target document\nTOOLS.md\n\n## Suggested document content\n- x\n"
	for i := 0; i+1 < len(extra); i += 2 {
		s += "\n## " + extra[i] + "\n" + extra[i+1] + "\n"
	}
	return s
}

// world is a ledger and a spool holding handoffs from two hosts' clones
// of one repository, a private repository on laptop and one under a
// private discover root of vps.
type world struct {
	dir string
	led *ledger.Ledger
	sp  *spool.Dir
	m   *manifest.Manifest
}

const manifestYAML = `version: 1
hosts:
  - name: laptop
    transport: local
    discover: [{root: /home/me/code}]
    mirror: {path: /home/me/mirror, include: [cards, repos]}
  - name: vps
    transport: local
    discover: [{root: /srv}, {root: /srv/clients, private: true}]
    mirror: {path: /srv/mirror, include: [cards, repos]}
  - name: ci
    transport: local
    discover: [{root: /ci}]
    mirror: {path: /ci/mirror}
repos:
  - origins: [git@github.com:acme/secret.git]
    private: true
`

func newWorld(t testing.TB) *world {
	t.Helper()
	dir := t.TempDir()
	led, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	sp, err := spool.Open(filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	m, err := manifest.Parse([]byte(manifestYAML), filepath.Join(dir, "writers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &world{dir: dir, led: led, sp: sp, m: m}
}

// store stores a handoff as pulled from host's inbox and ingested with
// result.
func (w *world) store(t *testing.T, host, inbox, name, text, result, reason, target string) claim.Source {
	t.Helper()
	ctx := context.Background()
	sha := hsum(text)
	if err := w.sp.Put(map[string][]byte{sha: []byte(text)}); err != nil {
		t.Fatal(err)
	}
	src := claim.Source{Host: host, Inbox: inbox, Name: name, SHA256: sha, Size: int64(len(text)), ArchivedAs: "processed/" + claim.ArchiveName(name, sha), Parses: true}
	if _, err := w.led.RecordSources(ctx, "run-1", []claim.Source{src}); err != nil {
		t.Fatal(err)
	}
	pending, err := w.led.PendingSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range pending {
		if row.Name == name && row.Host == host {
			if err := w.led.Finish(ctx, "run-1", row, ledger.Outcome{Result: result, Reason: reason, Action: "no-card", Target: target}, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return src
}

func report(host, home string, inboxes map[string]repoid.Identity) claim.HostReport {
	rep := claim.HostReport{Name: host, Home: home}
	for in, id := range inboxes {
		rep.Inboxes = append(rep.Inboxes, claim.InboxReport{Path: in, State: claim.StateOK, Repo: &id})
	}
	return rep
}

func fileOf(t *testing.T, fs []mirror.File, p string) string {
	t.Helper()
	for _, f := range fs {
		if f.Path == p {
			return string(f.Data)
		}
	}
	return ""
}

func paths(fs []mirror.File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

// TestBuild: the same repository cloned on two hosts (origins spelt
// differently) is one, and each host's RECENT.md holds both hosts'
// handoffs with what became of them; a private repository's handoff and
// one from a private discover root appear only on their own host's
// files, never on the other's; a host whose mirror does not ask for repos
// gets none; threads are recorded and shown.
func TestBuild(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	lapApp, vpsApp := "/home/me/code/app/.claude/memory-handoffs", "/srv/app/.codex/memory-handoffs"
	lapSecret, vpsClient := "/home/me/code/secret/.claude/memory-handoffs", "/srv/clients/acme/.claude/memory-handoffs"

	a := w.store(t, "laptop", lapApp, "2026-12-01-1000-a.md", handoffText("Pick the queue", "Open questions", "- which broker?"), "routed", "", "TOOLS.md")
	b := w.store(t, "vps", vpsApp, "2026-12-01-1100-b.md", handoffText("Broker chosen", "Continues", "2026-12-01-1000-a.md", "Next steps", "- deploy it"), "review", "hash-conflict", ".handoff/review/b.md")
	w.store(t, "laptop", lapSecret, "s.md", handoffText("SECRET-PLAN"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsClient, "c.md", handoffText("CLIENT-PLAN"), "routed", "", "TOOLS.md")
	w.store(t, "vps", vpsApp, "junk.md", "not a handoff", "malformed", "parse-error", "")

	reports := []claim.HostReport{
		report("laptop", "/home/me", map[string]repoid.Identity{
			lapApp:    {Path: "/home/me/code/app", Origin: "github.com/acme/app"},
			lapSecret: {Path: "/home/me/code/secret", Origin: "github.com/acme/secret"},
		}),
		report("vps", "/root", map[string]repoid.Identity{
			vpsApp:    {Path: "/srv/app", Origin: "github.com/acme/app"},
			vpsClient: {Path: "/srv/clients/acme", Origin: "github.com/acme/client"},
		}),
	}
	if err := Record(ctx, w.led, w.sp, "run-1", reports, []string{a.SHA256, b.SHA256, b.SHA256}, nil); err != nil {
		t.Fatal(err)
	}
	var cont string
	if err := w.led.DB().QueryRow(`SELECT continues FROM threads WHERE sha256 = ?`, b.SHA256).Scan(&cont); err != nil || cont != "2026-12-01-1000-a.md" {
		t.Errorf("thread of b: %q, %v", cont, err)
	}
	if n := 0; w.led.DB().QueryRow(`SELECT count(*) FROM threads`).Scan(&n) != nil || n != 1 {
		t.Errorf("%d thread rows; want b's alone", n)
	}
	files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now()}, w.m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["ci"]; ok || len(files) != 2 {
		t.Fatalf("hosts with repos/: %v; want laptop and vps only", slices.Collect(func(yield func(string) bool) {
			for k := range files {
				yield(k)
			}
		}))
	}
	lap, vps := files["laptop"], files["vps"]
	for host, fs := range map[string][]mirror.File{"laptop": lap, "vps": vps} {
		app := fileOf(t, fs, "repos/app/RECENT.md")
		for _, want := range []string{"Pick the queue", "Broker chosen", "which broker?", "deploy it", "routed: appended to TOOLS.md",
			"waits in review (hash-conflict)", "## Thread: Broker chosen (2 handoffs", "from laptop (.claude)", "from vps (.codex)"} {
			if !strings.Contains(app, want) {
				t.Errorf("%s: repos/app/RECENT.md lacks %q:\n%s", host, want, app)
			}
		}
		if strings.Contains(app, "junk.md") {
			t.Errorf("%s: a malformed handoff is listed", host)
		}
		var idx mirror.Index
		if err := json.Unmarshal([]byte(fileOf(t, fs, "repos/INDEX.json")), &idx); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(idx.Repos, func(r mirror.IndexRepo) bool { return r.Slug == "app" })
		if i < 0 || !slices.Equal(idx.Repos[i].Origins, []string{"github.com/acme/app"}) || !slices.Equal(idx.Repos[i].Hosts, []string{"laptop", "vps"}) {
			t.Errorf("%s: index %+v", host, idx.Repos)
		}
	}
	all := func(fs []mirror.File) string {
		var b strings.Builder
		for _, f := range fs {
			b.Write(f.Data)
		}
		return b.String()
	}
	if s := all(lap); !strings.Contains(s, "SECRET-PLAN") || strings.Contains(s, "CLIENT-PLAN") || strings.Contains(s, "acme/client") {
		t.Errorf("laptop's repos/ must hold its own private repository and nothing of vps's private root:\n%q", paths(lap))
	}
	if s := all(vps); strings.Contains(s, "SECRET-PLAN") || strings.Contains(s, "acme/secret") || strings.Contains(s, "code/secret") || !strings.Contains(s, "CLIENT-PLAN") {
		t.Errorf("vps's repos/ must hold its private root's repository and nothing of laptop's private one:\n%q", paths(vps))
	}

	// A person rejects b in review: RECENT.md says so.
	d := &ledger.Decision{SHA256: b.SHA256, Decision: ledger.DecisionRejected, State: ledger.DecisionDone, By: "me@canon", At: time.Now(), RunID: "run-2", FromResult: "review", FromReason: "hash-conflict"}
	if err := w.led.StartDecision(ctx, d, nil, nil); err != nil {
		t.Fatal(err)
	}
	files, err = Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now()}, w.m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	if app := fileOf(t, files["vps"], "repos/app/RECENT.md"); !strings.Contains(app, "rejected in review") {
		t.Errorf("a decided handoff: %s", app)
	}

	// Marking the repository private in the manifest hides it from the
	// other host at the next build, earlier handoffs included.
	m2, err := manifest.Parse([]byte(manifestYAML+"  - name: app\n    origins: [https://github.com/acme/app]\n    private: true\n"), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err = Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: m2, Now: time.Now()}, m2.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	lapApp2 := fileOf(t, files["laptop"], "repos/app/RECENT.md")
	if !strings.Contains(lapApp2, "Pick the queue") || strings.Contains(lapApp2, "Broker chosen") {
		t.Errorf("private app on laptop shows vps's handoff, or not its own:\n%s", lapApp2)
	}

	// Age: nothing older than the bound.
	files, _ = Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now().Add(31 * 24 * time.Hour)}, w.m.HostConfigs())
	if got := paths(files["laptop"]); !slices.Equal(got, []string{"repos/INDEX.json", "repos/INDEX.md"}) {
		t.Errorf("31 days later: %q", got)
	}
}

// TestSlugs: a manifest name wins; a derived slug two repositories would
// share gets a hash for each; a private repository never changes a slug
// another host sees, and is given its slug against its own host's
// repositories alone.
func TestSlugs(t *testing.T) {
	m := &manifest.Manifest{Repos: []manifest.Repo{{Name: "app", Origins: []string{"github.com/x/named"}}}}
	mk := func(key, origin, owner string) *repo {
		return &repo{key: key, entry: -1, owner: owner, origins: []string{origin}, items: []item{{private: owner != ""}}}
	}
	named := &repo{key: "entry:0", entry: 0, origins: []string{"github.com/x/named"}, items: []item{{}}}
	a, b := mk("origin:github.com/x/app", "github.com/x/app", ""), mk("origin:gitlab.com/y/tool", "gitlab.com/y/tool", "")
	c, priv := mk("origin:github.com/z/tool", "github.com/z/tool", ""), mk("private:h:origin:github.com/p/lib", "github.com/p/lib", "h")
	lib := mk("origin:github.com/q/lib", "github.com/q/lib", "")
	other := mk("private:g:origin:github.com/r/sdk", "github.com/r/sdk", "g")
	mine := mk("private:h:origin:github.com/s/sdk", "github.com/s/sdk", "h")
	weird := &repo{key: "path:h:/x/My Repo.JSON", entry: -1, rows: []row{{InboxRepo: ledger.InboxRepo{Repo: "/x/My Repo.JSON"}}}, items: []item{{}}}
	repos := []*repo{named, a, b, c, priv, lib, other, mine, weird}
	slugs(m, repos)
	if named.slug != "app" || lib.slug != "lib" || weird.slug != "my-repo" {
		t.Errorf("slugs %q %q %q", named.slug, lib.slug, weird.slug)
	}
	if !strings.HasPrefix(a.slug, "app-") || !strings.HasPrefix(b.slug, "tool-") || !strings.HasPrefix(c.slug, "tool-") || b.slug == c.slug {
		t.Errorf("colliding slugs %q %q %q", a.slug, b.slug, c.slug)
	}
	if !strings.HasPrefix(priv.slug, "lib-") {
		t.Errorf("private lib %q; want a hash, leaving the visible lib its slug", priv.slug)
	}
	if other.slug != "sdk" || mine.slug != "sdk" {
		t.Errorf("private repositories of two hosts %q %q; want each its own base, neither seeing the other", other.slug, mine.slug)
	}
	for _, rp := range repos {
		if !manifest.IsRepoSlug(rp.slug) {
			t.Errorf("%q is no slug", rp.slug)
		}
	}
}

// TestRecentOfEdited: a handoff `handoff review edit` wrote was never
// pulled from a host; RECENT.md says a person edited it in review, from a
// handoff of that host, not "pulled … from laptop".
func TestRecentOfEdited(t *testing.T) {
	text := handoffText("Deploy")
	sha := hsum(text)
	at := time.Date(2026, 12, 3, 9, 2, 0, 0, time.UTC)
	src := ledger.RepoSource{SourceRecord: ledger.SourceRecord{SHA256: sha, Host: "laptop", Inbox: "/home/me/code/app/.claude/memory-handoffs",
		Name: "deploy.md", StoredAt: at, Result: "routed", Content: &ledger.ContentRecord{Result: "routed", Target: "TOOLS.md"}}}
	edit := ledger.Decision{SHA256: hsum("the original"), Decision: ledger.DecisionEdited, State: ledger.DecisionDone, NewSHA256: sha}
	pulled := src
	pulled.ArchivedAs = "processed/deploy." + sha[:12] + ".md"
	for _, tc := range []struct {
		name   string
		src    ledger.RepoSource
		edited bool
	}{{"edited", src, true}, {"pulled", pulled, false}} {
		r := recentOf(tc.src, &ledger.Note{SHA256: sha, Title: "Deploy", Summary: "s"}, []ledger.Decision{edit})
		if r.Edited != tc.edited {
			t.Errorf("%s: Edited %v, want %v", tc.name, r.Edited, tc.edited)
		}
		files := mirror.ReposFiles([]mirror.Repo{{Slug: "app", Handoffs: []mirror.RecentHandoff{r}}}, mirror.DefaultRecent, at)
		recent := fileOf(t, files, "repos/app/RECENT.md")
		want := "- pulled 2026-12-03 09:02 UTC from laptop"
		if tc.edited {
			want = "- edited in review 2026-12-03 09:02 UTC on the canonical host, from a handoff from laptop"
		}
		if !strings.Contains(recent, want) {
			t.Errorf("%s: RECENT.md lacks %q:\n%s", tc.name, want, recent)
		}
	}
}

// TestRecentRevisionsOneItem: a handoff its writer rewrote in place (v1,
// v2, then v3 at the same file name) is one item in RECENT.md, its newest
// version, which names the earlier ones; not three items with one title
// (issue 48). Invariant: the next agent reads the writer's last word, and
// the superseded versions' notes are not shown as current.
func TestRecentRevisionsOneItem(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	in := "/home/me/code/app/.claude/memory-handoffs"
	var shas []string
	for _, step := range []string{"- use redis", "- use nats", "- use kafka"} {
		s := w.store(t, "laptop", in, "deploy.md", handoffText("Pick the queue", "Next steps", step), "routed", "", "TOOLS.md")
		shas = append(shas, s.SHA256)
	}
	reports := []claim.HostReport{report("laptop", "/home/me", map[string]repoid.Identity{in: {Path: "/home/me/code/app", Origin: "github.com/acme/app"}})}
	if err := Record(ctx, w.led, w.sp, "run-1", reports, shas, nil); err != nil {
		t.Fatal(err)
	}
	files, err := Build(ctx, Input{Ledger: w.led, Spool: w.sp, Manifest: w.m, Now: time.Now()}, w.m.HostConfigs())
	if err != nil {
		t.Fatal(err)
	}
	app := fileOf(t, files["laptop"], "repos/app/RECENT.md")
	if n := strings.Count(app, "## Pick the queue"); n != 1 {
		t.Errorf("the title appears %d times; want one item:\n%s", n, app)
	}
	for _, want := range []string{"use kafka", "rewritten in place: this is version 3 of the file; the earlier ones (" + shas[1][:12] + ", " + shas[0][:12] + ") are not shown"} {
		if !strings.Contains(app, want) {
			t.Errorf("RECENT.md lacks %q:\n%s", want, app)
		}
	}
	for _, old := range []string{"use redis", "use nats"} {
		if strings.Contains(app, old) {
			t.Errorf("RECENT.md shows a superseded version's %q:\n%s", old, app)
		}
	}
}
