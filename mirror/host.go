package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
)

// Job is one host's publish as a run asks for it, once the run's ingest
// is done: publish the workspace's memory, or (Skip) close the
// connection without publishing. A run sends it as JSON to the worker
// that holds the host's connection.
type Job struct {
	Skip      bool      `json:"skip,omitempty"`
	Workspace string    `json:"workspace"`
	StateFile string    `json:"state_file"`
	Canonical string    `json:"canonical"`
	RunID     string    `json:"run_id"`
	Now       time.Time `json:"now"`
	DryRun    bool      `json:"dry_run"`

	// WorkspaceID is the workspace's identity, for the mirror's
	// MIRROR.json; empty only in a dry run on a workspace an earlier
	// handoff made.
	WorkspaceID string `json:"workspace_id"`
	// Adopt publishes over a mirror whose MIRROR.json names another
	// workspace (sync --adopt-mirror): the mirror is handed over.
	Adopt bool `json:"adopt,omitempty"`
	// Files are the host's repos/ files (internal/continuity), for a
	// mirror that includes repos.
	Files []File `json:"files,omitempty"`
	// Withhold are workspace paths (cards, documents) this host's mirror
	// must not hold: a private handoff of another host wrote them
	// (continuity.PrivateTargets; docs/manifest.md).
	Withhold []string `json:"withhold,omitempty"`
}

// MaxJobBytes bounds what a worker reads on stdin: its pull job, then a
// Job, which may carry repos/ (in base64, a third more).
const MaxJobBytes = 1<<20 + 2*MaxReposBytes

// PublishHost publishes h's mirror over fsys: the workspace's snapshot
// and the host's writer's guide (naming inboxes, the inboxes its pull
// found), within the host's deadline counted afresh, and saves the
// mirror's state (not in a dry run). A panic is the host's error, not
// the caller's.
func PublishHost(ctx context.Context, fsys transport.FS, h manifest.HostConfig, inboxes []string, job Job, log *slog.Logger) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("mirror panic", "host", h.Name, "panic", fmt.Sprint(r))
			res = Result{Outcome: OutcomeError, Error: fmt.Sprintf("internal error while publishing the mirror (please report): %v", r)}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	fail := func(err error) Result {
		return Result{Outcome: OutcomeError, Sent: []string{}, Removed: []string{}, Error: err.Error()}
	}
	files, err := Snapshot(job.Workspace, h.Mirror.Include)
	if err != nil {
		return fail(err)
	}
	files = Withhold(files, job.Withhold)
	home, err := fsys.Home(ctx)
	if err != nil {
		return fail(err)
	}
	guide := Guide(GuideInput{Host: h.Name, Canonical: job.Canonical, Dir: manifest.ExpandHome(h.Mirror.Path, home),
		Inboxes: inboxes, Cards: h.Mirror.Includes(manifest.MirrorCards), Documents: h.Mirror.Includes(manifest.MirrorDocuments),
		Repos: h.Mirror.Includes(manifest.MirrorRepos)})
	files = append(files, NewFile(GuideFile, guide))
	files = append(files, job.Files...)
	prev, err := LoadState(job.StateFile)
	if err != nil {
		return fail(err)
	}
	res, next := Publish(ctx, fsys, prev, Options{Host: h.Name, Dir: h.Mirror.Path, Files: files,
		WorkspaceID: job.WorkspaceID, Adopt: job.Adopt,
		Canonical: job.Canonical, RunID: job.RunID, Now: job.Now, DryRun: job.DryRun, Log: log})
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Outcome == OutcomeError {
		res.Error = fmt.Sprintf("deadline of %s exceeded: %s", h.Timeout, res.Error)
	}
	if !job.DryRun && next != prev {
		if err := next.Save(job.StateFile); err != nil {
			res.Outcome, res.Error = OutcomeError, fmt.Sprintf("published, but: %v", err)
		}
	}
	return res
}

// CanonicalName is the canonical host's name as MIRROR.json and the
// writers' guides give it.
func CanonicalName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "the canonical host"
}

// Withhold returns files without those at the paths given.
func Withhold(files []File, paths []string) []File {
	if len(paths) == 0 {
		return files
	}
	drop := map[string]bool{}
	for _, p := range paths {
		drop[p] = true
	}
	return slices.DeleteFunc(files, func(f File) bool { return drop[f.Path] })
}
