package main

import "testing"

// TestPrintable: host-supplied text reaches the terminal without control
// sequences or invalid UTF-8; newlines (our hint lines) and tabs stay.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain café":          "plain café",
		"a\x1b[2Jb":           `a\x1b[2Jb`,
		"line\nhint: x\tt":    "line\nhint: x\tt",
		"bad \xff byte":       `bad \xff byte`,
		"rtl \u202e txt":      `rtl \u202e txt`,
		"bell\a":              `bell\a`,
		"real \uFFFD replace": "real \uFFFD replace",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
