package manifest

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/handoff-sync/handoff/internal/repoid"
)

// MirrorRepos is what a mirror includes to hold repos/: each repository's
// recent handoffs from every host (docs/mirror.md). A mirror includes it
// only when its include list says so; the default include does not.
const MirrorRepos = "repos"

// Repo is one entry of the manifest's top-level repos list: a name for a
// repository, the origins and paths that are that repository, and
// whether it is private to the hosts it is on.
//
//	repos:
//	  - name: handoff
//	    origins: [git@github.com:handoff-sync/handoff.git]
//	  - name: notes
//	    paths: [{host: laptop, path: ~/notes}, {host: vps, path: /srv/notes}]
//	  - origins: [git@github.com:acme/client.git]
//	    private: true
type Repo struct {
	// Name is the repository's slug in the mirror (repos/<name>/); ""
	// lets handoff derive one.
	Name string `json:"name,omitempty"`
	// Origins are remote URLs that are this repository, normalized by
	// validation (repoid.Normalize): clones whose origin is one of them
	// are this repository.
	Origins []string `json:"origins,omitempty"`
	// Paths are repositories on given hosts that are this one, for
	// clones without an origin (or with another one).
	Paths []RepoPath `json:"paths,omitempty"`
	// Private keeps the repository's handoffs on the host each was
	// written on: none is published to another host's mirror.
	Private bool `json:"private,omitempty"`
}

// RepoPath is a repository directory on one host.
type RepoPath struct {
	Host string `json:"host"`
	// Path is a host path, in path.Clean form, possibly starting with
	// "~" (the host login's home).
	Path string `json:"path"`
}

// slugRE is what a repository's name may be: it names a directory of
// every mirror, so it is short, lowercase and plain.
var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// IsRepoSlug reports whether s may name a repository in the mirror:
// 1 to 63 lowercase letters, digits, dots, dashes or underscores,
// starting with a letter or digit, and not ending in .md or .json (which
// repos/ keeps for its own files).
func IsRepoSlug(s string) bool {
	return slugRE.MatchString(s) && !strings.HasSuffix(s, ".md") && !strings.HasSuffix(s, ".json")
}

// RepoFor returns the index of the repos entry that a repository found
// on host at dir (an absolute host path) with the normalized origin is,
// or -1. home is the host login's home, for paths written with "~"
// ("" when unknown: such paths then match nothing). A path entry wins
// over an origin entry: it names this very clone.
func (m *Manifest) RepoFor(host, dir, home, origin string) int {
	for i, r := range m.Repos {
		for _, p := range r.Paths {
			if p.Host == host && expandKnown(p.Path, home) == dir {
				return i
			}
		}
	}
	if origin == "" {
		return -1
	}
	for i, r := range m.Repos {
		for _, o := range r.Origins {
			if o == origin {
				return i
			}
		}
	}
	return -1
}

// KeepsPrivate reports whether anything in the manifest is private: a
// discover root of a host, or a repos entry. Without either, no handoff
// is private, and nothing needs withholding.
func (m *Manifest) KeepsPrivate() bool {
	for _, h := range m.HostConfigs() {
		for _, d := range h.Discover {
			if d.Private {
				return true
			}
		}
	}
	for _, r := range m.Repos {
		if r.Private {
			return true
		}
	}
	return false
}

// PrivateAt reports whether an inbox on the host lies under one of its
// private discover roots. home is the host login's home; when it is
// unknown, a root written with "~" is taken to hold the inbox, so that
// nothing private is published for want of knowing where it is.
func (c HostConfig) PrivateAt(inbox, home string) bool {
	for _, d := range c.Discover {
		if !d.Private {
			continue
		}
		root := expandKnown(d.Root, home)
		if strings.HasPrefix(root, "~") || inbox == root || strings.HasPrefix(inbox, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// expandKnown is ExpandHome, and path.Clean of the result.
func expandKnown(p, home string) string {
	p = ExpandHome(p, home)
	if strings.HasPrefix(p, "~") {
		return p
	}
	return path.Clean(p)
}

// repos checks the top-level repos list: names are slugs and unique,
// every entry names an origin or a path, origins normalize and belong to
// one entry, paths are host paths on hosts of the manifest, each named
// once.
func (v *validator) repos(m *Manifest) {
	names := map[string]int{}
	origins := map[string]string{}
	paths := map[RepoPath]string{}
	hostNames := map[string]bool{}
	for _, h := range m.Hosts {
		hostNames[h.Name] = true
	}
	for i := range m.Repos {
		r := &m.Repos[i]
		at := fmt.Sprintf("repos[%d]", i)
		if r.Name != "" {
			if !IsRepoSlug(r.Name) {
				v.report(FieldError{Field: at + ".name", Value: r.Name, Msg: fmt.Sprintf("%q is not a repository name", r.Name),
					Hint: "use 1 to 63 lowercase letters, digits, dots, dashes or underscores, starting with a letter or digit (not ending in .md or .json)"})
			} else if j, ok := names[r.Name]; ok {
				v.report(FieldError{Field: at + ".name", Value: r.Name, Msg: fmt.Sprintf("%q is already the name of repos[%d]", r.Name, j),
					Hint: "give every repository a different name; list all of one repository's origins and paths in one entry"})
			} else {
				names[r.Name] = i
			}
		}
		if len(r.Origins) == 0 && len(r.Paths) == 0 {
			v.report(FieldError{Field: at, Msg: "names no repository",
				Hint: "list the repository's origin remote under origins:, or its directory under paths: as {host: NAME, path: DIR}"})
		}
		for j, o := range r.Origins {
			field := fmt.Sprintf("%s.origins[%d]", at, j)
			key, err := repoid.Normalize(o)
			if err != nil {
				v.report(FieldError{Field: field, Value: o, Msg: fmt.Sprintf("%q is not a remote URL another host could share: %v", o, err),
					Hint: "write the URL `git remote get-url origin` prints, such as git@github.com:org/repo.git or https://github.com/org/repo"})
				continue
			}
			if prev, ok := origins[key]; ok {
				v.report(FieldError{Field: field, Value: o, Msg: fmt.Sprintf("%q is the same remote as %s", o, prev),
					Hint: "a remote belongs to one repository entry; remove the duplicate"})
				continue
			}
			origins[key] = field
			r.Origins[j] = key
		}
		for j := range r.Paths {
			p := &r.Paths[j]
			field := fmt.Sprintf("%s.paths[%d]", at, j)
			switch {
			case p.Host == "":
				v.report(FieldError{Field: field + ".host", Msg: "is missing", Hint: "name the host the repository is on, as in hosts:"})
			case !hostNames[p.Host]:
				v.report(FieldError{Field: field + ".host", Value: p.Host, Msg: fmt.Sprintf("%q is not a host of this manifest", p.Host),
					Hint: "use a name from hosts:"})
			}
			if p.Path == "" {
				v.report(FieldError{Field: field + ".path", Msg: "is missing", Hint: "give the repository's directory on that host, such as ~/code/notes"})
				continue
			}
			cleaned, ok := v.path("", field+".path", p.Path)
			if !ok {
				continue
			}
			p.Path = cleaned
			key := RepoPath{Host: p.Host, Path: cleaned}
			if prev, ok := paths[key]; ok {
				v.report(FieldError{Field: field, Value: cleaned, Msg: fmt.Sprintf("%s:%s is already %s", p.Host, cleaned, prev),
					Hint: "a directory belongs to one repository entry; remove the duplicate"})
				continue
			}
			paths[key] = field
		}
	}
}
