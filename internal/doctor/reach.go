package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

// reachSlack is how many directory levels beyond each discover root's
// max_depth the reach check walks for inboxes the sync does not reach.
const reachSlack = 2

// maxDepthBound is the manifest's bound on max_depth, which the wider
// walk keeps to.
const maxDepthBound = 16

// maxUnreachedShown bounds the inboxes the reach check names.
const maxUnreachedShown = 5

// doctorReach lists the inboxes a sync of h never reaches, where doctor
// can know them: those a second walk finds a little beyond the bounds
// (reachSlack levels deeper under each discover root, and in every
// default harness directory as well as the host's), which the sync's
// discovery (reached) did not. Each gets the reason and the fix that
// `handoff context` would give in that repository. The second walk
// honours opt-out markers and dot-directories as discovery does: an
// inbox a person hid is not reported. No check when the host has no
// discover root or the walk fails (discovery's own check says so).
func doctorReach(ctx context.Context, fsys transport.FS, h manifest.HostConfig, cfg claim.Config, reached []*claim.Inbox) (Check, bool) {
	if len(h.Discover) == 0 {
		return Check{}, false
	}
	wide := cfg
	wide.Inboxes, wide.Repos, wide.Log = nil, false, nil
	wide.Harnesses = slices.Clone(h.Harnesses)
	for _, hn := range manifest.DefaultHarnesses() {
		if !slices.Contains(wide.Harnesses, hn) {
			wide.Harnesses = append(wide.Harnesses, hn)
		}
	}
	wide.Roots = nil
	for _, r := range cfg.Roots {
		wide.Roots = append(wide.Roots, claim.Root{Path: r.Path, MaxDepth: min(r.MaxDepth+reachSlack, maxDepthBound)})
	}
	found, err := claim.Discover(ctx, fsys, wide)
	if err != nil {
		return Check{}, false
	}
	seen := map[string]bool{}
	for _, in := range reached {
		seen[in.Path] = true
	}
	home, _ := fsys.Home(ctx)
	reach := mirror.NewReach(h, home)
	var lines []string
	var firstFix string
	n, waiting := 0, 0
	for _, in := range found {
		if seen[in.Path] || in.State != claim.StateOK {
			continue
		}
		why, fix := continuity.NotReached(reach, in.Repo, []string{ingest.Harness(in.Path)})
		if why == "" {
			continue // the sync's walk would find it (it changed meanwhile)
		}
		n++
		waiting += len(in.Candidates)
		if len(lines) < maxUnreachedShown {
			line := fmt.Sprintf("%s: %s", displayName(in.Path), why)
			if c := len(in.Candidates); c > 0 {
				line += fmt.Sprintf(" (%d handoff(s) wait there)", c)
			}
			lines = append(lines, line)
		}
		if firstFix == "" {
			firstFix = fix
		}
	}
	if n == 0 {
		return Check{}, false
	}
	msg := fmt.Sprintf("%d inbox(es) under this host's discover roots that no sync reaches, so what agents write there reaches no agent", n)
	if waiting > 0 {
		msg += fmt.Sprintf(" (%d handoff(s) wait in them)", waiting)
	}
	msg += ": " + strings.Join(lines, "; ")
	if n > len(lines) {
		msg += fmt.Sprintf("; and %d more", n-len(lines))
	}
	return Check{Name: "reach", Status: CheckWarn, Message: msg,
		Hint: strings.TrimPrefix(firstFix, "on the canonical host, ") + " (or put a .no-memory-handoffs file in a repository that should stay unread)"}, true
}
