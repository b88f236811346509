package manifest

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Limits enforced by validation.
const (
	maxMaxDepth    = 16
	maxMaxFileSize = 64 * MiB
	maxTimeout     = 24 * time.Hour
	// maxReviewMaxAge bounds defaults.review_max_age.
	maxReviewMaxAge = 365 * 24 * time.Hour
	// minBackupsKeep bounds backups.keep: sync applies it once a day, and
	// a unit misread (1m taken for a month) must not take a person's undo
	// minutes after the change.
	minBackupsKeep = 24 * time.Hour
)

var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validator checks a decoded manifest, collecting every problem. It also
// cleans the paths it checks and expands the local ones against home.
type validator struct {
	file string
	home string
	// defMirror is the defaults' mirror, checked against each ssh host's
	// inboxes too.
	defMirror *Mirror
	homeErr   error // from os.UserHomeDir
	errs      []error
}

func (v *validator) report(e FieldError) {
	e.File = v.file
	v.errs = append(v.errs, &e)
}

func (v *validator) manifest(m *Manifest) {
	if m.Version != 1 {
		msg := fmt.Sprintf("%d is not supported; the only version is 1", m.Version)
		if m.Version == 0 {
			msg = "is missing"
		}
		v.report(FieldError{Field: "version", Value: valueOf(m.Version), Msg: msg, Hint: "put \"version: 1\" at the top of the file"})
	}

	if m.Workspace == "" {
		m.Workspace = DefaultWorkspace
	}
	m.WorkspaceRaw = m.Workspace
	if p, ok := v.path("", "workspace", m.Workspace); ok {
		m.WorkspaceRaw = p
		m.Workspace = v.local("", "workspace", p)
	}

	d := &m.Defaults
	v.settings("", "defaults", d.Harnesses, d.MaxDepth, d.MaxFileSize, d.Timeout)
	v.mirror("", "defaults.mirror", d.Mirror, nil)
	v.defMirror = d.Mirror
	v.staleAfter("", "defaults", d.StaleAfter)
	if a := d.ReviewMaxAge; a != nil && (a.Duration <= 0 || a.Duration > maxReviewMaxAge) {
		v.report(FieldError{Field: "defaults.review_max_age", Value: a.String(),
			Msg: fmt.Sprintf("%s is out of range: must be more than 0 and at most 365d", a), Hint: "use a duration such as 7d"})
	}

	if u := m.Notify.PingURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.report(FieldError{Field: "notify.ping_url", Value: u, Msg: fmt.Sprintf("%q is not an http or https URL", u),
				Hint: "use the full ping URL, such as https://hc-ping.com/<uuid>"})
		}
	}

	for _, f := range []struct {
		name string
		d    *Duration
	}{{"receipts.keep", m.Receipts.Keep}, {"receipts.keep_idle", m.Receipts.KeepIdle}} {
		if f.d != nil && f.d.Duration != 0 && f.d.Duration < time.Hour {
			v.report(FieldError{Field: f.name, Value: f.d.String(),
				Msg: fmt.Sprintf("%s is out of range: must be 0 (keep every receipt) or at least 1h", f.d), Hint: "use a duration such as 90d"})
		}
	}

	if k := m.Backups.Keep; k != nil && k.Duration != 0 && k.Duration < minBackupsKeep {
		v.report(FieldError{Field: "backups.keep", Value: k.String(),
			Msg:  fmt.Sprintf("%s is out of range: must be 0 (keep every backup) or at least 1d", k),
			Hint: "a backup is a person's undo: use a duration such as 90d, or 0 to keep them all"})
	}

	switch m.OpenClaw.Layout {
	case "", "auto", "2026.9", "pre-2026.9":
	default:
		v.report(FieldError{Field: "openclaw.layout", Value: m.OpenClaw.Layout, Msg: fmt.Sprintf("%q is not a layout", m.OpenClaw.Layout),
			Hint: "use auto (the default: detected from the workspace and OpenClaw's config), 2026.9 or pre-2026.9"})
	}

	if len(m.Hosts) == 0 {
		v.report(FieldError{Field: "hosts", Msg: "no hosts are listed", Hint: "add at least one host under hosts:"})
	}
	seen := make(map[string]int)
	for i := range m.Hosts {
		h := &m.Hosts[i]
		if j, ok := seen[h.Name]; ok && h.Name != "" {
			v.report(FieldError{Host: h.Name, Field: fmt.Sprintf("hosts[%d].name", i), Value: h.Name,
				Msg: fmt.Sprintf("%q is already the name of hosts[%d]", h.Name, j), Hint: "give every host a different name"})
		} else {
			seen[h.Name] = i
		}
		v.host(i, h)
	}
	v.repos(m)
}

