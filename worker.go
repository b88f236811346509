package handoff

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

// WorkerCommand is the hidden subcommand a worker process runs.
const WorkerCommand = "__pull"

// Bounds on what the parent accepts from a worker.
const (
	maxWorkerReport = 16 << 20 // the JSON report on stdout
	maxWorkerLine   = 4 << 10  // one log line on stderr
	workerGrace     = 3 * time.Second
)

// WorkerJob is what the parent sends a worker on stdin.
type WorkerJob struct {
	Host      manifest.HostConfig `json:"host"`
	Spool     string              `json:"spool"`
	BaseSpool string              `json:"base_spool,omitempty"`
	RunID     string              `json:"run_id"`
	// WalkHint is the host's walk hint file (claim.WalkHint); "" for none.
	WalkHint string `json:"walk_hint,omitempty"`
	DryRun   bool   `json:"dry_run"`
	// Mirror: after the report, wait for a mirror.Job on stdin and
	// publish the host's mirror over the same connection.
	Mirror bool `json:"mirror,omitempty"`
}

// ServeWorker runs one host's pull as a worker: it reads a WorkerJob from r,
// opens the spool, dials the host, pulls, recording what it stores and
// archives through records (the run's records connection, recordconn.go),
// and writes the claim.HostReport as JSON to w. For a job with Mirror, it
// then reads a mirror.Job from r and writes the mirror.Result, over the
// same connection. Logs go to log (the parent relays them).
func ServeWorker(ctx context.Context, r io.Reader, w io.Writer, records net.Conn, log *slog.Logger) error {
	defer records.Close()
	var job WorkerJob
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("worker: read job: %w", err)
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
func pullJob(ctx context.Context, job WorkerJob, rec claim.Recorder, log *slog.Logger) (rep claim.HostReport, fsys transport.FS) {
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
	// Connecting is mostly waiting on the network (about eight round
	// trips): dial first and open the spool and the walk hint meanwhile.
	dialed := make(chan dialResult, 1)
	go func() { dialed <- dial(pullCtx, h, log) }()
	// closeDialed waits for a dial whose connection will not be used.
	closeDialed := func() {
		cancel()
		if d := <-dialed; d.fsys != nil {
			d.fsys.Close()
		}
	}
	sp, closeSpool, err := spool.OpenLayered(job.Spool, job.BaseSpool)
	if err != nil {
		closeDialed()
		return fail(err), nil
	}
	defer closeSpool()
	hint := claim.LoadWalkHint(job.WalkHint, !job.DryRun, log)
	d := <-dialed
	if d.err != nil {
		return fail(d.err), nil
	}
	fsys = d.fsys
	log.Debug("connected", "host", h.Name, "took", d.took)
	return pullWith(pullCtx, fsys, h, sp, rec, job.RunID, job.DryRun, time.Now, hint, log), fsys
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

// pullWith runs claim.Pull with a host's settings and turns a blown
// deadline into a host error.
func pullWith(ctx context.Context, fsys transport.FS, h manifest.HostConfig, sp spool.Store, rec claim.Recorder, runID string, dryRun bool, now func() time.Time, hint *claim.WalkHint, log *slog.Logger) claim.HostReport {
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
	rep := claim.Pull(ctx, fsys, cfg, sp, rec, runID, ingest.Parses)
	if walked != nil {
		hint.Save(*walked, log)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rep.Outcome, rep.Error = "error", fmt.Sprintf("deadline of %s exceeded: %s", h.Timeout, rep.Error)
	}
	return rep
}

// pullInWorker runs one host's pull in a child process of the same binary
// and reads its report. The child is killed (with its process group) when
// the host's deadline plus a short grace passes; a child that crashes, hangs
// or sends garbage makes the host fail, never the run. For a host with a
// mirror whose pull did not fail, the child stays, connected, and the
// returned session publishes through it.
func pullInWorker(ctx context.Context, h manifest.HostConfig, opts Options, st *state, runID string, log *slog.Logger) (claim.HostReport, *session) {
	fail := func(format string, args ...any) claim.HostReport {
		err := fmt.Errorf(format, args...)
		log.Warn("host failed", "host", h.Name, "err", err)
		return claim.HostReport{Name: h.Name, Transport: h.Transport, Outcome: claim.OutcomeError, Error: err.Error()}
	}
	wantMirror := h.Mirror != nil
	job, err := json.Marshal(WorkerJob{Host: h, Spool: st.spoolDir, BaseSpool: st.baseSpool, RunID: runID, DryRun: opts.DryRun, Mirror: wantMirror, WalkHint: claim.WalkHintPath(st.walksDir, h.Name)})
	if err != nil {
		return fail("worker: %v", err), nil
	}
	cmd := exec.Command(opts.Worker, WorkerCommand)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fail("worker: %v", err), nil
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fail("worker: %v", err), nil
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fail("worker: %v", err), nil
	}
	records, child, err := recordsPair()
	if err != nil {
		return fail("worker: %v", err), nil
	}
	cmd.ExtraFiles = []*os.File{child} // recordsFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	child.Close() // the worker has its own copy, if it started
	if err != nil {
		records.Close()
		return fail("worker: start %s: %v", opts.Worker, err), nil
	}
	go func() {
		if err := serveRecords(ctx, records, st.records.recorder(h.Name)); err != nil {
			log.Warn("worker records", "host", h.Name, "err", err)
		}
	}()
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, outRead := readWorker(stdout, maxWorkerReport)
	relayed := make(chan struct{})
	go func() {
		relayLog(stderr, h.Name, log, opts.Progress)
		close(relayed)
	}()
	done := make(chan error, 1)
	go func() {
		<-relayed // Wait closes the pipes; read them all first
		<-outRead
		done <- cmd.Wait()
	}()
	stdin.Write(append(job, '\n'))
	if !wantMirror {
		stdin.Close()
	}
	timer := time.NewTimer(h.Timeout + workerGrace)
	defer timer.Stop()
	var msg workerMsg
	select {
	case m, ok := <-out:
		msg = m
		if !ok {
			msg.err = io.EOF
		}
	case <-timer.C:
		kill()
		<-done
		return fail("worker did not finish within the host's deadline of %s; killed", h.Timeout), nil
	case <-ctx.Done():
		kill()
		<-done
		return fail("run canceled: %v", ctx.Err()), nil
	}
	var rep claim.HostReport
	if msg.err != nil || json.Unmarshal(msg.data, &rep) != nil || rep.Name != h.Name {
		stdin.Close()
		var waitErr error
		select {
		case waitErr = <-done:
		case <-time.After(workerGrace):
		}
		kill()
		if waitErr != nil {
			return fail("worker crashed: %v", waitErr), nil
		}
		if msg.err != nil && msg.err != io.EOF {
			return fail("worker: %v", msg.err), nil
		}
		return fail("worker sent no valid report"), nil
	}
	ws := &workerSession{h: h, cmd: cmd, stdin: stdin, out: out, done: done, log: log}
	if !wantMirror || rep.Outcome == claim.OutcomeError {
		ws.close()
		return rep, nil
	}
	return rep, &session{publish: ws.publish, close: ws.close}
}

// progressMsg is the message of a worker's progress log line (fields
// inboxes and pulled).
const progressMsg = "progress"

// relayLog copies a worker's JSON log lines into the parent's log, and hands
// each progress line to progress (when set) as a "pulling" update.
func relayLog(r io.Reader, host string, log *slog.Logger, progress func(HostProgress)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxWorkerLine)
	for {
		if !sc.Scan() {
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				// Skip the rest of an oversized line and go on.
				sc = bufio.NewScanner(r)
				sc.Buffer(make([]byte, 0, 1024), maxWorkerLine)
				continue
			}
			io.Copy(io.Discard, r)
			return
		}
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			log.Warn("worker output", "host", host, "line", string(sc.Bytes()))
			continue
		}
		msg, _ := rec["msg"].(string)
		if msg == progressMsg && progress != nil {
			progress(HostProgress{Host: host, State: "pulling", Inboxes: jsonCount(rec["inboxes"]), Pulled: jsonCount(rec["pulled"])})
		}
		level := slog.LevelInfo
		if l, ok := rec["level"].(string); ok {
			level.UnmarshalText([]byte(l))
		}
		attrs := []any{}
		for k, v := range rec {
			if k != "msg" && k != "level" && k != "time" {
				attrs = append(attrs, k, v)
			}
		}
		log.Log(context.Background(), level, msg, attrs...)
	}
}

// jsonCount reads a non-negative count from a decoded JSON number; anything
// else is 0.
func jsonCount(v any) int {
	f, _ := v.(float64)
	if !(f >= 0) || f > 1<<31 {
		return 0
	}
	return int(f)
}

// limitedBuffer keeps at most max bytes and remembers if more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// recordsPair makes a worker's records connection: the run's end, and the
// file to hand the worker as its descriptor recordsFD.
func recordsPair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("records connection: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "records")
	conn, err := fileConn(os.NewFile(uintptr(fds[0]), "records"))
	if err != nil {
		child.Close()
		return nil, nil, fmt.Errorf("records connection: %w", err)
	}
	return conn, child, nil
}

// fileConn turns a socket's file into a net.Conn, and closes the file.
func fileConn(f *os.File) (net.Conn, error) {
	defer f.Close()
	return net.FileConn(f)
}

// WorkerRecords is a worker's end of its records connection.
func WorkerRecords() (net.Conn, error) {
	conn, err := fileConn(os.NewFile(recordsFD, "records"))
	if err != nil {
		return nil, fmt.Errorf("worker: the records connection (descriptor %d): %w; a worker is started by handoff sync, not by hand", recordsFD, err)
	}
	return conn, nil
}
