package review

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestSafe: nothing a terminal would act on survives, visible text does,
// and CRLF line ends stay.
func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\tindented\n": "plain text\n\tindented\n",
		"é ü 日本 🙂\n":               "é ü 日本 🙂\n",
		"\x1b[2J\x1b]0;t\x07":      `\x1b[2J\x1b]0;t\x07`,
		"a\rb":                     `a\x0db`,
		"line\r\n":                 "line\r\n",
		"\u009b31m":                `\u009b31m`,
		"bidi \u202eevil":          `bidi \u202eevil`,
		"zero\u200bwidth":          `zero\u200bwidth`,
		"tag\U000E0041":            `tag\U000e0041`,
		"bad \xff byte":            `bad \xff byte`,
		"sep\u2028x":               `sep\u2028x`,
		"heart \u2764\ufe0f":       "heart \u2764\ufe0f",
		"run \ufe0f\ufe0f":         "run \ufe0f" + `\ufe0f`,
		"filler \u3164":            `filler \u3164`,
		"bom \ufeff":               `bom \ufeff`,
		"\x00nul":                  `\x00nul`,
		"del\x7f":                  `del\x7f`,
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := SafeLine("a\nb\tc\r\nd"); got != `a\nb\tc\x0d\nd` {
		t.Errorf("SafeLine = %q", got)
	}
}

// TestSafeEveryRune: for every rune (and every byte), Safe's output holds
// no control or format character but newline, tab and a CR before a
// newline, and is valid UTF-8.
func TestSafeEveryRune(t *testing.T) {
	var b strings.Builder
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		b.WriteRune(r)
	}
	for i := 0x80; i < 0x100; i++ {
		b.WriteByte(byte(i))
	}
	out := Safe(b.String())
	if !utf8.ValidString(out) {
		t.Fatal("Safe's output is not valid UTF-8")
	}
	for i, r := range out {
		if r == '\n' || r == '\t' || r == '\r' && strings.HasPrefix(out[i+1:], "\n") {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
			t.Fatalf("U+%04X got through", r)
		}
	}
}

// TestResolve: ids are sha prefixes of 4 to 64 hex digits (any case) or
// draft names; a shared prefix is ambiguous; other text is no id.
func TestResolve(t *testing.T) {
	its := []Item{{SHA256: "abcd0000" + strings.Repeat("1", 56)}, {SHA256: "abcd1111" + strings.Repeat("2", 56)}, {SHA256: "ffff" + strings.Repeat("3", 60)}}
	for _, tc := range []struct {
		id   string
		want int // index, -1 not found, -2 ambiguous, -3 bad id
	}{
		{"abcd0", 0}, {"ABCD1111", 1}, {"ffff", 2}, {its[2].SHA256, 2},
		{".handoff/review/x.abcd00001111.md", 0}, {"x.ffff33333333.md", 2},
		{"abcd", -2}, {"0000", -1}, {"abc", -3}, {"nope", -3}, {"", -3},
	} {
		it, err := resolve(its, tc.id)
		var amb *AmbiguousError
		var bad *BadIDError
		switch {
		case tc.want >= 0 && (err != nil || it.SHA256 != its[tc.want].SHA256):
			t.Errorf("%q: %v %v", tc.id, it.SHA256, err)
		case tc.want == -1 && (err == nil || !strings.Contains(err.Error(), "no such review item")):
			t.Errorf("%q: %v, want not found", tc.id, err)
		case tc.want == -2 && !asErr(err, &amb):
			t.Errorf("%q: %v, want ambiguous", tc.id, err)
		case tc.want == -3 && !asErr(err, &bad):
			t.Errorf("%q: %v, want a bad id", tc.id, err)
		}
	}
}

func asErr[T error](err error, target *T) bool {
	e, ok := err.(T)
	if ok {
		*target = e
	}
	return ok
}
