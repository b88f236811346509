package manifest

import (
	"strings"
	"testing"
)

// TestRepos: the repos list, a private discover root and include: repos
// parse; origins are kept normalized; RepoFor and PrivateAt answer as
// docs/manifest.md says.
func TestRepos(t *testing.T) {
	m, err := parse(t, `version: 1
hosts:
  - name: laptop
    transport: ssh
    ssh: {host: laptop}
    discover: [{root: ~/code}, {root: ~/clients, private: true}]
    mirror: {path: ~/.openclaw/mirror, include: [cards, repos]}
  - name: vps
    transport: ssh
    ssh: {host: vps}
    discover: [{root: /srv}]
repos:
  - name: handoff
    origins: [git@github.com:handoff-sync/handoff.git, https://gitlab.example.com/me/handoff]
  - name: notes
    paths: [{host: laptop, path: ~/notes/}, {host: vps, path: /srv/notes}]
  - origins: ["ssh://git@github.com/acme/client"]
    private: true
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Repos[0].Origins; got[0] != "github.com/handoff-sync/handoff" || got[1] != "gitlab.example.com/me/handoff" {
		t.Errorf("origins %q; want them normalized", got)
	}
	if got := m.Repos[1].Paths[0].Path; got != "~/notes" {
		t.Errorf("path %q; want it cleaned", got)
	}
	laptop, _ := m.Host("laptop")
	if !laptop.Mirror.Includes(MirrorRepos) || laptop.Mirror.Includes(MirrorDocuments) {
		t.Errorf("laptop include %q", laptop.Mirror.Include)
	}
	if !laptop.Discover[1].Private || laptop.Discover[0].Private {
		t.Errorf("discover %+v", laptop.Discover)
	}
	for _, tc := range []struct {
		host, dir, home, origin string
		want                    int
	}{
		{"laptop", "/home/me/code/handoff", "/home/me", "github.com/handoff-sync/handoff", 0},
		{"vps", "/srv/x", "/root", "gitlab.example.com/me/handoff", 0},
		{"laptop", "/home/me/notes", "/home/me", "", 1},
		{"laptop", "/home/me/notes", "/home/me", "github.com/handoff-sync/handoff", 1}, // the path names this clone
		{"laptop", "/home/me/notes", "", "", -1},                                       // ~ unknown: no match
		{"vps", "/srv/notes", "", "", 1},
		{"vps", "/home/me/notes", "/home/me", "", -1},
		{"vps", "/srv/c", "/root", "github.com/acme/client", 2},
		{"vps", "/srv/c", "/root", "github.com/acme/other", -1},
	} {
		if got := m.RepoFor(tc.host, tc.dir, tc.home, tc.origin); got != tc.want {
			t.Errorf("RepoFor(%s, %s, %q, %q) = %d; want %d", tc.host, tc.dir, tc.home, tc.origin, got, tc.want)
		}
	}
	for _, tc := range []struct {
		inbox, home string
		want        bool
	}{
		{"/home/me/clients/acme/.claude/memory-handoffs", "/home/me", true},
		{"/home/me/clientsx/acme/.claude/memory-handoffs", "/home/me", false},
		{"/home/me/code/app/.claude/memory-handoffs", "/home/me", false},
		{"/home/me/code/app/.claude/memory-handoffs", "", true}, // where ~ is unknown, private wins
	} {
		if got := laptop.PrivateAt(tc.inbox, tc.home); got != tc.want {
			t.Errorf("PrivateAt(%s, %q) = %v; want %v", tc.inbox, tc.home, got, tc.want)
		}
	}
	vps, _ := m.Host("vps")
	if vps.PrivateAt("/srv/a/.claude/memory-handoffs", "") {
		t.Error("vps has no private root")
	}
}

// TestReposErrors: each mistake in repos is reported with its field path
// and a hint.
func TestReposErrors(t *testing.T) {
	const head = "version: 1\nhosts:\n  - {name: laptop, transport: local, discover: [{root: ~/code}]}\nrepos:\n"
	for _, tc := range []struct {
		name, repos, field, msg string
	}{
		{"bad name", "  - {name: My Repo, origins: [https://h/a]}", "repos[0].name", `"My Repo" is not a repository name`},
		{"name like a file", "  - {name: index.md, origins: [https://h/a]}", "repos[0].name", "is not a repository name"},
		{"name twice", "  - {name: a, origins: [https://h/a]}\n  - {name: a, origins: [https://h/b]}", "repos[1].name", `"a" is already the name of repos[0]`},
		{"nothing named", "  - {name: a}", "repos[0]", "names no repository"},
		{"local origin", "  - {origins: [/srv/git/a.git]}", "repos[0].origins[0]", "is not a remote URL another host could share"},
		{"control characters", "  - {origins: [\"https://h/a\\x1b[31m\"]}", "repos[0].origins[0]", "control or invisible characters"},
		{"origin twice", "  - {origins: [git@h:o/a.git]}\n  - {origins: [https://h/o/a]}", "repos[1].origins[0]", "is the same remote as repos[0].origins[0]"},
		{"unknown host", "  - {paths: [{host: nope, path: ~/a}]}", "repos[0].paths[0].host", `"nope" is not a host of this manifest`},
		{"relative path", "  - {paths: [{host: laptop, path: code/a}]}", "repos[0].paths[0].path", "is not absolute"},
		{"path twice", "  - {paths: [{host: laptop, path: ~/a}]}\n  - {paths: [{host: laptop, path: ~/a/}]}", "repos[1].paths[0]", "laptop:~/a is already repos[0].paths[0]"},
		{"unknown field", "  - {name: a, origin: [https://h/a]}", "repos[0].origin", "unknown field"},
		{"private not a bool", "  - {name: a, origins: [https://h/a], private: yes please}", "repos[0].private", "want true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, head+tc.repos+"\n")
			fe := findError(t, err, "", tc.field)
			if !strings.Contains(fe.Msg, tc.msg) || fe.Hint == "" {
				t.Errorf("%s: %q (hint %q); want %q and a hint", tc.field, fe.Msg, fe.Hint, tc.msg)
			}
		})
	}
	_, err := parse(t, "version: 1\nhosts:\n  - {name: laptop, transport: local, discover: [{root: ~/code, private: maybe}], mirror: {path: ~/m, include: [repo]}}\n")
	if fe := findError(t, err, "laptop", "hosts[0].discover[0].private"); fe.Hint == "" {
		t.Error("no hint")
	}
	_, err = parse(t, "version: 1\nhosts:\n  - {name: laptop, transport: local, discover: [{root: ~/code}], mirror: {path: ~/m, include: [repo]}}\n")
	if fe := findError(t, err, "laptop", "hosts[0].mirror.include[0]"); !strings.Contains(fe.Hint, "repos") {
		t.Errorf("include hint %q; want it to name repos", fe.Hint)
	}
}
