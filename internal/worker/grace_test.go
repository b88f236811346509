package worker

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/manifest"
)

// fakeWorkerEnv makes the test binary play a worker (see TestMain):
// "report" answers SIGTERM with a partial report, "deaf" ignores it.
const fakeWorkerEnv = "HANDOFF_TEST_FAKE_WORKER"

// fakeReadyEnv names the file a fake worker creates once it has its job
// and its signal handling in place.
const fakeReadyEnv = "HANDOFF_TEST_FAKE_WORKER_READY"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeWorkerEnv); mode != "" {
		fakeWorker(mode)
		return
	}
	os.Exit(m.Run())
}

// fakeWorker reads the job line, says it is ready, and waits for SIGTERM.
func fakeWorker(mode string) {
	bufio.NewReader(os.Stdin).ReadString('\n')
	term := make(chan os.Signal, 1)
	if mode == "deaf" {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	os.WriteFile(os.Getenv(fakeReadyEnv), nil, 0o600)
	<-term
	fmt.Printf(`{"name":"laptop","transport":"local","outcome":"partial","error":"interrupted","inboxes":[],"items":[],"stored":3}` + "\n")
	os.Exit(0)
}

// startFake runs Puller.Pull against a fake worker, cancels the run once
// the worker is ready, and returns the report and how long the pull
// took after the cancel.
func startFake(t *testing.T, mode string) (claim.HostReport, time.Duration) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	t.Setenv(fakeWorkerEnv, mode)
	t.Setenv(fakeReadyEnv, ready)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &Puller{Binary: self, RunID: "r", Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h := manifest.HostConfig{Name: "laptop", Transport: manifest.TransportLocal, Timeout: time.Hour}
	type result struct {
		rep claim.HostReport
		at  time.Time
	}
	res := make(chan result, 1)
	go func() {
		rep, sess := p.Pull(ctx, h)
		if sess != nil {
			sess.Close()
		}
		res <- result{rep, time.Now()}
	}()
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case r := <-res:
			t.Fatalf("the pull ended before the worker was ready: %+v", r.rep)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancelled := time.Now()
	cancel()
	r := <-res
	return r.rep, r.at.Sub(cancelled)
}

// TestPullInterruptedGetsWorkerReport: an interrupted run tells its
// worker to stop and waits for its report, so that what the worker
// stored and archived before it stopped is known (issue 48, item 16: it
// was killed at once). Invariant: a worker that answers SIGTERM within
// the grace is never SIGKILLed before it reports.
func TestPullInterruptedGetsWorkerReport(t *testing.T) {
	rep, _ := startFake(t, "report")
	if rep.Outcome != claim.OutcomePartial || rep.Stored != 3 || rep.Error != "interrupted" {
		t.Fatalf("report %+v, want the worker's own (partial, stored 3)", rep)
	}
}

// TestPullInterruptedKillsDeafWorker: a worker that ignores SIGTERM is
// killed once the grace is over, and the host fails; the pull never
// waits on it for ever (the test returning shows it). Invariant: the
// worker gets the whole grace before SIGKILL (a timer never fires
// early, so this bound holds on any machine).
func TestPullInterruptedKillsDeafWorker(t *testing.T) {
	rep, took := startFake(t, "deaf")
	if rep.Outcome != claim.OutcomeError || rep.Error != "run canceled: context canceled" {
		t.Fatalf("report %+v, want the host failed as canceled", rep)
	}
	if took < workerGrace {
		t.Errorf("killed after %v, before the grace of %v", took, workerGrace)
	}
}
