package ingest

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The screens' normal form. The injection and secret screens match what a
// reader sees, not how it is spelled: a Cyrillic "о" in "ignоre", markdown
// emphasis ("*ignore* all *previous* instructions"), a zero-width space
// inside a word or a no-break space between words must not get a phrase
// past them. The form is used only for matching; nothing stored changes.
//
// No maintained Go module implements the Unicode TR39 skeleton (the one on
// the module proxy, github.com/mtibben/confusables, has had no change since
// 2021 and carries Unicode 13 data), so the form is built from
// golang.org/x/text's NFKD (fullwidth and mathematical letters, ligatures,
// the long s, Unicode spaces become their plain letters and a space) and
// the small table below of the Cyrillic, Greek, Armenian and Latin letters
// that look like a Latin letter (TR39's confusables.txt, and a few it
// leaves out, such as small capitals). Digits and signs written for
// letters ("ign0re a1l prev10us instructi0ns") are folded only for the
// injection screen's phrase patterns, and only inside a word that holds a
// letter (digitForm): numbers, versions, hashes and ports stay as they
// are for every other pattern and for the secret screen.

// lookalikes maps a letter that looks like a Latin letter to it.
var lookalikes = map[rune]rune{
	// Cyrillic.
	'а': 'a', 'в': 'b', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'һ': 'h', 'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l',
	'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's', 'т': 't', 'ц': 'u', 'ѵ': 'v',
	'ԝ': 'w', 'х': 'x', 'у': 'y', 'ү': 'y',
	'А': 'A', 'В': 'B', 'С': 'C', 'Ԁ': 'D', 'Е': 'E', 'Н': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K', 'Ӏ': 'l',
	'М': 'M', 'О': 'O', 'Р': 'P', 'Ԛ': 'Q', 'Ѕ': 'S', 'Т': 'T', 'Ѵ': 'V', 'Ԝ': 'W', 'Х': 'X', 'Ү': 'Y',
	// Greek.
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't',
	'υ': 'u', 'χ': 'x', 'γ': 'y',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Armenian.
	'օ': 'o', 'ս': 'u', 'ո': 'n', 'հ': 'h', 'ց': 'g', 'զ': 'q',
	// Latin letters outside ASCII that NFKD leaves alone.
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɡ': 'g', 'ɩ': 'i', 'ʏ': 'y', 'ɪ': 'i', 'ᴀ': 'A', 'ᴄ': 'c', 'ᴅ': 'd',
	'ᴇ': 'e', 'ᴋ': 'k', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ᴢ': 'z',
}

// plainForScreen reports whether s is already in the screens' form for
// emphasis: printable ASCII, tabs and newlines, without the emphasis marks.
func plainForScreen(s string, emphasis bool) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80 || c < 0x20 && c != '\n' && c != '\t':
			return false
		case emphasis && (c == '*' || c == '`' || c == '_' || c == '~'):
			return false
		}
	}
	return true
}

// invisible reports whether r draws nothing a reader would see between
// letters: format characters (zero-width spaces and joiners, bidi
// controls, the soft hyphen, tag characters), combining marks after NFKD
// (so "ïgnore" reads "ignore"), and the Hangul and braille fillers.
func invisible(r rune) bool {
	switch r {
	case '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800', '\u034f':
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me) || isVariationSelector(r)
}

// screenForm is the form the injection screen matches on: lookalike
// letters folded to Latin, invisible characters dropped, markdown emphasis
// (*, `, ~~, and _ at a word's edge) dropped, and every run of white space
// one space, or one newline when it holds a line break.
func screenForm(s string) string {
	return fold(s, true)
}

// secretForm is the form the secret screen also matches on: screenForm
// without the emphasis and white space steps, since a token holds
// underscores and line numbers are reported.
func secretForm(s string) string {
	return fold(s, false)
}

func fold(s string, emphasis bool) string {
	if plainForScreen(s, emphasis) {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	// Most handoffs are ASCII with some markdown: NFKD changes nothing
	// there.
	if !isASCII(s) {
		s = norm.NFKD.String(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	space := 0 // 1: a space is due, 2: a newline is due
	prev := rune(0)
	for i, r := range s {
		if invisible(r) {
			continue
		}
		if m, ok := lookalikes[r]; ok {
			r = m
		}
		if emphasis {
			switch {
			case r == '*' || r == '`':
				continue
			case r == '~' && (strings.HasPrefix(s[i+1:], "~") || prev == '~'):
				prev = r
				continue
			case r == '_' && (!isLetterDigit(prev) || !isLetterDigit(nextRune(s[i+1:]))):
				continue
			}
			if unicode.IsSpace(r) {
				if r == '\n' || r == '\u2028' || r == '\u2029' || r == '\u0085' {
					space = 2
				} else if space == 0 {
					space = 1
				}
				prev = ' '
				continue
			}
			switch space {
			case 1:
				b.WriteByte(' ')
			case 2:
				b.WriteByte('\n')
			}
			space = 0
		} else if r != '\n' && r != '\t' && unicode.IsSpace(r) {
			r = ' '
		}
		prev = r
		b.WriteRune(r)
	}
	if space == 2 {
		b.WriteByte('\n')
	}
	return b.String()
}

func nextRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func isLetterDigit(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// digitLookalikes maps a digit or sign written for a letter to that letter.
// "1" reads as "l" or "i"; digitForm writes every "i" as "l" too, so
// that both readings meet.
var digitLookalikes = [128]byte{'0': 'o', '1': 'l', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's'}

// digitForm is s (a screen form) as the phrase patterns match it when its
// words may be spelled with digits: ASCII lowercased; in every word (a run
// of ASCII letters, digits, "@" and "$") that holds a letter, the digit
// lookalikes made letters; every "i" made "l". A word of digits alone
// ("2026", "8080") is left as it is. It has s's length byte for byte, so
// a match's offsets are s's. ok is false when no word held a lookalike:
// the form then adds nothing to s.
func digitForm(s string) (form string, ok bool) {
	b := []byte(s)
	for i := 0; i < len(b); {
		j, letter := i, false
		for j < len(b) && b[j] < 0x80 && (isASCIILetter(b[j]) || b[j] >= '0' && b[j] <= '9' || b[j] == '@' || b[j] == '$') {
			letter = letter || isASCIILetter(b[j])
			j++
		}
		if j == i {
			i++
			continue
		}
		if letter {
			for k := i; k < j; k++ {
				if m := digitLookalikes[b[k]]; m != 0 {
					b[k], ok = m, true
				}
			}
		}
		i = j
	}
	if !ok {
		return s, false
	}
	for k, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == 'i' {
			c = 'l'
		}
		b[k] = c
	}
	return string(b), true
}
