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
	"os/exec"
	"syscall"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
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
	Ledger    string              `json:"ledger"`
	Spool     string              `json:"spool"`
	BaseSpool string              `json:"base_spool,omitempty"`
	RunID     string              `json:"run_id"`
	DryRun    bool                `json:"dry_run"`
}

// ServeWorker runs one host's pull as a worker: it reads a WorkerJob from r,
// opens the ledger and spool, dials the host, pulls, and writes the
// claim.HostReport as JSON to w. Logs go to log (the parent relays them).
func ServeWorker(ctx context.Context, r io.Reader, w io.Writer, log *slog.Logger) error {
	var job WorkerJob
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		return fmt.Errorf("worker: read job: %w", err)
	}
	rep := pullJob(ctx, job, log)
	return json.NewEncoder(w).Encode(rep)
}

func pullJob(ctx context.Context, job WorkerJob, log *slog.Logger) (rep claim.HostReport) {
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
	sp, err := openSpool(job.Spool, job.BaseSpool)
	if err != nil {
		return fail(err)
	}
	defer sp.close()
	led, err := ledger.Open(job.Ledger)
	if err != nil {
		return fail(err)
	}
	defer led.Close()
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	began := time.Now()
	fsys, err := setup.Dial(ctx, h, log)
	if err != nil {
		return fail(err)
	}
	defer fsys.Close()
	log.Debug("connected", "host", h.Name, "took", time.Since(began))
	return pullWith(ctx, fsys, h, sp, led, job.RunID, job.DryRun, time.Now, log)
}

// pullWith runs claim.Pull with a host's settings and turns a blown
// deadline into a host error.
func pullWith(ctx context.Context, fsys transport.FS, h manifest.HostConfig, sp spool.Store, rec claim.Recorder, runID string, dryRun bool, now func() time.Time, log *slog.Logger) claim.HostReport {
	cfg := setup.ClaimConfig(h, log)
	cfg.DryRun, cfg.Now = dryRun, now
	// In a worker this log is stderr as JSON lines: relayLog turns each of
	// these into a "pulling" update for the parent's Progress.
	cfg.Progress = func(inboxes, pulled int) {
		log.Debug(progressMsg, "host", h.Name, "inboxes", inboxes, "pulled", pulled)
	}
	rep := claim.Pull(ctx, fsys, cfg, sp, rec, runID, ingest.Parses)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		rep.Outcome, rep.Error = "error", fmt.Sprintf("deadline of %s exceeded: %s", h.Timeout, rep.Error)
	}
	return rep
}

// pullInWorker runs one host's pull in a child process of the same binary
// and reads its report. The child is killed (with its process group) when
// the host's deadline plus a short grace passes; a child that crashes, hangs
// or sends garbage makes the host fail, never the run.
func pullInWorker(ctx context.Context, h manifest.HostConfig, opts Options, st *state, runID string, log *slog.Logger) claim.HostReport {
	fail := func(format string, args ...any) claim.HostReport {
		err := fmt.Errorf(format, args...)
		log.Warn("host failed", "host", h.Name, "err", err)
		return claim.HostReport{Name: h.Name, Transport: h.Transport, Outcome: claim.OutcomeError, Error: err.Error()}
	}
	job, err := json.Marshal(WorkerJob{Host: h, Ledger: st.ledgerPath, Spool: st.spoolDir, BaseSpool: st.baseSpool, RunID: runID, DryRun: opts.DryRun})
	if err != nil {
		return fail("worker: %v", err)
	}
	cmd := exec.Command(opts.Worker, WorkerCommand)
	cmd.Stdin = bytes.NewReader(job)
	var out limitedBuffer
	out.max = maxWorkerReport
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fail("worker: %v", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fail("worker: start %s: %v", opts.Worker, err)
	}
	relayed := make(chan struct{})
	go func() {
		relayLog(stderr, h.Name, log, opts.Progress)
		close(relayed)
	}()
	done := make(chan error, 1)
	go func() {
		<-relayed // Wait closes stderr; read it all first
		done <- cmd.Wait()
	}()
	timer := time.NewTimer(h.Timeout + workerGrace)
	defer timer.Stop()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fail("worker did not finish within the host's deadline of %s; killed", h.Timeout)
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return fail("run canceled: %v", ctx.Err())
	}
	// Also reap anything the worker left in its group.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if out.over {
		return fail("worker report larger than %d bytes", maxWorkerReport)
	}
	var rep claim.HostReport
	if err := json.Unmarshal(out.buf.Bytes(), &rep); err != nil || rep.Name != h.Name {
		if waitErr != nil {
			return fail("worker crashed: %v", waitErr)
		}
		return fail("worker sent no valid report")
	}
	return rep
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