// host checks hosts[i].
func (v *validator) host(i int, h *Host) {
	at := fmt.Sprintf("hosts[%d]", i)
	name := h.Name
	switch {
	case name == "":
		v.report(FieldError{Field: at + ".name", Msg: "is missing", Hint: "give the host a name such as laptop"})
	case !hostNameRE.MatchString(name):
		v.report(FieldError{Host: name, Field: at + ".name", Value: name, Msg: fmt.Sprintf("%q is not a valid host name", name),
			Hint: "use 1 to 63 letters, digits, dots, dashes or underscores, starting with a letter or digit"})
	}

	switch h.Transport {
	case TransportLocal:
		if h.SSH != nil {
			v.report(FieldError{Host: name, Field: at + ".ssh", Msg: "a local host takes no ssh block", Hint: "remove the ssh block, or set transport: ssh"})
		}
	case TransportSSH:
		v.ssh(name, at+".ssh", h)
	case "":
		v.report(FieldError{Host: name, Field: at + ".transport", Msg: "is missing", Hint: "set transport: local or transport: ssh"})
	default:
		v.report(FieldError{Host: name, Field: at + ".transport", Value: h.Transport, Msg: fmt.Sprintf("%q is not a transport", h.Transport),
			Hint: "set transport: local or transport: ssh"})
	}

	v.settings(name, at, h.Harnesses, h.MaxDepth, h.MaxFileSize, h.Timeout)
	v.staleAfter(name, at, h.StaleAfter)

	if len(h.Inboxes) == 0 && len(h.Discover) == 0 {
		v.report(FieldError{Host: name, Field: at, Msg: "has no inboxes and no discover roots",
			Hint: "list a memory-handoffs directory under inboxes:, or a directory to search under discover:"})
	}
	inboxes := make(map[string]bool)
	for j, p := range h.Inboxes {
		field := fmt.Sprintf("%s.inboxes[%d]", at, j)
		p, ok := v.path(name, field, p)
		if !ok {
			continue
		}
		h.Inboxes[j] = p
		switch {
		case path.Base(p) != "memory-handoffs":
			v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q is not a memory-handoffs directory", p),
				Hint: "an inbox is the memory-handoffs directory itself, such as ~/repo/.claude/memory-handoffs; to search a tree for inboxes, list it under discover:"})
		case inboxes[p]:
			v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q is listed twice", p), Hint: "remove the duplicate"})
		}
		inboxes[p] = true
	}
	roots := make(map[string]bool)
	for j := range h.Discover {
		r := &h.Discover[j]
		field := fmt.Sprintf("%s.discover[%d]", at, j)
		if p, ok := v.path(name, field+".root", r.Root); ok {
			r.Root = p
			if roots[p] {
				v.report(FieldError{Host: name, Field: field + ".root", Value: p, Msg: fmt.Sprintf("%q is listed twice", p), Hint: "remove the duplicate"})
			}
			roots[p] = true
		}
		v.maxDepth(name, field+".max_depth", r.MaxDepth)
	}
	v.mirror(name, at+".mirror", h.Mirror, h.Inboxes)
	if d := v.defMirror; h.Mirror == nil && h.Transport == TransportSSH && d != nil && !d.Off && d.Path != "" {
		v.mirrorPath(name, "defaults.mirror.path", d.Path, h.Inboxes)
	}
}

// ssh checks the ssh block of host h at field path at, and expands its
// local paths.
func (v *validator) ssh(name, at string, h *Host) {
	s := h.SSH
	if s == nil || s.Host == "" {
		v.report(FieldError{Host: name, Field: at + ".host", Msg: "is missing; an ssh host needs one",
			Hint: "set ssh.host to a host name, an address or an alias from ~/.ssh/config"})
		if s == nil {
			return
		}
	} else if strings.ContainsFunc(s.Host, func(r rune) bool { return r <= ' ' || r == '@' || r == 0x7f }) {
		v.report(FieldError{Host: name, Field: at + ".host", Value: s.Host, Msg: fmt.Sprintf("%q is not a host name", s.Host),
			Hint: "write only the host name or alias; put the login name in ssh.user"})
	}
	if s.Port < 0 || s.Port > 65535 {
		v.report(FieldError{Host: name, Field: at + ".port", Value: valueOf(s.Port), Msg: fmt.Sprintf("%d is out of range 1-65535", s.Port),
			Hint: "use the server's port, or leave port out to use ssh_config's or 22"})
	}
	for _, f := range []struct {
		name string
		p    *string
	}{{"identity_file", &s.IdentityFile}, {"known_hosts", &s.KnownHosts}} {
		if *f.p == "" {
			continue
		}
		if p, ok := v.path(name, at+"."+f.name, *f.p); ok {
			*f.p = v.local(name, at+"."+f.name, p)
		}
	}
	if s.ConnectTimeout != nil && s.ConnectTimeout.Duration == 0 {
		v.report(FieldError{Host: name, Field: at + ".connect_timeout", Value: "0s", Msg: "must be more than 0",
			Hint: "use a duration such as 10s, or leave it out"})
	}
}

