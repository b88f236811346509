package yamlguard

import (
	"fmt"
	"strings"
	"testing"
)

// TestWithin: a few kilobytes of aliases that expand to megabytes are
// refused; ordinary documents pass. Invariant: a hostile handoff or
// manifest cannot make the decoder allocate without bound.
func TestWithin(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("a: &a \"" + strings.Repeat("x", 4000) + "\"\nb: [")
	for i := 0; i < 1000; i++ {
		fmt.Fprint(&bomb, "*a, ")
	}
	bomb.WriteString("*a]\n")
	for _, tc := range []struct {
		name string
		doc  string
		want bool
	}{
		{"plain", "topic: x\ncategory: y\ntags: [a, b]\n", true},
		{"small alias", "a: &a hello\nb: *a\n", true},
		{"string amplification", bomb.String(), false},
		{"not yaml", "a: [unclosed\n", true},
	} {
		if got := Within([]byte(tc.doc), 64<<10); got != tc.want {
			t.Errorf("%s: Within = %v, want %v", tc.name, got, tc.want)
		}
	}
}
