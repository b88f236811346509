package review

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// maxDiffEdits bounds the work of the line diff: past this many inserted
// and deleted lines, the part that differs is shown as replaced whole.
const maxDiffEdits = 4000

// UnifiedDiff renders the change from a to b as a unified diff of lines
// (as `diff -u` prints one: "---" and "+++" headers naming aName and
// bName, "@@ -l,n +l,n @@" hunks with three lines of context, "\ No
// newline at end of file" after a last line without one). Equal inputs give
// "". The text is as in a and b: make it safe for a terminal before
// printing (Safe).
func UnifiedDiff(aName, bName string, a, b []byte) string {
	al, bl := splitLines(string(a)), splitLines(string(b))
	ops := diffLines(al, bl)
	if len(ops) == 0 {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	for _, h := range hunks(ops, len(al), len(bl)) {
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(h.a0, h.a1), hunkRange(h.b0, h.b1))
		i, j := h.a0, h.b0
		for _, op := range ops {
			if op.a1 <= h.a0 && op.b1 <= h.b0 || op.a0 >= h.a1 && op.b0 >= h.b1 {
				continue
			}
			for ; i < op.a0; i, j = i+1, j+1 {
				line(&out, ' ', al[i])
			}
			for ; i < op.a1; i++ {
				line(&out, '-', al[i])
			}
			for ; j < op.b1; j++ {
				line(&out, '+', bl[j])
			}
		}
		for ; i < h.a1; i, j = i+1, j+1 {
			line(&out, ' ', al[i])
		}
	}
	return out.String()
}

func line(out *strings.Builder, mark byte, l string) {
	out.WriteByte(mark)
	out.WriteString(l)
	if !strings.HasSuffix(l, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}

// hunkRange renders a hunk's line range as diff does: "l,n", or "l" when
// n is 1; an empty range names the line before it.
func hunkRange(lo, hi int) string {
	switch n := hi - lo; n {
	case 0:
		return fmt.Sprintf("%d,0", lo)
	case 1:
		return fmt.Sprintf("%d", lo+1)
	default:
		return fmt.Sprintf("%d,%d", lo+1, n)
	}
}

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// edit is a change: a[a0:a1] is replaced by b[b0:b1]. Edits come in order
// and do not touch each other.
type edit struct{ a0, a1, b0, b1 int }

type hunk struct{ a0, a1, b0, b1 int }

// hunks groups edits into hunks, each with diffContext lines of context on
// either side; edits closer than twice that share a hunk.
func hunks(ops []edit, na, nb int) []hunk {
	var out []hunk
	for _, op := range ops {
		a0, b0 := max(op.a0-diffContext, 0), max(op.b0-diffContext, 0)
		// the context before is equal lines, so both sides move together
		if d := op.a0 - a0; d != op.b0-b0 {
			n := min(d, op.b0-b0)
			a0, b0 = op.a0-n, op.b0-n
		}
		a1, b1 := min(op.a1+diffContext, na), min(op.b1+diffContext, nb)
		if d := a1 - op.a1; d != b1-op.b1 {
			n := min(d, b1-op.b1)
			a1, b1 = op.a1+n, op.b1+n
		}
		if k := len(out) - 1; k >= 0 && a0 <= out[k].a1 {
			out[k].a1, out[k].b1 = a1, b1
			continue
		}
		out = append(out, hunk{a0, a1, b0, b1})
	}
	return out
}

// diffLines returns the edits that turn a into b: a shortest edit script
// (Myers' algorithm) over what lies between the common prefix and suffix,
// or, past maxDiffEdits, that part replaced whole.
func diffLines(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(am) == 0 && len(bm) == 0 {
		return nil
	}
	ops, ok := myers(am, bm)
	if !ok {
		ops = []edit{{0, len(am), 0, len(bm)}}
	}
	for i := range ops {
		ops[i].a0 += pre
		ops[i].a1 += pre
		ops[i].b0 += pre
		ops[i].b1 += pre
	}
	return ops
}

// myers computes a shortest edit script from a to b, as merged edits; ok
// is false when it needs more than maxDiffEdits insertions and deletions.
func myers(a, b []string) ([]edit, bool) {
	n, m := len(a), len(b)
	maxD := min(n+m, maxDiffEdits)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1] // down: an insertion
			} else {
				x = v[off+k-1] + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, v, off, d, n, m), true
			}
		}
	}
	return nil, false
}

// backtrack walks Myers' trace back from (n, m) and returns the edits,
// adjacent single steps merged.
func backtrack(trace [][]int, last []int, off, d, n, m int) []edit {
	type step struct{ x, y, px, py int }
	var steps []step
	x, y := n, m
	v := last
	for ; d > 0; d-- {
		prev := trace[d]
		k := x - y
		var pk int
		if k == -d || k != d && prev[off+k-1] < prev[off+k+1] {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := prev[off+pk]
		py := px - pk
		// the snake: equal lines from the step's end to (x, y)
		sx, sy := px, py
		if pk == k+1 {
			sy++ // insertion of b[py]
		} else {
			sx++ // deletion of a[px]
		}
		steps = append(steps, step{sx, sy, px, py})
		x, y = px, py
		v = prev
	}
	_ = v
	var out []edit
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if k := len(out) - 1; k >= 0 && out[k].a1 == s.px && out[k].b1 == s.py {
			out[k].a1, out[k].b1 = s.x, s.y
			continue
		}
		out = append(out, edit{s.px, s.x, s.py, s.y})
	}
	return out
}