// settings checks the settings a host shares with the defaults block.
// (Settle needs no check: ParseDuration refuses negative durations.)
func (v *validator) settings(name, at string, harnesses []string, maxDepth *int, size *Size, timeout *Duration) {
	if harnesses != nil && len(harnesses) == 0 {
		v.report(FieldError{Host: name, Field: at + ".harnesses", Msg: "is an empty list",
			Hint: "list harness directories such as .claude, or leave harnesses out to use the defaults"})
	}
	seen := make(map[string]bool)
	for i, hn := range harnesses {
		field := fmt.Sprintf("%s.harnesses[%d]", at, i)
		switch {
		case len(hn) < 2 || hn[0] != '.' || hn == ".." || strings.ContainsAny(hn, "/\\\x00"):
			v.report(FieldError{Host: name, Field: field, Value: hn, Msg: fmt.Sprintf("%q is not a harness directory name", hn),
				Hint: "a harness is one directory name starting with a dot, such as .claude"})
		case seen[hn]:
			v.report(FieldError{Host: name, Field: field, Value: hn, Msg: fmt.Sprintf("%q is listed twice", hn), Hint: "remove the duplicate"})
		}
		seen[hn] = true
	}
	v.maxDepth(name, at+".max_depth", maxDepth)
	if size != nil && (*size < 1 || *size > maxMaxFileSize) {
		v.report(FieldError{Host: name, Field: at + ".max_file_size", Value: size.String(),
			Msg: fmt.Sprintf("%s is out of range 1B-%s", size, maxMaxFileSize), Hint: "handoffs are small; 1MiB is the default"})
	}
	if timeout != nil && (timeout.Duration <= 0 || timeout.Duration > maxTimeout) {
		v.report(FieldError{Host: name, Field: at + ".timeout", Value: timeout.String(),
			Msg: fmt.Sprintf("%s is out of range: must be more than 0 and at most 24h", timeout), Hint: "use a duration such as 5m"})
	}
}

// staleAfter checks stale_after: 0 (off) or at least an hour, so that a
// unit slip (1m) does not make doctor warn about every host.
func (v *validator) staleAfter(name, at string, d *Duration) {
	if d != nil && d.Duration != 0 && d.Duration < minStaleAfter {
		v.report(FieldError{Host: name, Field: at + ".stale_after", Value: d.String(),
			Msg: fmt.Sprintf("%s is too short: must be 0 (off) or at least 1h", d), Hint: "use a duration such as 168h or 7d (the default), or 0 to turn the check off"})
	}
}

// minStaleAfter is the shortest stale_after other than 0.
const minStaleAfter = time.Hour

func (v *validator) maxDepth(name, field string, d *int) {
	if d != nil && (*d < 0 || *d > maxMaxDepth) {
		v.report(FieldError{Host: name, Field: field, Value: valueOf(*d), Msg: fmt.Sprintf("%d is out of range 0-%d", *d, maxMaxDepth),
			Hint: "max_depth counts directory levels below the root (the root is 0); 3 is the default"})
	}
}

// path checks a path that must be absolute or start with "~", and returns
// it cleaned. A path that cleans to something else, such as "~/../x", is
// an error.
func (v *validator) path(name, field, p string) (string, bool) {
	hint := "write an absolute path, or one starting with ~/ for the login's home directory"
	switch {
	case p == "":
		v.report(FieldError{Host: name, Field: field, Msg: "is empty", Hint: hint + " (a bare ~ in YAML means null; quote it)"})
		return "", false
	case strings.ContainsRune(p, 0):
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: "contains a NUL byte", Hint: hint})
		return "", false
	}
	c := path.Clean(p)
	if !path.IsAbs(c) && c != "~" && !strings.HasPrefix(c, "~/") {
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q is not absolute and does not start with ~/", p), Hint: hint})
		return "", false
	}
	return c, true
}

// local expands a cleaned path against the local home directory.
func (v *validator) local(name, field, p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return filepath.FromSlash(p)
	}
	if v.homeErr != nil || v.home == "" {
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: "cannot expand ~: the home directory is unknown",
			Hint: "set $HOME, or write an absolute path"})
		return p
	}
	return filepath.FromSlash(ExpandHome(p, filepath.ToSlash(v.home)))
}

func valueOf(n int) string { return strconv.Itoa(n) }
