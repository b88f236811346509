package review

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/ingest"
)

// Safe renders text from a handoff (or a host) so that a terminal shows it
// and does nothing else: newlines and tabs stay, and so does a carriage
// return right before a newline (CRLF line ends); every other control
// character (C0, DEL, C1: escape sequences start with one), every format
// character (bidirectional controls, zero-width and other invisible ones,
// tag characters), line and paragraph separators, the second and later
// of a run of variation selectors, and every byte that is not valid UTF-8
// come out as visible Go escapes (\x1b, \u202e, \xff). Everything else is
// printed as it is.
func Safe(s string) string {
	var b strings.Builder
	prevVS := false
	for i, r := range s {
		vs := isVariationSelector(r)
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			b.WriteRune(r)
		case unsafeRune(r) || vs && prevVS:
			switch {
			case r < 0x80:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
		prevVS = vs
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) ||
		ingest.IsHiddenRune(r)
}

func isVariationSelector(r rune) bool {
	return (r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0100 && r <= 0xe01ef)
}

// SafeLine is Safe for text that must stay on one line: newlines and tabs
// are escaped too.
func SafeLine(s string) string {
	s = Safe(s)
	return strings.NewReplacer("\r", `\x0d`, "\n", `\n`, "\t", `\t`).Replace(s)
}
