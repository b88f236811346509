package ingest

import (
	"fmt"
	"strings"
	"testing"
)

// TestNormalText: line ends, trailing whitespace and surrounding blank
// lines are all that normalizing changes; a text in normal form is its
// own.
func TestNormalText(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		normal   bool
	}{
		{"a\nb\n", "a\nb\n", true},
		{"", "", true},
		{"a\r\nb\r\n", "a\nb\n", false},
		{"a  \nb\t\n", "a\nb\n", false},
		{"\n\na\nb\n\n\n", "a\nb\n", false},
		{"  \na\n", "a\n", false},
		{"a\nb", "a\nb\n", false},
		{"a\n\nb\n", "a\n\nb\n", true},
		{"a\n  \nb\n", "a\n\nb\n", false},
		{" a\n", " a\n", true},
		{"a\rb\n", "a\rb\n", true}, // a lone CR is not a line end: kept
		{"\n", "", false},
	} {
		got, normal := NormalText([]byte(tc.in))
		if string(got) != tc.want || normal != tc.normal {
			t.Errorf("NormalText(%q) = %q, %v; want %q, %v", tc.in, got, normal, tc.want, tc.normal)
		}
		if again, n := NormalText(got); string(again) != string(got) || (!n && len(got) > 0) {
			t.Errorf("NormalText(%q) is not its own normal text: %q", got, again)
		}
	}
}

// crlf is s with CRLF line ends.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// TestSameTextNeverAppliedTwice: a document append and its copies with
// CRLF line ends or trailing whitespace, under other names or the same
// one, in one batch or in later runs, in either order. Invariant: the
// document receives the append once; every copy is a duplicate with
// reason same-text, and each copy's exact bytes stay stored.
func TestSameTextNeverAppliedTwice(t *testing.T) {
	lf := docH("rules/deploy.md", "- landed as abc1234 on main")
	ws := strings.ReplaceAll(lf, "\n", "  \n")
	cases := []struct {
		name  string
		files [][2]string
		runs  []int // how many files each run stores
	}{
		{"lf-then-crlf-later-run", [][2]string{{"a.md", lf}, {"a (conflict).md", crlf(lf)}}, []int{1, 1}},
		{"crlf-then-lf-later-run", [][2]string{{"a.md", crlf(lf)}, {"b.md", lf}}, []int{1, 1}},
		{"same-batch", [][2]string{{"a.md", lf}, {"b.md", crlf(lf)}, {"c.md", ws}}, []int{3}},
		{"same-batch-crlf-first", [][2]string{{"a.md", crlf(lf)}, {"b.md", lf}}, []int{2}},
		{"resaved-in-place", [][2]string{{"a.md", lf}, {"a.md", crlf(lf)}}, []int{1, 1}},
		{"both-not-normal", [][2]string{{"a.md", ws}, {"b.md", crlf(lf)}}, []int{1, 1}},
	}
	for _, tc := range cases {
		for _, batch := range []int{256, 1} {
			t.Run(fmt.Sprintf("%s/batch%d", tc.name, batch), func(t *testing.T) {
				r := newRig(t)
				i := 0
				for _, n := range tc.runs {
					r.store(tc.files[i : i+n]...)
					i += n
					r.mustRun(batch)
				}
				if doc := r.readWS("rules/deploy.md"); strings.Count(doc, "landed as") != 1 {
					t.Errorf("rules/deploy.md holds %q; want the append once", doc)
				}
				rows, err := r.led.DB().Query(`SELECT result, reason FROM sources ORDER BY id`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var got []string
				for rows.Next() {
					var res, reason string
					rows.Scan(&res, &reason)
					got = append(got, res+"/"+reason)
				}
				want := []string{"routed/"}
				for range tc.files[1:] {
					want = append(want, "duplicate/same-text")
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("results %v, want %v", got, want)
				}
				for _, f := range tc.files {
					if b, err := r.spool.Get(sum(f[1])); err != nil || string(b) != f[1] {
						t.Errorf("%s: exact bytes not stored: %v", f[0], err)
					}
				}
				r.checkClean()
			})
		}
	}
}
