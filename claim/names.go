package claim

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes bounds a remote file name, as most file systems do.
const MaxNameBytes = 255

// CheckName reports why a name a host listed in an inbox cannot be a
// handoff, or "" when it is a plain *.md name: valid UTF-8, no "/", no
// control or format characters, not "." or "..", not a dotfile, at most
// MaxNameBytes bytes. Names that merely do not end in ".md" return
// "not-markdown" so callers can ignore them quietly.
func CheckName(name string) string {
	switch {
	case name == "" || name == "." || name == "..":
		return "reserved name"
	case len(name) > MaxNameBytes:
		return "name longer than 255 bytes"
	case !utf8.ValidString(name):
		return "name is not valid UTF-8"
	case strings.ContainsRune(name, '/'):
		return "name contains a slash"
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "name contains control characters"
		}
	}
	if strings.HasPrefix(name, ".") {
		return "not-markdown"
	}
	if !strings.HasSuffix(name, ".md") || len(name) == len(".md") {
		return "not-markdown"
	}
	return ""
}

// Printable is s as it is when a terminal shows it as text, else Quote(s):
// host-supplied text with control, format or invalid bytes comes out
// escaped and quoted.
func Printable(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
		return Quote(s)
	}
	return s
}

// Quote renders a host-supplied name safe for logs and terminals: invalid
// UTF-8, control characters and escape sequences come out escaped.
func Quote(name string) string {
	if len(name) > 300 {
		name = name[:300] + "…"
	}
	return strconv.QuoteToASCII(name)
}
