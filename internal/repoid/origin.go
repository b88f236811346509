package repoid

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKey bounds a normalized origin; a longer one is refused.
const MaxKey = 512

// maxRaw bounds the remote URL Normalize looks at.
const maxRaw = 2048

// ErrLocal means the remote is a path on the same machine (or file://),
// which names no repository another host could share.
var ErrLocal = errors.New("a local path, not a remote another host could share")

// schemes are the URL schemes git fetches over that name a host.
var schemes = map[string]bool{
	"ssh": true, "git": true, "http": true, "https": true,
	"git+ssh": true, "ssh+git": true, "ftp": true, "ftps": true,
}

// foldHosts are the hosting services whose repository paths are
// case-insensitive (github.com/Org/Repo and github.com/org/repo are one
// repository there), each under its own name; the other names they
// serve git on map to it (GitHub's SSH over port 443, GitLab's and
// Bitbucket's alternative SSH hosts).
var foldHosts = map[string]string{
	"github.com": "github.com", "www.github.com": "github.com", "ssh.github.com": "github.com",
	"gitlab.com": "gitlab.com", "www.gitlab.com": "gitlab.com", "altssh.gitlab.com": "gitlab.com",
	"bitbucket.org": "bitbucket.org", "www.bitbucket.org": "bitbucket.org", "altssh.bitbucket.org": "bitbucket.org",
}

// Normalize returns the key of a remote URL as git config holds it:
// host/path, the host lowercased, without scheme, user, password, port,
// query, fragment, a trailing ".git" or slashes; one with white space in
// it is refused (the key is shown to every host, Reduce). "git@github.com:org/repo.git",
// "ssh://git@github.com:22/org/repo" and "https://github.com/org/repo/"
// all give "github.com/org/repo". The path keeps its case, but on the
// services of foldHosts (GitHub, GitLab.com, Bitbucket Cloud), whose
// paths are case-insensitive, it is lowercased too and the host is the
// service's own name.
func Normalize(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	switch {
	case s == "":
		return "", errors.New("empty remote URL")
	case len(s) > maxRaw:
		return "", fmt.Errorf("remote URL of %d bytes (at most %d)", len(s), maxRaw)
	case !utf8.ValidString(s):
		return "", errors.New("remote URL is not valid UTF-8")
	case strings.ContainsFunc(s, badRune):
		return "", errors.New("remote URL holds control or invisible characters")
	}
	var host, p string
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		scheme = strings.ToLower(scheme)
		if scheme == "file" {
			return "", ErrLocal
		}
		if !schemes[scheme] {
			return "", fmt.Errorf("unknown URL scheme %q", scheme)
		}
		authority, rest, _ := strings.Cut(rest, "/")
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = authority[i+1:]
		}
		host, p = authority, rest
		if strings.HasPrefix(host, "[") {
			end := strings.IndexByte(host, ']')
			if end < 0 {
				return "", errors.New("unclosed [ in the host")
			}
			host = host[:end+1]
		} else if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
	} else {
		// git's rule: a colon before the first slash makes the
		// scp-like form [user@]host:path; anything else is a path.
		colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
		if colon < 0 || slash >= 0 && slash < colon {
			return "", ErrLocal
		}
		host, p = s[:colon], s[colon+1:]
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		if len(host) == 1 && p != "" && (p[0] == '\\' || p[0] == '/') {
			return "", ErrLocal // a Windows drive, C:\repo or C:/repo
		}
	}
	// A query or fragment names no repository and may carry a token
	// (?private_token=…): it is never part of the key.
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	host = strings.ToLower(host)
	if host == "" || strings.ContainsAny(host, " \\/?#") {
		return "", fmt.Errorf("no host in the remote URL")
	}
	p = strings.ReplaceAll(p, "\\", "/")
	p = strings.Trim(path.Clean("/"+p), "/")
	if canon, ok := foldHosts[host]; ok {
		host, p = canon, strings.ToLower(p)
	}
	p = strings.TrimSuffix(p, ".git")
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		return "", errors.New("no repository path in the remote URL")
	}
	key := host + "/" + p
	if strings.ContainsFunc(key, unicode.IsSpace) {
		return "", errors.New("remote URL holds white space")
	}
	if len(key) > MaxKey {
		return "", fmt.Errorf("remote URL normalizes to %d bytes (at most %d)", len(key), MaxKey)
	}
	return key, nil
}

// badRune reports runes no remote URL should hold: control characters,
// format characters (bidirectional and zero-width ones among them) and
// spaces other than the plain one.
func badRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r != ' ' && unicode.IsSpace(r) || r == utf8.RuneError
}

// Reduce is a key as it may be shown to other hosts: a key an earlier
// version stored is cut at a query or fragment (and a trailing ".git"),
// and one with a user, white space or a control or format character is
// dropped ("").
func Reduce(key string) string {
	if i := strings.IndexAny(key, "?#"); i >= 0 {
		key = strings.TrimSuffix(strings.TrimRight(key[:i], "/"), ".git")
	}
	host, _, _ := strings.Cut(key, "/")
	if key == "" || strings.Contains(host, "@") || !strings.Contains(key, "/") ||
		!utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return badRune(r) || unicode.IsSpace(r) }) {
		return ""
	}
	return key
}
