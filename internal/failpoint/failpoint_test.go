package failpoint

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestInjectKills runs this test binary as a child with a failpoint armed
// at its second hit and checks that the child dies by SIGKILL exactly there.
func TestInjectKills(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Inject("store.spooled")
		os.Stdout.WriteString("first hit survived\n")
		Inject("store.spooled")
		os.Stdout.WriteString("second hit survived\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestInjectKills$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=store.spooled@2")
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
