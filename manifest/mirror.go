package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// What a mirror can include.
const (
	MirrorCards     = "cards"
	MirrorDocuments = "documents"
)

// DefaultMirrorInclude returns what a mirror holds when include is left
// out: cards and documents. Repos is never a default: a host's mirror
// holds repos/ only when its include asks for it.
func DefaultMirrorInclude() []string { return []string{MirrorCards, MirrorDocuments} }

// Mirror configures the read-only copy of canonical memory that handoff
// keeps on a host (see docs/mirror.md). In the manifest it is a mapping,
// {path: ~/.openclaw/mirror, include: [cards, documents]}, or false, which
// turns off for one host a mirror the defaults configure.
type Mirror struct {
	// Path is the mirror directory on the host, absolute or starting
	// with "~/".
	Path string `json:"path"`
	// Include lists what is mirrored: cards, documents, repos (each
	// repository's recent handoffs), or some of them.
	Include []string `json:"include,omitempty"`
	// Off is set by "mirror: false".
	Off bool `json:"-"`
}

// UnmarshalJSON accepts false or a mapping with path and include only.
func (m *Mirror) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "false":
		*m = Mirror{Off: true}
		return nil
	case "true":
		return errors.New("mirror: true says nowhere to put the mirror; give a mapping with a path, or false")
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("want a mapping such as {path: ~/.openclaw/mirror} or false")
	}
	type plain Mirror
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("%s (known fields here: include, path)", strings.TrimPrefix(err.Error(), "json: "))
	}
	*m = Mirror(p)
	return nil
}

// MarshalJSON writes false for a mirror that is off.
func (m Mirror) MarshalJSON() ([]byte, error) {
	if m.Off {
		return []byte("false"), nil
	}
	type plain Mirror
	return json.Marshal(plain(m))
}

// MirrorConfig is a host's mirror with its settings resolved.
type MirrorConfig struct {
	// Path keeps its "~"; expand it with [ExpandHome].
	Path    string
	Include []string
}

// Includes reports whether the mirror holds what (MirrorCards,
// MirrorDocuments or MirrorRepos).
func (c *MirrorConfig) Includes(what string) bool {
	return c != nil && slices.Contains(c.Include, what)
}

// effectiveMirror resolves a host's mirror: its own block, else the
// defaults' for an ssh host (a local host's workspace is the truth, so it
// gets a mirror only from its own block). Nil means no mirror.
func effectiveMirror(h Host, d *Mirror) *MirrorConfig {
	m := h.Mirror
	if m == nil && h.Transport == TransportSSH {
		m = d
	}
	if m == nil || m.Off || m.Path == "" {
		return nil
	}
	inc := m.Include
	if len(inc) == 0 {
		inc = DefaultMirrorInclude()
	}
	return &MirrorConfig{Path: m.Path, Include: slices.Clone(inc)}
}

// mirror checks a mirror block at field path at; inboxes are the host's
// cleaned inbox paths (nil for the defaults block).
func (v *validator) mirror(name, at string, m *Mirror, inboxes []string) {
	if m == nil || m.Off {
		return
	}
	if m.Path == "" {
		v.report(FieldError{Host: name, Field: at + ".path", Msg: "is missing",
			Hint: "set mirror.path, such as ~/.openclaw/mirror, or write mirror: false"})
	} else if p, ok := v.path(name, at+".path", m.Path); ok {
		m.Path = p
		v.mirrorPath(name, at+".path", p, inboxes)
	}
	seen := map[string]bool{}
	if m.Include != nil && len(m.Include) == 0 {
		v.report(FieldError{Host: name, Field: at + ".include", Msg: "is an empty list",
			Hint: "list cards, documents, repos, or some of them; or leave include out for cards and documents"})
	}
	for i, what := range m.Include {
		field := fmt.Sprintf("%s.include[%d]", at, i)
		switch {
		case what != MirrorCards && what != MirrorDocuments && what != MirrorRepos:
			v.report(FieldError{Host: name, Field: field, Value: what, Msg: fmt.Sprintf("%q is not something a mirror holds", what),
				Hint: "list cards, documents, repos, or some of them"})
		case seen[what]:
			v.report(FieldError{Host: name, Field: field, Value: what, Msg: fmt.Sprintf("%q is listed twice", what), Hint: "remove the duplicate"})
		}
		seen[what] = true
	}
}

// mirrorPath refuses a mirror path that would put handoff's writes where
// they do not belong: the root, a home directory itself, or an inbox.
// Whether the path is the login's home, or above it, is known only once
// the host is reached; the mirror checks that itself.
func (v *validator) mirrorPath(name, field, p string, inboxes []string) {
	hint := "use a directory of its own, such as ~/.openclaw/mirror"
	switch {
	case p == "~" || p == "/":
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q would make the mirror own a whole tree", p), Hint: hint})
		return
	case slices.Contains(strings.Split(p, "/"), "memory-handoffs"):
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q is inside a memory-handoffs inbox", p), Hint: hint})
		return
	case looksLikeHome(p):
		v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q is a home directory", p), Hint: hint})
		return
	}
	for _, in := range inboxes {
		if in == p || strings.HasPrefix(in, p+"/") || strings.HasPrefix(p, in+"/") {
			v.report(FieldError{Host: name, Field: field, Value: p, Msg: fmt.Sprintf("%q overlaps the inbox %q", p, in), Hint: hint})
			return
		}
	}
}

// looksLikeHome reports whether an absolute path is a conventional home
// directory or the directory of homes: /home, /home/NAME, /Users/NAME,
// /root.
func looksLikeHome(p string) bool {
	dir, base := path.Split(p)
	switch {
	case p == "/root" || p == "/home" || p == "/Users":
		return true
	case dir == "/home/" || dir == "/Users/":
		return base != ""
	}
	return false
}
