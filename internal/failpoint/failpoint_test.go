package failpoint

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestInjectKills runs this test binary as a child with a failpoint armed
// at its second hit and checks that the child dies by SIGKILL exactly there.
func TestInjectKills(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Inject("store.sent")
		os.Stdout.WriteString("first hit survived\n")
		Inject("store.sent")
		os.Stdout.WriteString("second hit survived\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestInjectKills$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=store.sent@2")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != -1 {
		t.Fatalf("child was not killed: %v", err)
	}
	if string(out) != "first hit survived\n" {
		t.Fatalf("child printed %q, want only the first line", out)
	}
}

func TestInertWithoutEnv(t *testing.T) {
	for _, n := range slices.Concat(Names, ReviewNames, MirrorNames) {
		Inject(n) // must return: nothing is armed in this process
	}
}

// TestInjectPauses runs this test binary as a child with a failpoint
// armed to pause, signals it once it says it paused, and checks that it
// went on past the point only then, and that its own handler saw the
// signal too. Invariant: a paused process neither dies nor continues
// before the signal.
func TestInjectPauses(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		Inject("mirror.replaced")
		os.Stdout.WriteString("went on\n")
		if ctx.Err() == nil {
			os.Stdout.WriteString("the process's handler did not see the signal\n")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestInjectPauses$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=mirror.replaced:pause")
	outFile := filepath.Join(t.TempDir(), "stdout")
	out, err := os.Create(outFile)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out // the child's own descriptor: read without a race
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || line != "failpoint: paused at mirror.replaced\n" {
		cmd.Process.Kill()
		t.Fatalf("child said %q (%v), want the pause", line, err)
	}
	time.Sleep(100 * time.Millisecond)
	if b, _ := os.ReadFile(outFile); len(b) != 0 {
		t.Errorf("child went on before the signal: %q", b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if b, _ := os.ReadFile(outFile); string(b) != "went on\n" {
		t.Errorf("child printed %q, want only that it went on", b)
	}
}
