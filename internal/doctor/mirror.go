package doctor

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// doctorMirror reports a mirrored host's mirror from what the workspace
// knows (its state file and the last receipt): its generation, when it
// last changed, and whether the last run published it. info is the
// mirror's MIRROR.json as the host holds it (nil when unread or absent),
// and wsID this workspace's id ("" when it has none): a mirror this
// workspace never published may be another workspace's.
func doctorMirror(ws string, h manifest.HostConfig, opts Options, info *mirror.Info, wsID string) Check {
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
		msg, own := splitHint(last.Error)
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the last run could not publish the mirror at %s: %s", h.Mirror.Path, msg)
		c.Hint = fmt.Sprintf("fix what the error names on %s (docs/mirror.md, \"Refusals\"), then run `handoff sync --host %s`", h.Name, h.Name)
		if own != "" {
			c.Hint = own + "; then run `handoff sync --host " + h.Name + "`"
		}
	case st.Generation == 0 && info != nil && info.Generation > 0 && info.WorkspaceID != "" && info.WorkspaceID != wsID:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the mirror at %s is at generation %d, published by workspace %s (on %s), not by this one (%s)",
			h.Mirror.Path, info.Generation, short(info.WorkspaceID), info.Canonical, ws)
		c.Hint = fmt.Sprintf("the manifest may name the wrong workspace: if so, fix `workspace:` (the workspace checks above name the workspaces near it); "+
			"only if this workspace is to take the mirror over, run `handoff sync --adopt-mirror %s` once (docs/mirror.md)", h.Name)
	case st.Generation == 0 && info != nil && info.Generation > 0:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the mirror at %s is at generation %d, but this workspace has no record of publishing it", h.Mirror.Path, info.Generation)
		c.Hint = fmt.Sprintf("run `handoff sync --host %s`: it checks every file and sends what differs", h.Name)
	case st.Generation == 0:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("nothing has been published to the mirror at %s yet", h.Mirror.Path)
		c.Hint = fmt.Sprintf("run `handoff sync --host %s`", h.Name)
	default:
		c.Message = fmt.Sprintf("mirror %s: generation %d, last changed %s ago", st.Dir, st.Generation, roundAge(opts.Now().Sub(st.PublishedAt)))
		if last != nil && last.Outcome == mirror.OutcomeSkipped {
			// The mirror check comes last among the host's, after the
			// workspace's: what made the run skip it is above.
			msg, own := splitHint(last.Error)
			c.Status = CheckWarn
			c.Message += "; the last run skipped it: " + msg
			switch {
			case own != "":
				c.Hint = own + "; then run `handoff sync --host " + h.Name + "`"
			case strings.HasPrefix(last.Error, "ingest failed"):
				c.Hint = fmt.Sprintf("see the workspace's last-run check above, then run `handoff sync --host %s`", h.Name)
			default:
				c.Hint = fmt.Sprintf("see the checks of host %s above, then run `handoff sync --host %s`", h.Name, h.Name)
			}
		}
	}
	return c
}

// splitHint splits an error a run stored (a receipt's) into its message,
// on one line, and the hint it carried ("…\nhint: …"), if any, so that
// a check prints the hint as its own.
func splitHint(stored string) (msg, hint string) {
	msg = stored
	for _, sep := range []string{"\nhint: ", "; hint: "} {
		if m, h, ok := strings.Cut(stored, sep); ok {
			msg, hint = m, strings.ReplaceAll(strings.TrimSpace(h), "\n", " ")
			break
		}
	}
	return strings.ReplaceAll(msg, "\n", "; "), hint
}

// short is a workspace id's first 8 hex digits, as messages give it.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
