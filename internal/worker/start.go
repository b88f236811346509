package worker

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
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
)

// Bounds on what the parent accepts from a worker.
const (
	maxWorkerReport = 16 << 20 // the JSON report on stdout
	maxWorkerLine   = 4 << 10  // one log line on stderr
	workerGrace     = 3 * time.Second
)

// Puller pulls a run's hosts: each in a worker process of its own (a
// child of the same binary, Binary), or without one in the run's own.
// Either way the pull records through Records, the run's one writer.
type Puller struct {
	// Binary is the handoff binary each host's pull runs in, isolated in
	// its own process; "" pulls in this process (tests, library use).
	Binary string
	Dial   setup.Dialer // in-process pulls only; nil: setup.Dial
	// WalksDir holds the hosts' walk hints (claim.WalkHint).
	WalksDir string
	// Records stores and records what the pulls claim: the bytes go with
	// the records, into the ledger's commit.
	Records *RecordQueue
	RunID   string
	DryRun  bool
	Now     func() time.Time // in-process pulls' clock
	// Progress, when set, is given a worker's progress (inboxes scanned
	// and handoffs stored so far) as it comes.
	Progress func(host string, inboxes, pulled int)
	Log      *slog.Logger
	// Procs is how many threads each worker's Go code may run on at once
	// (GOMAXPROCS; see Procs); 0 leaves the worker's runtime its default.
	Procs int
}

// Procs is a worker's share of the run's cores when workers pull at
// once: cores / workers, at least one. A worker mostly waits on its host,
// and one that may run on more threads than its share spends CPU waking
// and parking them for each reply (futex and scheduler work, about a
// tenth of the workers' CPU at eight hosts on two cores).
func Procs(cores, workers int) int {
	if workers <= 0 {
		return cores
	}
	return max(1, cores/workers)
}

// Pull pulls host h and returns its report. For a host with a mirror
// whose pull did not fail, the connection stays open and the Session
// returned publishes over it; else the session is nil.
func (p *Puller) Pull(ctx context.Context, h manifest.HostConfig) (claim.HostReport, *Session) {
	if p.Binary != "" {
		return p.inWorker(ctx, h)
	}
	pullCtx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	fsys, err := p.Dial.Or(p.Log)(pullCtx, h)
	if err != nil {
		p.Log.Warn("host failed", "host", h.Name, "err", err)
		return claim.HostReport{Name: h.Name, Transport: h.Transport, Outcome: claim.OutcomeError, Error: err.Error()}, nil
	}
	hint := claim.LoadWalkHint(claim.WalkHintPath(p.WalksDir, h.Name), !p.DryRun, p.Log)
	rep := pull(pullCtx, fsys, h, p.Records.Recorder(h.Name), p.RunID, p.DryRun, p.Now, hint, p.Log)
	if h.Mirror == nil || rep.Outcome == claim.OutcomeError {
		fsys.Close()
		return rep, nil
	}
	return rep, &Session{
		publish: func(ctx context.Context, job mirror.Job) mirror.Result {
			defer fsys.Close()
			return mirror.PublishHost(ctx, fsys, h, inboxPaths(rep), job, p.Log)
		},
		close: func() { fsys.Close() },
	}
}

// progress is host's progress callback for relayLog, nil without one.
func (p *Puller) progress(host string) func(inboxes, pulled int) {
	if p.Progress == nil {
		return nil
	}
	return func(inboxes, pulled int) { p.Progress(host, inboxes, pulled) }
}

// inWorker runs one host's pull in a child process of the same binary
// and reads its report. When the host's deadline plus a short grace
// passes, or the run is interrupted, the child is told to stop (SIGTERM
// to its process group) and given workerGrace to report what it did,
// then killed; a child that crashes, hangs or sends garbage makes the
// host fail, never the run. For a host with a
// mirror whose pull did not fail, the child stays, connected, and the
// returned session publishes through it.
func (p *Puller) inWorker(ctx context.Context, h manifest.HostConfig) (claim.HostReport, *Session) {
	log := p.Log
	fail := func(format string, args ...any) claim.HostReport {
		err := fmt.Errorf(format, args...)
		log.Warn("host failed", "host", h.Name, "err", err)
		return claim.HostReport{Name: h.Name, Transport: h.Transport, Outcome: claim.OutcomeError, Error: err.Error()}
	}
	wantMirror := h.Mirror != nil
	job, err := json.Marshal(Job{Host: h, RunID: p.RunID, DryRun: p.DryRun, Mirror: wantMirror, WalkHint: claim.WalkHintPath(p.WalksDir, h.Name),
		SSHConfig: setup.HandedSSHConfig(h), Procs: p.Procs})
	if err != nil {
		return fail("worker: %v", err), nil
	}
	cmd := exec.Command(p.Binary, Command)
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
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	child.Close() // the worker has its own copy, if it started
	if err != nil {
		records.Close()
		return fail("worker: start %s: %v", p.Binary, err), nil
	}
	go func() {
		if err := serveRecords(ctx, records, p.Records.Recorder(h.Name)); err != nil {
			log.Warn("worker records", "host", h.Name, "err", err)
		}
	}()
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, outRead := readWorker(stdout, maxWorkerReport)
	relayed := make(chan struct{})
	go func() {
		relayLog(stderr, h.Name, log, p.progress(h.Name))
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
	// stop ends a worker the run no longer waits for: SIGTERM to its
	// process group (a terminal's ^C does not reach it: it has a group of
	// its own), a grace to send the report it then makes of what it
	// stored and archived, and SIGKILL. It returns that report, if one
	// came.
	stop := func() (claim.HostReport, bool) {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		stdin.Close()
		grace := time.NewTimer(workerGrace)
		defer grace.Stop()
		var rep claim.HostReport
		got := false
		select {
		case m, ok := <-out:
			got = ok && m.err == nil && json.Unmarshal(m.data, &rep) == nil && rep.Name == h.Name
		case <-grace.C:
		}
		exited := false
		if got {
			select {
			case <-done:
				exited = true
			case <-grace.C:
			}
		}
		kill()
		if !exited {
			<-done
		}
		return rep, got
	}
	var msg workerMsg
	select {
	case m, ok := <-out:
		msg = m
		if !ok {
			msg.err = io.EOF
		}
	case <-timer.C:
		if rep, ok := stop(); ok {
			return rep, nil
		}
		return fail("worker did not finish within the host's deadline of %s; killed", h.Timeout), nil
	case <-ctx.Done():
		if rep, ok := stop(); ok {
			log.Warn("run canceled: the worker reported what it did", "host", h.Name, "outcome", rep.Outcome)
			return rep, nil
		}
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
	return rep, &Session{publish: ws.publish, close: ws.close}
}

// relayLog copies a worker's JSON log lines into the parent's log, and hands
// each progress line's counts to progress (when set).
func relayLog(r io.Reader, host string, log *slog.Logger, progress func(inboxes, pulled int)) {
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
			progress(jsonCount(rec["inboxes"]), jsonCount(rec["pulled"]))
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
