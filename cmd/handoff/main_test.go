package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/workspace"
)

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

// TestExitCodeNoWorkspace: a directory that is no workspace, or one whose
// identity cannot be trusted, is a usage error (exit 2) whose hint says
// what to run, wrapped or not.
func TestExitCodeNoWorkspace(t *testing.T) {
	missing := &workspace.MissingError{Path: "/nope/ws"}
	bad := workspace.Mismatch("/ws", "aa", "bb")
	for _, err := range []error{missing, fmt.Errorf("sync: %w", missing), bad} {
		code, hint := exitCode(err)
		if code != exitUsage || !strings.Contains(hint, "handoff init --workspace") && !strings.Contains(hint, "bb") {
			t.Errorf("exitCode(%v) = %d, %q; want 2 with the fix", err, code, hint)
		}
	}
}
