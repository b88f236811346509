package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
)

// Session is a host whose connection stays open after its pull, until
// its mirror is published (or the session closed): publishing reuses it.
type Session struct {
	publish func(ctx context.Context, job mirror.Job) mirror.Result
	close   func()
}

// Publish publishes the host's mirror over the pull's connection, then
// closes the session.
func (s *Session) Publish(ctx context.Context, job mirror.Job) mirror.Result {
	return s.publish(ctx, job)
}

// Close ends the session without publishing.
func (s *Session) Close() { s.close() }

// workerSession is the parent's end of a worker kept for publishing: the
// worker has sent its pull report and waits for a mirror.Job on stdin.
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
func (s *workerSession) publish(ctx context.Context, job mirror.Job) mirror.Result {
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
