package ingest

import (
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The continuity sections (Open questions, Next steps, Continues) carry a
// repository's working context from one agent to the next, on any host:
// the mirror's repos/ shows them (docs/mirror.md). They never change how
// a handoff is routed and never enter a card or a document.

// WarnContinuesUnclear is the code of a lint warning: a Continues section
// that names no handoff `where` or repos/ could follow.
const WarnContinuesUnclear = "continues-unclear"

// maxContinuesKey bounds a thread key: a file name is at most 255 bytes.
const maxContinuesKey = 255

// maxThreadHandoff bounds a handoff ThreadKey parses: a handoff is at most
// the manifest's max_file_size (64 MiB at the most).
const maxThreadHandoff = 64 << 20

// continuesRE finds a Continues heading, as the parser reads one.
var continuesRE = regexp.MustCompile(`(?im)^##[ \t]+continues[ \t\r]*$`)

// ThreadKey is the thread key of a stored handoff's bytes: the key
// (ContinuesKey) of the earlier handoff its Continues section names; ""
// when it names none, or data is no handoff or too big for one.
func ThreadKey(data []byte) string {
	// Most handoffs continue nothing: skip the parse for them.
	if len(data) > maxThreadHandoff || !continuesRE.Match(data) {
		return ""
	}
	h, err := Parse(data)
	if err != nil {
		return ""
	}
	return ContinuesKey(h.Continues)
}

// threadKeyOf is ThreadKey of the bytes h was parsed from. Most
// handoffs have no Continues section, and for them the key is "" without
// a look at the bytes.
func threadKeyOf(h *Handoff) string {
	if h.Continues == "" || len(h.raw) > maxThreadHandoff || !continuesRE.MatchString(h.raw) {
		return ""
	}
	return ContinuesKey(h.Continues)
}

// ContinuesKey returns the key by which a Continues section names the
// earlier handoff: a SHA-256 or its start (4 to 64 hex digits),
// lowercased, or a file name as found in an inbox or archived there
// (<stem>.md, <stem>.<sha12>.md), without any directory and with ".md"
// added when it was left off. Backticks or quotes around it and a "- "
// list marker are dropped; only the first line counts. "" when the
// section names nothing usable.
func ContinuesKey(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(listMarkerRE.ReplaceAllString(line, ""))
	line = strings.Trim(line, "`\"' ")
	if line == "" || !utf8.ValidString(line) || strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return ""
	}
	// Every kind of space, and what draws nothing, is refused like the
	// ASCII space: "a\u00a0b.md" or "a\u200bb.md" would name a handoff
	// that reads as another one.
	if strings.ContainsFunc(line, blankInKey) {
		return ""
	}
	if i := strings.LastIndexByte(line, '/'); i >= 0 {
		line = line[i+1:]
	}
	if isHex(line) && len(line) >= 4 && len(line) <= 64 {
		return strings.ToLower(line)
	}
	if strings.ContainsAny(line, " \t") || line == "." || line == ".." || strings.HasPrefix(line, ".") {
		return ""
	}
	if !strings.HasSuffix(line, ".md") {
		line += ".md"
	}
	if len(line) > maxContinuesKey {
		return ""
	}
	return line
}

// blankInKey reports whether r is a space or separator of any kind, a
// control or format character (zero-width spaces and joiners, bidi
// controls), or a filler that draws nothing: none may be in a thread key.
// Combining marks are allowed, since a name may hold an accented letter.
func blankInKey(r rune) bool {
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800', '\u034f':
		return true
	}
	return unicode.IsSpace(r) || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp, unicode.Cc, unicode.Cf) || isVariationSelector(r)
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// ContinuityWarnings are lint's notes on the continuity sections: they
// never make a handoff fail lint (the sections never change routing),
// but a Continues that names nothing cannot be followed.
func (h *Handoff) ContinuityWarnings() []Problem {
	c := h.Continues
	if c == "" || ContinuesKey(c) != "" {
		return nil
	}
	return []Problem{problemf(WarnContinuesUnclear, SectionContinues,
		"%q names no handoff: give the earlier handoff's file name (%s) or its SHA-256 (or its first 12 hex digits), alone on the line",
		clip(c), "2026-04-20-1537-short-slug.md")}
}

// WithheldReason returns why a handoff's text may not be shown to agents
// on other hosts, as the mirror's repos/ would show it (its title,
// summary, durable facts, open questions and next steps): it holds
// hidden characters, looks like a secret, or tells the reading agent to
// disregard its instructions. "" when it may be shown.
func (h *Handoff) WithheldReason() string {
	raw := h.raw
	if raw == "" {
		raw = h.joinSections()
	}
	if hiddenProblem(raw) != nil {
		return ReasonHiddenCharacters
	}
	if secretProblem(raw) != nil {
		return ReasonSecretLike
	}
	if !screenInjection {
		return ""
	}
	text := strings.Join([]string{h.Title, h.Summary, sectionText(h.Sections, SectionDurableFacts),
		strings.Join(h.OpenQuestions, "\n"), strings.Join(h.NextSteps, "\n")}, "\n")
	if _, what := injectionMatch(text); what != "" {
		return ReasonInjectionLike
	}
	return ""
}

// NameWithheldReason returns why a handoff's file name or thread key may
// not be shown to other hosts even reduced to a plain alphabet: it looks
// like a secret, or its words (dashes, underscores and dots read as
// spaces) tell the reading agent what the injection screen stops. ""
// when it may be shown.
func NameWithheldReason(names ...string) string {
	for _, n := range names {
		if n == "" {
			continue
		}
		if secretProblem(n) != nil {
			return ReasonSecretLike
		}
		if !screenInjection {
			continue
		}
		if _, what := injectionMatch(nameWords.Replace(n)); what != "" {
			return ReasonInjectionLike
		}
	}
	return ""
}

var nameWords = strings.NewReplacer("-", " ", "_", " ", ".", " ")

// Harness returns the harness directory of an inbox path
// (<repo>/<harness>/memory-handoffs), or "".
func Harness(inbox string) string {
	if path.Base(inbox) != "memory-handoffs" {
		return ""
	}
	h := path.Base(path.Dir(inbox))
	if !strings.HasPrefix(h, ".") || h == "." || h == ".." {
		return ""
	}
	return h
}

// LintWarnings returns lint's warnings for a file: notes that do not make
// it fail (ContinuityWarnings). A file that does not parse has none.
func LintWarnings(data []byte) []Problem {
	h, err := Parse(data)
	if err != nil {
		return nil
	}
	return h.ContinuityWarnings()
}
