package claim_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/claim"
)

// maxQuoteLen bounds Quote's output: at most 300 bytes of the name are
// kept, each escaped to at most 4 bytes (\xff), plus an escaped "…" and
// the quotes.
const maxQuoteLen = 300*4 + len(`\u2026`) + 2

// FuzzCheckName protects "nothing written outside the spool" and the
// terminal: a name CheckName accepts is a plain *.md base name, and Quote
// renders any name as bounded printable ASCII that says what it was.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "...", "/", "a/b.md", "/etc/x.md", "../x.md", "./x.md", "x.md/", "a\\b.md",
		"a\x00b.md", "x.md\x00", "a\nb.md", "x.md\n", "a\rb.md", "a\tb.md", "a\x7fb.md",
		"a\x1b[2Jb.md", "\x1b]0;pwned\x07x.md", "a\u0085b.md", "a\u009bb.md",
		"a\xffb.md", "\xc3.md", "\xed\xa0\x80.md", "\xf4\x90\x80\x80.md", "\uFFFD.md",
		strings.Repeat("a", 252) + ".md", strings.Repeat("a", 253) + ".md", strings.Repeat("é", 126) + ".md",
		strings.Repeat("a", 4096) + ".md", strings.Repeat("\x1b", 4096), strings.Repeat("\U0001F600", 1024),
		strings.Repeat("a", 299) + "é.md",
		"x.txt", "x.md.txt", "x.MD", "x.Md", "X.md", ".md", "..md", ".hidden.md", "x.md.", "x.md ", " x.md",
		"café.md", "cafe\u0301.md", "a\u202edm.txt.md", "a\u200bb.md", "a\u2028b.md", "a\u2029b.md",
		"\ufeffx.md", "a\u00adb.md", "a\U000E0041b.md", "a\ufe0f\ufe0fb.md", "\u0661.md", "ｘ.md", "x．md",
		"2026-04-20-1537-x.md", "my notes.md", "CON.md", "nul.md",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		reason := claim.CheckName(name)
		if reason != claim.CheckName(name) {
			t.Fatalf("CheckName(%q) is not deterministic", name)
		}
		if reason == "" {
			checkAcceptedName(t, name)
		}

		q := claim.Quote(name)
		for i := 0; i < len(q); i++ {
			if q[i] < 0x20 || q[i] >= 0x7f {
				t.Fatalf("Quote(%q) = %s holds byte %#x", name, q, q[i])
			}
		}
		if len(q) > maxQuoteLen {
			t.Fatalf("Quote of a %d-byte name is %d bytes; want at most %d", len(name), len(q), maxQuoteLen)
		}
		back, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("Quote(%q) = %s does not unquote: %v", name, q, err)
		}
		want := name
		if len(name) > 300 {
			want = name[:300] + "…"
		}
		if back != want {
			t.Fatalf("Unquote(Quote(%q)) = %q; want %q", name, back, want)
		}
	})
}

// checkAcceptedName checks a name CheckName accepted against its contract,
// without trusting CheckName's own code.
func checkAcceptedName(t *testing.T, name string) {
	t.Helper()
	switch {
	case !utf8.ValidString(name):
		t.Fatalf("CheckName accepted %q, which is not valid UTF-8", name)
	case len(name) > claim.MaxNameBytes:
		t.Fatalf("CheckName accepted a %d-byte name", len(name))
	case strings.ContainsRune(name, '/'):
		t.Fatalf("CheckName accepted %q, which holds a slash", name)
	case name == "." || name == ".." || strings.HasPrefix(name, "."):
		t.Fatalf("CheckName accepted the dot name %q", name)
	case !strings.HasSuffix(name, ".md") || name == ".md":
		t.Fatalf("CheckName accepted %q, which is not a *.md name", name)
	case filepath.Base(name) != name || !filepath.IsLocal(name):
		t.Fatalf("CheckName accepted %q, which is not a local base name", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			t.Fatalf("CheckName accepted %q, which holds %U", name, r)
		}
	}
}

// FuzzParseHint protects the walk from its own state file: whatever
// .handoff/walks/<host>.json holds (torn by a crash, edited, or written by
// another version), ParseHint never panics, keeps only calls a walk could
// make and memos this code could write (a clean absolute path; tracked
// paths inside an inbox, never outside the repository), at most MaxHint
// of each; and what it keeps survives MarshalHint unchanged.
func FuzzParseHint(f *testing.F) {
	sum := strings.Repeat("0a", 20)
	for _, s := range []string{
		``, `[]`, `{}`, `null`, `[{"op":"lstat","path":"/a"}]`, `{"calls":null,"indexes":null}`,
		`{"calls":[{"op":"readdir","path":"/a","n":512},{"op":"realpath","path":"/a/../b"}]}`,
		`{"calls":[],"indexes":[{"path":"/r/.git/index","size":100,"mtime":"2026-01-02T03:04:05Z","sum":"` + sum + `","tracked":[".claude/memory-handoffs/a.md"]}]}`,
		`{"indexes":[{"path":"/r/.git/index","size":100,"mtime":"bad","sum":"` + sum + `"}]}`,
		`{"indexes":[{"path":"/r/.git/index","size":100,"sum":"` + sum + `","tracked":["../../etc/memory-handoffs/x"]}]}`,
		`{"calls":[{"op":"lstat","path":"/a"}],"indexes":[{"path":"/`, `[{"op":"lstat","path":"/a"},`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := claim.ParseHint(data)
		if err != nil {
			return
		}
		if len(h.Calls) > claim.MaxHint || len(h.Indexes) > claim.MaxHint {
			t.Fatalf("kept %d calls and %d memos, more than %d", len(h.Calls), len(h.Indexes), claim.MaxHint)
		}
		for _, c := range h.Calls {
			if !filepath.IsAbs(c.Path) || filepath.Clean(c.Path) != c.Path {
				t.Fatalf("kept a call on %q", c.Path)
			}
			switch c.Op {
			case claim.WalkLstat, claim.WalkRealPath, claim.WalkReadDir:
			default:
				t.Fatalf("kept an operation %q", c.Op)
			}
		}
		for _, m := range h.Indexes {
			if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path || len(m.Sum) != 40 {
				t.Fatalf("kept a memo %+v", m)
			}
			for _, p := range m.Tracked {
				// "..0" is a name; ".." and "../" lead out of the repository.
				if filepath.IsAbs(p) || filepath.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || filepath.Base(filepath.Dir(p)) != claim.InboxDir {
					t.Fatalf("kept a memo tracking %q", p)
				}
			}
		}
		again, err := claim.MarshalHint(h)
		if err != nil {
			t.Fatalf("MarshalHint of what ParseHint kept: %v", err)
		}
		back, err := claim.ParseHint(again)
		if err != nil || len(back.Calls) != len(h.Calls) || len(back.Indexes) != len(h.Indexes) {
			t.Fatalf("round trip kept %d calls and %d memos (%v), want %d and %d", len(back.Calls), len(back.Indexes), err, len(h.Calls), len(h.Indexes))
		}
	})
}
