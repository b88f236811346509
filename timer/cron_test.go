package timer_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/timer"
)

// cronCommand is the shell command of a crontab line (its schedule
// dropped), with cron's "\%" turned into "%" as cron does.
func cronCommand(line string) string {
	return strings.ReplaceAll(strings.SplitN(line, " ", 6)[5], `\%`, "%")
}

// TestCronLineKeepsItsOutput: the cron line appends each run's output,
// framed by its start and exit, to the log, and ReadCronLog gives the
// last run; a failing run leaves its last lines and status there (issue
// 48, item 8: the line ended in >/dev/null 2>&1 and a failing cron sync
// left no trace). Invariant: every run that cron starts, even one the
// pin refuses, leaves its exit status in the log.
func TestCronLineKeepsItsOutput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "handoff")
	os.WriteFile(bin, []byte("#!/bin/sh\necho \"pulled: $*\"\necho 'handoff: host laptop: refused' >&2\nexit 3\n"), 0o755)
	log := filepath.Join(dir, "state 100%", "handoff", "cron.log")
	j := timer.Job{Binary: bin, Manifest: "/m.yaml", Every: time.Hour, Log: log}
	line, err := j.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(line, ">/dev/null 2>&1") || !strings.Contains(line, `100\%`) {
		t.Fatalf("cron line %s: want its output kept, %% escaped", line)
	}
	for range 2 {
		if out, _ := exec.Command("/bin/sh", "-c", cronCommand(line)).CombinedOutput(); len(out) != 0 {
			t.Fatalf("cron command's output %q, want none: it goes to the log", out)
		}
	}
	run, err := timer.ReadCronLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if run.Exit != 3 || run.Started == "" {
		t.Errorf("last run %+v, want exit 3 with its start date", run)
	}
	if want := []string{"pulled: sync --manifest /m.yaml", "handoff: host laptop: refused"}; !slices.Equal(run.Lines, want) {
		t.Errorf("last run's lines %q, want %q", run.Lines, want)
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), "handoff cron: start "); n != 2 {
		t.Errorf("log holds %d runs, want 2:\n%s", n, b)
	}

	// The pin refuses a replaced binary: its refusal is logged too.
	pj, _ := pinnedJob(t)
	pj.Log = log
	pline, err := pj.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pj.Binary, []byte("#!/bin/sh\n# replaced\n"), 0o755)
	exec.Command("/bin/sh", "-c", cronCommand(pline)).Run()
	if run, err := timer.ReadCronLog(log); err != nil || run.Exit == 0 || run.Exit == -1 || !strings.Contains(strings.Join(run.Lines, "\n"), "FAILED") {
		t.Errorf("pin refusal: %+v, %v; want a failed run with sha256sum's FAILED line", run, err)
	}
}

// TestCronLogBounded: a log over CronLogMax moves to .1 before the next
// run, so the log never grows past about twice that.
func TestCronLogBounded(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "handoff")
	os.WriteFile(bin, []byte("#!/bin/sh\necho ok\n"), 0o755)
	log := filepath.Join(dir, "cron.log")
	os.WriteFile(log, []byte(strings.Repeat("x", timer.CronLogMax)), 0o600)
	line, err := timer.Job{Binary: bin, Manifest: "/m.yaml", Every: time.Hour, Log: log}.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("/bin/sh", "-c", cronCommand(line)).Run(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(log + ".1"); err != nil || fi.Size() != timer.CronLogMax {
		t.Fatalf("old log: %v, %v; want it moved to .1 whole", fi, err)
	}
	run, err := timer.ReadCronLog(log)
	if b, _ := os.ReadFile(log); err != nil || run.Exit != 0 || len(b) > 200 {
		t.Fatalf("new log %q: %+v, %v; want only the new run", b, run, err)
	}
}

func TestReadCronLog(t *testing.T) {
	dir := t.TempDir()
	if _, err := timer.ReadCronLog(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing log: %v", err)
	}
	p := filepath.Join(dir, "log")
	os.WriteFile(p, []byte("junk\n"), 0o600)
	if _, err := timer.ReadCronLog(p); !errors.Is(err, timer.ErrNoCronRun) {
		t.Errorf("log without a run: %v", err)
	}
	// A run still going (or killed): no exit line.
	var b strings.Builder
	b.WriteString("handoff cron: start Mon\nold\nhandoff cron: exit 0\nhandoff cron: start Tue\n")
	for i := range 20 {
		b.WriteString("line " + string(rune('a'+i)) + "\n")
	}
	os.WriteFile(p, []byte(b.String()), 0o600)
	run, err := timer.ReadCronLog(p)
	if err != nil || run.Started != "Tue" || run.Exit != -1 || len(run.Lines) != 8 || run.Lines[7] != "line t" {
		t.Errorf("run %+v, %v; want Tue, no exit, its last 8 lines", run, err)
	}
}

// TestUserManager: no $XDG_RUNTIME_DIR, or one without the manager's
// socket or the bus, is no user session.
func TestUserManager(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	if err := timer.UserManager(); err == nil {
		t.Error("no XDG_RUNTIME_DIR: a session")
	}
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	if err := timer.UserManager(); err == nil {
		t.Error("an empty runtime directory: a session")
	}
	os.WriteFile(filepath.Join(rt, "bus"), nil, 0o600)
	if err := timer.UserManager(); err != nil {
		t.Errorf("with a bus: %v", err)
	}
}

// TestCronLineExitStatus: the line exits with the run's status, so that
// a cron daemon (or a person running it by hand) still sees a failure.
func TestCronLineExitStatus(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "handoff")
	os.WriteFile(bin, []byte("#!/bin/sh\nexit 75\n"), 0o755)
	line, err := timer.Job{Binary: bin, Manifest: "/m.yaml", Every: time.Hour, Log: filepath.Join(dir, "cron.log")}.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	err = exec.Command("/bin/sh", "-c", cronCommand(line)).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 75 {
		t.Fatalf("cron command: %v, want exit 75", err)
	}
}
