package handoff

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

// PublishJob is what the parent sends a worker whose host has a mirror,
// once the run's ingest is done: publish the workspace's memory, or
// (Skip) close the connection without publishing.
type PublishJob struct {
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
}

// session is a host whose connection stays open after its pull, until
// its mirror is published (or skipped): publishing reuses it.
type session struct {
	publish func(ctx context.Context, job PublishJob) mirror.Result
	close   func()
}

// publishWith publishes a host's mirror over fsys, within the host's
// deadline counted afresh, and saves the mirror's state (not in a dry
// run).
func publishWith(ctx context.Context, fsys transport.FS, h manifest.HostConfig, rep claim.HostReport, job PublishJob, log *slog.Logger) (res mirror.Result) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("mirror panic", "host", h.Name, "panic", fmt.Sprint(r))
			res = mirror.Result{Outcome: mirror.OutcomeError, Error: fmt.Sprintf("internal error while publishing the mirror (please report): %v", r)}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	fail := func(err error) mirror.Result {
		return mirror.Result{Outcome: mirror.OutcomeError, Sent: []string{}, Removed: []string{}, Error: err.Error()}
	}
	files, err := mirror.Snapshot(job.Workspace, h.Mirror.Include)
	if err != nil {
		return fail(err)
	}
	home, err := fsys.Home(ctx)
	if err != nil {
		return fail(err)
	}
	var inboxes []string
	for _, in := range rep.Inboxes {
		inboxes = append(inboxes, in.Path)
	}
	guide := mirror.Guide(mirror.GuideInput{Host: h.Name, Canonical: job.Canonical, Dir: manifest.ExpandHome(h.Mirror.Path, home),
		Inboxes: inboxes, Cards: h.Mirror.Includes(manifest.MirrorCards), Documents: h.Mirror.Includes(manifest.MirrorDocuments)})
	files = append(files, mirror.NewFile(mirror.GuideFile, guide))
	prev, err := mirror.LoadState(job.StateFile)
	if err != nil {
		return fail(err)
	}
	res, next := mirror.Publish(ctx, fsys, prev, mirror.Options{Host: h.Name, Dir: h.Mirror.Path, Files: files,
		WorkspaceID: job.WorkspaceID, Adopt: job.Adopt,
		Canonical: job.Canonical, RunID: job.RunID, Now: job.Now, DryRun: job.DryRun, Log: log})
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && res.Outcome == mirror.OutcomeError {
		res.Error = fmt.Sprintf("deadline of %s exceeded: %s", h.Timeout, res.Error)
	}
	if !job.DryRun && next != prev {
		if err := next.Save(job.StateFile); err != nil {
			res.Outcome, res.Error = mirror.OutcomeError, fmt.Sprintf("published, but: %v", err)
		}
	}
	return res
}

// workerSession is the parent's end of a worker kept for publishing: the
// worker has sent its pull report and waits for a PublishJob on stdin.
type workerSession struct {
	h      manifest.HostConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    <-chan workerMsg
	done   <-chan error
	log    *slog.Logger
	closed bool
}

// workerMsg is one JSON value a worker wrote to stdout, or why reading
// stopped.
type workerMsg struct {
	data []byte
	err  error
}

// maxWorkerMsgs is how many JSON values a worker sends: its pull report
// and, for a host with a mirror, the mirror's result.
const maxWorkerMsgs = 2

// readWorker sends the first maxWorkerMsgs JSON values r holds (at most
// max bytes in all) on the returned channel, then, if there is room, the
// error that ended the reading, and closes it. Anything more is read and
// dropped, so that the worker never blocks on a full pipe. done is closed
// once r is read to its end, when cmd.Wait may be called.
func readWorker(r io.Reader, max int64) (msgs <-chan workerMsg, done <-chan struct{}) {
	ch := make(chan workerMsg, maxWorkerMsgs+1)
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		defer close(ch)
		lr := &io.LimitedReader{R: r, N: max}
		dec := json.NewDecoder(bufio.NewReader(lr))
		for n := 0; ; n++ {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if err == nil && n < maxWorkerMsgs {
				ch <- workerMsg{data: raw}
				continue
			}
			if err == nil {
				err = errors.New("worker sent more than it should")
			} else if lr.N <= 0 {
				err = fmt.Errorf("worker output larger than %d bytes", max)
			}
			ch <- workerMsg{err: err}
			io.Copy(io.Discard, r)
			return
		}
	}()
	return ch, fin
}

// publish sends the job and waits for the worker's result, at most the
// host's deadline plus a grace; then the worker is gone.
func (s *workerSession) publish(ctx context.Context, job PublishJob) mirror.Result {
	defer s.close()
	fail := func(format string, args ...any) mirror.Result {
		err := fmt.Errorf(format, args...)
		s.log.Warn("mirror failed", "host", s.h.Name, "err", err)
		return mirror.Result{Outcome: mirror.OutcomeError, Sent: []string{}, Removed: []string{}, Error: err.Error()}
	}
	if err := json.NewEncoder(s.stdin).Encode(job); err != nil {
		return fail("worker: send the publish job: %v", err)
	}
	result := func(m workerMsg, ok bool) mirror.Result {
		if !ok || m.err != nil {
			return fail("worker sent no mirror result: %v", m.err)
		}
		var res mirror.Result
		if err := json.Unmarshal(m.data, &res); err != nil || res.Outcome == "" {
			return fail("worker sent no valid mirror result")
		}
		return res
	}
	timer := time.NewTimer(s.h.Timeout + workerGrace)
	defer timer.Stop()
	select {
	case m, ok := <-s.out:
		return result(m, ok)
	case <-timer.C:
		return fail("worker did not finish the mirror within the host's deadline of %s; killed", s.h.Timeout)
	case <-ctx.Done():
	}
	// The run was interrupted. The worker has a process group of its own,
	// so a terminal's ^C did not reach it: it is told to stop too, and
	// given a grace to say what it did, which the receipt then records
	// (it may have written files, or even finished).
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	grace := time.NewTimer(workerGrace)
	defer grace.Stop()
	select {
	case m, ok := <-s.out:
		return result(m, ok)
	case <-grace.C:
		return fail("the worker did not say within %s what it had published", workerGrace)
	}
}

// close ends the worker: EOF on its stdin tells it to exit; the process
// group is killed after a grace.
func (s *workerSession) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(workerGrace):
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// CanonicalName is the canonical host's name as MIRROR.json and the
// writers' guides give it.
func CanonicalName() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "the canonical host"
}
