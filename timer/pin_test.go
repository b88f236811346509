package timer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/timer"
)

// pinnedJob is a job whose binary is a shell script that leaves a mark
// when it runs, pinned to its hash.
func pinnedJob(t *testing.T) (timer.Job, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "handoff")
	mark := filepath.Join(dir, "ran")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sha, err := timer.HashFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Fatalf("sha256sum (coreutils) is needed: %v", err)
	}
	return timer.Job{Binary: bin, Manifest: "/m.yaml", Every: time.Hour, SHA256: sha, SHA256Sum: sum}, mark
}

// TestPinnedService: Install writes the pin before the units, the service
// checks it (ExecStartPre) before ExecStart, and Uninstall removes it.
// Invariant (fail closed): once the binary changes, the check fails, so
// systemd never starts it.
func TestPinnedService(t *testing.T) {
	j, _ := pinnedJob(t)
	dir := t.TempDir()
	written, err := timer.Install(dir, j)
	if err != nil {
		t.Fatal(err)
	}
	pinPath := filepath.Join(dir, timer.PinName)
	if len(written) != 3 || written[0] != pinPath {
		t.Fatalf("written %v, want the pin first", written)
	}
	b, _ := os.ReadFile(pinPath)
	if sha, bin, err := timer.ParsePin(string(b)); err != nil || sha != j.SHA256 || bin != j.Binary || string(b) != j.SHA256+"  "+j.Binary+"\n" {
		t.Fatalf("pin %q: %s %s %v", b, sha, bin, err)
	}
	svc, _ := os.ReadFile(filepath.Join(dir, timer.ServiceName))
	pre := "ExecStartPre=" + j.SHA256Sum + " --check --strict --quiet " + pinPath + "\n"
	i, k := strings.Index(string(svc), pre), strings.Index(string(svc), "ExecStart=")
	if i < 0 || k < i {
		t.Fatalf("service lacks %q before ExecStart:\n%s", pre, svc)
	}
	check := strings.Fields(strings.TrimPrefix(strings.TrimSuffix(pre, "\n"), "ExecStartPre="))
	if out, err := exec.Command(check[0], check[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("the check fails on the pinned binary: %v\n%s", err, out)
	}
	os.WriteFile(j.Binary, []byte("#!/bin/sh\necho someone else\n"), 0o755)
	if err := exec.Command(check[0], check[1:]...).Run(); err == nil {
		t.Fatal("the check passes a replaced binary")
	}
	os.Remove(j.Binary)
	if err := exec.Command(check[0], check[1:]...).Run(); err == nil {
		t.Fatal("the check passes a missing binary")
	}

	removed, err := timer.Uninstall(dir)
	if err != nil || len(removed) != 3 {
		t.Fatalf("Uninstall = %v, %v", removed, err)
	}
	if _, err := os.Stat(pinPath); !os.IsNotExist(err) {
		t.Errorf("pin left behind: %v", err)
	}
}

// TestPinnedCronLine: the crontab line runs the binary only while it
// hashes to the pin. Invariant (fail closed): a replaced binary never runs.
func TestPinnedCronLine(t *testing.T) {
	j, mark := pinnedJob(t)
	line, err := j.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.SplitN(line, " ", 6)[5]
	if out, err := exec.Command("/bin/sh", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("cron command %q: %v\n%s", cmd, err, out)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the pinned binary did not run: %v", err)
	}
	os.Remove(mark)
	os.WriteFile(j.Binary, []byte("#!/bin/sh\ntouch "+mark+"\n# changed\n"), 0o755)
	if err := exec.Command("/bin/sh", "-c", cmd).Run(); err == nil {
		t.Fatal("the cron command succeeded with a replaced binary")
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatal("a replaced binary ran")
	}
}

func TestParsePinRefuses(t *testing.T) {
	for _, s := range []string{"", "abc  /bin/handoff\n", strings.Repeat("0", 64) + "  handoff\n", strings.Repeat("0", 64) + " /bin/handoff\n", strings.Repeat("G", 64) + "  /bin/handoff\n"} {
		if _, _, err := timer.ParsePin(s); err == nil {
			t.Errorf("ParsePin(%q) accepted", s)
		}
	}
}
