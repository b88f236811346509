package doctor

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// TestDoctorMirrorLastRun: what doctor says of a mirror follows what the
// last run did to it. A publish the run's interruption stopped is a
// warning that the next sync clears, never a pointer at the Refusals (a
// person looking for a symlink or a bad name would find none); a publish
// that failed on its own points at them.
func TestDoctorMirrorLastRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		last      receipts.Mirror
		message   string
		hint, not string
	}{
		{"interrupted",
			receipts.Mirror{Outcome: mirror.OutcomeError, Sent: []string{"memory/cards/x.md", "SHA256SUMS", "MIRROR.json"}, Removed: []string{}, Generation: 3, Interrupted: true,
				Error: "interrupted: the run was stopped while publishing; the next sync finishes the job (mirror ~/m: context canceled)"},
			"the last run was interrupted while publishing the mirror at ~/m (generation 3, 3 file(s) sent, 0 removed)",
			"run `handoff sync --host laptop`: it finishes the publish (docs/mirror.md, \"Interrupted publishes\")", "Refusals"},
		{"refused",
			receipts.Mirror{Outcome: mirror.OutcomeError, Sent: []string{}, Removed: []string{}, Generation: 2, Error: "mirror ~/m: /home/me/m is a symlink"},
			"the last run could not publish the mirror at ~/m: mirror ~/m: /home/me/m is a symlink",
			"Refusals", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			st := &mirror.State{Host: "laptop", Dir: "/home/me/m", Generation: 2, PublishedAt: now.Add(-time.Hour), Files: map[string]mirror.Stamp{}}
			if err := st.Save(mirror.StateFile(filepath.Join(ws, layout.MirrorsDir), "laptop")); err != nil {
				t.Fatal(err)
			}
			b := receipts.NewBuilder("20261201T115900Z-abcdef", receipts.ModeApply, now.Add(-time.Minute), receipts.Manifest{}, ws, "")
			b.AddHost(receipts.Host{Name: "laptop", Outcome: receipts.HostOK, Inboxes: []receipts.Inbox{}}, 0)
			b.SetMirror("laptop", tc.last)
			b.Judge(nil)
			if _, err := receipts.Write(filepath.Join(ws, layout.ReceiptsDir), b.Finish(now), nil, false); err != nil {
				t.Fatal(err)
			}
			h := manifest.HostConfig{Name: "laptop", Mirror: &manifest.MirrorConfig{Path: "~/m"}}
			c := doctorMirror(ws, h, Options{Now: func() time.Time { return now }}, nil, "")
			if c.Status != CheckWarn || c.Message != tc.message {
				t.Errorf("check %s %q, want warn %q", c.Status, c.Message, tc.message)
			}
			if !strings.Contains(c.Hint, tc.hint) || tc.not != "" && strings.Contains(c.Hint, tc.not) {
				t.Errorf("hint %q: want %q in it and not %q", c.Hint, tc.hint, tc.not)
			}
		})
	}
}
