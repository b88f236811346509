package doctor

import (
	"fmt"
	"path/filepath"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// doctorMirror reports a mirrored host's mirror from what the workspace
// knows (its state file and the last receipt): its generation, when it
// last changed, and whether the last run published it.
func doctorMirror(ws string, h manifest.HostConfig, opts Options) Check {
	c := Check{Name: "mirror", Status: CheckOK}
	st, err := mirror.LoadState(mirror.StateFile(filepath.Join(ws, layout.MirrorsDir), h.Name))
	if err != nil {
		c.Status, c.Message, c.Hint = CheckWarn, err.Error(), "the next sync sends the whole mirror again"
		return c
	}
	var last *receipts.Mirror
	if r, err := receipts.Read(filepath.Join(ws, layout.ReceiptsDir, "latest.json")); err == nil {
		for _, rh := range r.Hosts {
			if rh.Name == h.Name {
				last = rh.Mirror
			}
		}
	}
	switch {
	case last != nil && last.Outcome == mirror.OutcomeError && last.Interrupted:
		// Nothing to fix: the run was stopped while it published.
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the last run was interrupted while publishing the mirror at %s (generation %d, %d file(s) sent, %d removed)",
			h.Mirror.Path, last.Generation, len(last.Sent), len(last.Removed))
		c.Hint = fmt.Sprintf("run `handoff sync --host %s`: it finishes the publish (docs/mirror.md, \"Interrupted publishes\")", h.Name)
	case last != nil && last.Outcome == mirror.OutcomeError:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the last run could not publish the mirror at %s: %s", h.Mirror.Path, last.Error)
		c.Hint = fmt.Sprintf("fix what the error names on %s (docs/mirror.md, \"Refusals\"), then run `handoff sync --host %s`", h.Name, h.Name)
	case st.Generation == 0:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the mirror at %s has not been published yet", h.Mirror.Path)
		c.Hint = fmt.Sprintf("run `handoff sync --host %s`", h.Name)
	default:
		c.Message = fmt.Sprintf("mirror %s: generation %d, last changed %s ago", st.Dir, st.Generation, roundAge(opts.Now().Sub(st.PublishedAt)))
		if last != nil && last.Outcome == mirror.OutcomeSkipped {
			c.Status = CheckWarn
			c.Message += "; the last run skipped it: " + last.Error
			c.Hint = fmt.Sprintf("see `handoff doctor` for %s above, then run `handoff sync --host %s`", h.Name, h.Name)
		}
	}
	return c
}
