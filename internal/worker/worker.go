package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// Command is the hidden subcommand a worker process runs.
const Command = "__pull"

// Job is what the parent sends a worker on stdin.
type Job struct {
	Host  manifest.HostConfig `json:"host"`
	RunID string              `json:"run_id"`
	// WalkHint is the host's walk hint file (claim.WalkHint); "" for none.
	WalkHint string `json:"walk_hint,omitempty"`
	DryRun   bool   `json:"dry_run"`
	// Mirror: after the report, wait for a mirror.Job on stdin and
	// publish the host's mirror over the same connection.
	Mirror bool `json:"mirror,omitempty"`
	// SSHConfig is ~/.ssh/config as the run read it (setup.HandedSSHConfig),
	// which the worker resolves the host with instead of reading the
	// file again; nil: the worker reads it.
	SSHConfig *sshfs.ConfigFile `json:"ssh_config,omitempty"`
	// Procs, when above zero, is the worker's GOMAXPROCS (Puller.Procs).
	Procs int `json:"procs,omitempty"`
}

// maxJobBytes bounds what a worker reads on stdin: the pull's Job, with
// the ssh_config it carries, and the mirror.Job.
const maxJobBytes = mirror.MaxJobBytes + 2*setup.MaxHandedSSHConfig

// Serve runs one host's pull as a worker: it reads a Job from r, opens
// the spool, dials the host, pulls, recording what it stores and
// archives through records (the run's records connection, records.go),
// and writes the claim.HostReport as JSON to w. For a job with Mirror, it
// then reads a mirror.Job from r and writes the mirror.Result, over the
// same connection. Logs go to log (the parent relays them).
func Serve(ctx context.Context, r io.Reader, w io.Writer, records net.Conn, log *slog.Logger) error {
	defer records.Close()
	var job Job
	dec := json.NewDecoder(io.LimitReader(r, maxJobBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("worker: read job: %w", err)
	}
	if job.Procs > 0 {
		runtime.GOMAXPROCS(job.Procs)
	}
	rep, fsys := pullJob(ctx, job, newRecordClient(records), log)
	if fsys != nil {
		defer fsys.Close()
	}
	if err := json.NewEncoder(w).Encode(rep); err != nil {
		return err
	}
	if !job.Mirror || fsys == nil || rep.Outcome == claim.OutcomeError {
		return nil
	}
	var pj mirror.Job
	if err := dec.Decode(&pj); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // the parent decided not to publish
		}
		return fmt.Errorf("worker: read publish job: %w", err)
	}
	if pj.Skip {
		return nil
	}
	return json.NewEncoder(w).Encode(mirror.PublishHost(ctx, fsys, job.Host, inboxPaths(rep), pj, log))
}

// pullJob pulls one host and returns its report, and the connection, still
// open, when the pull got one.
func pullJob(ctx context.Context, job Job, rec claim.Recorder, log *slog.Logger) (rep claim.HostReport, fsys transport.FS) {
	h := job.Host
	fail := func(err error) claim.HostReport {
		return claim.HostReport{Name: h.Name, Transport: h.Transport, Outcome: claim.OutcomeError, Error: err.Error()}
	}
	// Whatever a host sends must not crash the run; a panic here is a bug,
	// reported as this host's failure with what went wrong.
	defer func() {
		if r := recover(); r != nil {
			log.Error("worker panic", "host", h.Name, "panic", fmt.Sprint(r))
			rep = fail(fmt.Errorf("internal error while pulling (please report): %v", r))
		}
	}()
	pullCtx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	setup.UseSSHConfig(job.SSHConfig)
	// Connecting is mostly waiting on the network (about eight round
	// trips): dial first and read the walk hint meanwhile.
	dialed := make(chan dialResult, 1)
	go func() { dialed <- dial(pullCtx, h, log) }()
	hint := claim.LoadWalkHint(job.WalkHint, !job.DryRun, log)
	d := <-dialed
	if d.err != nil {
		return fail(d.err), nil
	}
	fsys = d.fsys
	log.Debug("connected", "host", h.Name, "took", d.took)
	return pull(pullCtx, fsys, h, rec, job.RunID, job.DryRun, time.Now, hint, log), fsys
}

// dialResult is a connection setup.Dial made, or why it could not.
type dialResult struct {
	fsys transport.FS
	err  error
	took time.Duration
}

// dial runs setup.Dial for pullJob's goroutine, where a panic would not
// reach pullJob's recover: it becomes the dial's error.
func dial(ctx context.Context, h manifest.HostConfig, log *slog.Logger) (d dialResult) {
	began := time.Now()
	defer func() {
		if r := recover(); r != nil {
			log.Error("worker panic", "host", h.Name, "panic", fmt.Sprint(r))
			d = dialResult{err: fmt.Errorf("internal error while connecting (please report): %v", r)}
		}
	}()
	fsys, err := setup.Dial(ctx, h, log)
	return dialResult{fsys: fsys, err: err, took: time.Since(began)}
}

// pull runs claim.Pull with a host's settings and turns a blown
// deadline into a host error.
func pull(ctx context.Context, fsys transport.FS, h manifest.HostConfig, rec claim.Recorder, runID string, dryRun bool, now func() time.Time, hint *claim.WalkHint, log *slog.Logger) claim.HostReport {
	cfg := setup.ClaimConfig(h, log)
	cfg.DryRun, cfg.Now = dryRun, now
	cfg.Unfilled = ingest.Unfilled
	var walked *claim.Hint
	cfg.Hint = hint.Hint
	cfg.Walked = func(h claim.Hint) { walked = &h }
	// In a worker this log is stderr as JSON lines: relayLog turns each of
	// these into a "pulling" update for the parent's Progress.
	cfg.Progress = func(inboxes, pulled int) {
		log.Debug(progressMsg, "host", h.Name, "inboxes", inboxes, "pulled", pulled)
	}
	rep := claim.Pull(ctx, fsys, cfg, rec, runID, ingest.Parses)
	if walked != nil {
		hint.Save(*walked, log)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rep.Outcome, rep.Error = "error", fmt.Sprintf("deadline of %s exceeded: %s", h.Timeout, rep.Error)
	}
	return rep
}

// progressMsg is the message of a worker's progress log line (fields
// inboxes and pulled).
const progressMsg = "progress"

// inboxPaths are the inboxes a host's pull found, for its writer's
// guide.
func inboxPaths(rep claim.HostReport) []string {
	var inboxes []string
	for _, in := range rep.Inboxes {
		inboxes = append(inboxes, in.Path)
	}
	return inboxes
}
