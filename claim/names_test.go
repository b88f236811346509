package claim_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim"
)

// TestCheckName protects "nothing written outside the spool": a remote name
// is joined to local and remote paths, so anything but a plain *.md base
// name must be refused before it is used.
func TestCheckName(t *testing.T) {
	t.Parallel()
	const (
		valid   = ""             // a handoff name
		quiet   = "not-markdown" // skipped without a report
		hostile = "hostile"      // any other reason: reported in Ignored
	)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"dot-dot", "..", hostile},
		{"dot", ".", hostile},
		{"empty", "", hostile},
		{"slash", "/", hostile},
		{"path", "a/b.md", hostile},
		{"absolute path", "/etc/x.md", hostile},
		{"NUL", "a\x00b.md", hostile},
		{"newline", "a\nb.md", hostile},
		{"carriage return", "a\rb.md", hostile},
		{"tab", "a\tb.md", hostile},
		{"ESC sequence", "a\x1b[2Jb.md", hostile},
		{"DEL", "a\x7fb.md", hostile},
		{"C1 control", "a\u0085b.md", hostile},
		{"bidi override", "a\u202edm.txt.md", hostile},
		{"zero-width space", "a\u200bb.md", hostile},
		{"invalid UTF-8", "a\xffb.md", hostile},
		{"300-byte name", strings.Repeat("a", 297) + ".md", hostile},
		{"256-byte name", strings.Repeat("a", 253) + ".md", hostile},
		{"255-byte name", strings.Repeat("a", 252) + ".md", valid},
		{"not markdown", "x.txt", quiet},
		{"markdown suffix only in the middle", "x.md.txt", quiet},
		{"dotfile", ".hidden.md", quiet},
		{"only the suffix", ".md", quiet},
		{"upper-case suffix", "x.MD", quiet},
		{"normal", "2026-04-20-1537-x.md", valid},
		{"unicode", "café.md", valid},
		{"spaces", "my notes.md", valid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := claim.CheckName(tc.in)
			switch tc.want {
			case valid, quiet:
				if got != tc.want {
					t.Errorf("CheckName(%s) = %q, want %q", strconv.Quote(tc.in), got, tc.want)
				}
			case hostile:
				if got == valid || got == quiet {
					t.Errorf("CheckName(%s) = %q, want a reason to report it", strconv.Quote(tc.in), got)
				}
			}
		})
	}
}

// TestQuote protects the terminal and the log: a host-chosen name must come
// out as printable ASCII that still says what the name was.
func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		roundTrip bool // strconv.Unquote gives the name back
	}{
		{"newline", "a\nb.md", true},
		{"ESC sequence", "a\x1b]0;pwned\x07b.md", true},
		{"NUL", "a\x00b.md", true},
		{"C1 control", "a\u009bb.md", true},
		{"bidi override", "a\u202eb.md", true},
		{"unicode", "café.md", true},
		{"invalid UTF-8", "a\xffb.md", false},
		{"very long", strings.Repeat("\x1b", 400) + ".md", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := claim.Quote(tc.in)
			for i := 0; i < len(q); i++ {
				if q[i] < 0x20 || q[i] >= 0x7f {
					t.Fatalf("Quote(%s) = %s holds byte %#x", strconv.Quote(tc.in), q, q[i])
				}
			}
			if len(q) > 2000 {
				t.Errorf("Quote of a %d-byte name is %d bytes; want it bounded", len(tc.in), len(q))
			}
			if tc.roundTrip {
				back, err := strconv.Unquote(q)
				if err != nil || back != tc.in {
					t.Errorf("Unquote(Quote(%s)) = %q, %v", strconv.Quote(tc.in), back, err)
				}
			}
		})
	}
}
