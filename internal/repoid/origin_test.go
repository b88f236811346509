package repoid

import (
	"errors"
	"strings"
	"testing"
)

// TestNormalize: the spellings of one remote give one key; what names no
// shared remote, or could smuggle control characters or credentials into
// a mirror, gives none.
func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"git@github.com:handoff-sync/handoff.git", "github.com/handoff-sync/handoff"},
		{"https://github.com/handoff-sync/handoff", "github.com/handoff-sync/handoff"},
		{"https://github.com/handoff-sync/handoff/", "github.com/handoff-sync/handoff"},
		{"https://github.com/handoff-sync/handoff.git/", "github.com/handoff-sync/handoff"},
		{"ssh://git@GitHub.COM:22/handoff-sync/handoff.git", "github.com/handoff-sync/handoff"},
		{"git+ssh://git@github.com/handoff-sync/handoff", "github.com/handoff-sync/handoff"},
		{"HTTPS://me:s3cret@github.com/handoff-sync/handoff", "github.com/handoff-sync/handoff"},
		{"  git://github.com//handoff-sync///handoff  ", "github.com/handoff-sync/handoff"},
		{"github.com:handoff-sync/handoff", "github.com/handoff-sync/handoff"},
		{"ssh://git@gitlab.example.com:2222/group/sub/app.git", "gitlab.example.com/group/sub/app"},
		{"https://gitlab.example.com/group/sub/app", "gitlab.example.com/group/sub/app"},
		{"ssh://[2001:DB8::1]:22/srv/app.git", "[2001:db8::1]/srv/app"},
		{"git@host:~me/app.git", "host/~me/app"},
		{"https://host/a/../b", "host/b"},
		{"https://host/Org/App", "host/Org/App"}, // the path keeps its case
		// Invariant: on case-insensitive hosting services the spellings
		// of one repository give one key (issue 48, item 13), also
		// through their alternative SSH hosts; elsewhere case counts.
		{"ssh://git@github.com:22/Org/Repo.GIT", "github.com/org/repo"},
		{"github.com:org/repo", "github.com/org/repo"},
		{"ssh://git@ssh.github.com:443/Org/repo.git", "github.com/org/repo"},
		{"https://www.GitHub.com/ORG/Repo", "github.com/org/repo"},
		{"git@gitlab.com:Group/Sub/App.git", "gitlab.com/group/sub/app"},
		{"ssh://git@altssh.gitlab.com:443/group/sub/app.git", "gitlab.com/group/sub/app"},
		{"https://bitbucket.org/Team/Repo", "bitbucket.org/team/repo"},
		{"ssh://git@altssh.bitbucket.org:443/team/repo.git", "bitbucket.org/team/repo"},
		{"https://gitlab.example.com/Group/App", "gitlab.example.com/Group/App"},
		{"https://github.example.com/Org/App", "github.example.com/Org/App"},
	} {
		got, err := Normalize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in    string
		local bool
	}{
		{"", false},
		{"/srv/git/app.git", true},
		{"../app.git", true},
		{"./a:b", true},
		{"file:///srv/git/app.git", true},
		{"FILE://host/srv/app", true},
		{`C:\repos\app`, true},
		{"C:/repos/app", true},
		{"https://github.com/", false},
		{"https://github.com", false},
		{"git@github.com:", false},
		{"https:///org/app", false},
		{"gopher://host/app", false},
		{"https://host/a\x00b", false},
		{"https://host/a\x1b[31mred", false},
		{"https://host/a\u202eb", false},
		{"https://host/a\u200bb", false},
		{"https://host/a\nb", false},
		{"https://host/a\tb", false},
		{"https://host/\xff\xfe", false},
		{"https://[::1/app", false},
		{"https://host/" + strings.Repeat("a", 600), false},
		{strings.Repeat("x", 5000), false},
	} {
		got, err := Normalize(tc.in)
		if err == nil {
			t.Errorf("Normalize(%q) = %q; want an error", tc.in, got)
			continue
		}
		if errors.Is(err, ErrLocal) != tc.local {
			t.Errorf("Normalize(%q): %v; local %v", tc.in, err, tc.local)
		}
	}
}

// TestOriginURL reads the origin's url from git config text as git would.
func TestOriginURL(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"git's own", "[core]\n\trepositoryformatversion = 0\n[remote \"origin\"]\n\turl = git@github.com:a/b.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", "git@github.com:a/b.git"},
		{"another remote first", "[remote \"upstream\"]\n\turl = https://x/up\n[remote \"origin\"]\n\turl = https://x/mine\n", "https://x/mine"},
		{"case of names", "[REMOTE \"origin\"]\n\tURL = https://x/a\n", "https://x/a"},
		{"subsection is case-sensitive", "[remote \"Origin\"]\n\turl = https://x/a\n", ""},
		{"old dotted form", "[remote.origin]\nurl=https://x/a\n", "https://x/a"},
		{"quoted with a comment", "[remote \"origin\"]\n  url = \"https://x/a b\" # mine\n", "https://x/a b"},
		{"comment after", "[remote \"origin\"]\nurl = https://x/a ; old\n", "https://x/a"},
		{"continued line", "[remote \"origin\"]\nurl = https://x/\\\nrepo\n", "https://x/repo"},
		{"first url wins", "[remote \"origin\"]\nurl = https://x/1\nurl = https://x/2\n", "https://x/1"},
		{"pushurl is not url", "[remote \"origin\"]\npushurl = https://x/p\n", ""},
		{"commented out", "[remote \"origin\"]\n# url = https://x/a\n", ""},
		{"header and key on one line", "[remote \"origin\"] url = https://x/a\n", "https://x/a"},
		{"another section after", "[remote \"origin\"]\n[core]\nurl = https://x/a\n", ""},
		{"broken header", "[remote \"origin\"\nurl = https://x/a\n", ""},
		{"CRLF", "[remote \"origin\"]\r\n\turl = https://x/a\r\n", "https://x/a"},
		{"escapes", "[remote \"origin\"]\nurl = \"https://x/a\\\"b\"\n", "https://x/a\"b"},
	} {
		got, _ := originURL(tc.cfg)
		if got != tc.want {
			t.Errorf("%s: origin %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestNormalizeDropsQuery: the key of a remote is shown to every host, so
// it holds no query, fragment or white space. Invariant: a token in a
// remote's query (?private_token=glpat-…) never reaches the key, the
// slug, INDEX.md or RECENT.md.
func TestNormalizeDropsQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"https://gitlab.com/acme/app.git?private_token=glpat-abcdefghijklmnop": "gitlab.com/acme/app",
		"https://gitlab.com/acme/app#frag":                                     "gitlab.com/acme/app",
		"https://user:pw@gitlab.com/acme/app.git?x=1#y":                        "gitlab.com/acme/app",
		"git@github.com:acme/app.git?t=1":                                      "github.com/acme/app",
	} {
		if got, err := Normalize(raw); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
	for _, raw := range []string{"https://github.com/acme/my app", "https://github.com?x/acme/app"} {
		if got, err := Normalize(raw); err == nil {
			t.Errorf("Normalize(%q) = %q; want an error", raw, got)
		}
	}
	for key, want := range map[string]string{
		"gitlab.com/acme/app.git?private_token=glpat-x": "gitlab.com/acme/app",
		"github.com/acme/app":                           "github.com/acme/app",
		"github.com/acme/my app":                        "",
		"github.com/acme/\u200bapp":                     "",
	} {
		if got := Reduce(key); got != want {
			t.Errorf("Reduce(%q) = %q; want %q", key, got, want)
		}
	}
}
