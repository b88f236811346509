package review

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// applyDiff applies a unified diff made by UnifiedDiff to a and returns
// the result; it fails the test on anything malformed.
func applyDiff(t *testing.T, a, diff string) string {
	t.Helper()
	if diff == "" {
		return a
	}
	al := splitLines(a)
	var out []string
	lines := strings.SplitAfter(diff, "\n")
	if !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		t.Fatalf("no headers:\n%s", diff)
	}
	hunkRE := regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n$`)
	pos := 0 // next line of a to copy
	i := 2
	for i < len(lines) && lines[i] != "" {
		m := hunkRE.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("bad hunk header %q in:\n%s", lines[i], diff)
		}
		num := func(s string, def int) int {
			if s == "" {
				return def
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		astart, alen := num(m[1], 0), num(m[2], 1)
		blen := num(m[4], 1)
		a0 := astart - 1
		if alen == 0 {
			a0 = astart
		}
		if a0 < pos {
			t.Fatalf("hunks overlap or go back:\n%s", diff)
		}
		out = append(out, al[pos:a0]...)
		pos = a0
		i++
		seenA, seenB := 0, 0
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			i++
			if i < len(lines) && strings.HasPrefix(lines[i], `\ No newline at end of file`) {
				l = strings.TrimSuffix(l, "\n")
				i++
			}
			switch l[0] {
			case ' ':
				if al[pos] != l[1:] {
					t.Fatalf("context %q does not match a's line %d %q", l[1:], pos+1, al[pos])
				}
				out = append(out, l[1:])
				pos++
				seenA++
				seenB++
			case '-':
				if al[pos] != l[1:] {
					t.Fatalf("deleted %q does not match a's line %d %q", l[1:], pos+1, al[pos])
				}
				pos++
				seenA++
			case '+':
				out = append(out, l[1:])
				seenB++
			default:
				t.Fatalf("bad diff line %q", l)
			}
		}
		if seenA != alen || seenB != blen {
			t.Fatalf("hunk -%d,%d +%d: saw %d and %d lines:\n%s", astart, alen, blen, seenA, seenB, diff)
		}
	}
	out = append(out, al[pos:]...)
	return strings.Join(out, "")
}

func randomText(r *rand.Rand, n int) string {
	words := []string{"a\n", "b\n", "c\n", "d\n", "---\n", "\n", "tags: [x]\n"}
	var b strings.Builder
	for range n {
		b.WriteString(words[r.IntN(len(words))])
	}
	s := b.String()
	if r.IntN(4) == 0 {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

// TestUnifiedDiffApplies: applying the diff to a gives b, for random texts
// and edits of them (line ends missing at the end included), and hunks
// carry at most three lines of context.
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		a := randomText(r, r.IntN(30))
		var b string
		if r.IntN(2) == 0 {
			b = randomText(r, r.IntN(30))
		} else { // an edit of a
			ls := splitLines(a)
			for j := 0; j < 1+r.IntN(3) && len(ls) > 0; j++ {
				k := r.IntN(len(ls))
				switch r.IntN(3) {
				case 0:
					ls = append(ls[:k], ls[k+1:]...)
				case 1:
					ls = append(ls[:k], append([]string{"new\n"}, ls[k:]...)...)
				default:
					ls[k] = "changed\n"
				}
			}
			b = strings.Join(ls, "")
		}
		d := UnifiedDiff("a", "b", []byte(a), []byte(b))
		if (d == "") != (a == b) {
			t.Fatalf("case %d: diff %q for %q -> %q", i, d, a, b)
		}
		if got := applyDiff(t, a, d); got != b {
			t.Fatalf("case %d: %q + diff =\n%q, want %q\ndiff:\n%s", i, a, got, b, d)
		}
	}
}

// TestUnifiedDiffMinimal: the diff of an append is the appended lines and
// nothing else; of a one-line change, one line out and one in.
func TestUnifiedDiffMinimal(t *testing.T) {
	old := "# Tools\n\n- one\n- two\n- three\n- four\n"
	got := UnifiedDiff("TOOLS.md", "TOOLS.md", []byte(old), []byte(old+"\n- five\n"))
	want := "--- TOOLS.md\n+++ TOOLS.md\n@@ -4,3 +4,5 @@\n - two\n - three\n - four\n+\n+- five\n"
	if got != want {
		t.Errorf("append:\n%s\nwant:\n%s", got, want)
	}
	got = UnifiedDiff("c", "c", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	if want := "--- c\n+++ c\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"; got != want {
		t.Errorf("change:\n%s\nwant:\n%s", got, want)
	}
	got = UnifiedDiff("c", "c", nil, []byte("x\ny"))
	if want := "--- c\n+++ c\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"; got != want {
		t.Errorf("create:\n%q\nwant:\n%q", got, want)
	}
}

// TestUnifiedDiffLikeGNU compares with diff -u where it is installed, on
// cases with one shortest answer: the same hunks, line for line.
func TestUnifiedDiffLikeGNU(t *testing.T) {
	gnu, err := exec.LookPath("diff")
	if err != nil {
		t.Skip("no diff(1)")
	}
	dir := t.TempDir()
	big := ""
	for i := range 40 {
		big += fmt.Sprintf("line %d\n", i)
	}
	for i, tc := range [][2]string{
		{big, strings.Replace(big, "line 5\n", "line five\n", 1)},
		{big, strings.Replace(strings.Replace(big, "line 5\n", "", 1), "line 30\n", "line 30\nextra\n", 1)},
		{big, big + "tail\n"},
		{"a\nb\n", "a\nb"},
		{"", "new\n"},
		{big, strings.Replace(big, "line 20\n", "line 20\nx\n", 1) + "end\n"},
	} {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		os.WriteFile(a, []byte(tc[0]), 0o644)
		os.WriteFile(b, []byte(tc[1]), 0o644)
		out, _ := exec.Command(gnu, "-u", "--label", "a", "--label", "b", a, b).Output()
		if got := UnifiedDiff("a", "b", []byte(tc[0]), []byte(tc[1])); got != string(out) {
			t.Errorf("case %d:\n%s\ndiff -u says:\n%s", i, got, out)
		}
	}
}

// TestUnifiedDiffBounded: a huge, wholly different pair is still a
// correct diff, made without unbounded work.
func TestUnifiedDiffBounded(t *testing.T) {
	var a, b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	d := UnifiedDiff("a", "b", []byte(a.String()), []byte(b.String()))
	if got := applyDiff(t, a.String(), d); got != b.String() {
		t.Fatal("the bounded diff does not apply")
	}
}
