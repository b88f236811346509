package timer_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/timer"
)

// requiredEnv turns a missing systemd-analyze from a skip into a failure.
const requiredEnv = "HANDOFF_E2E_REQUIRED"

func TestSchedules(t *testing.T) {
	cases := []struct {
		every      time.Duration
		onCalendar string
		cron       string
	}{
		{1 * time.Minute, "*:0/1", "* * * * *"},
		{5 * time.Minute, "*:0/5", "*/5 * * * *"},
		{15 * time.Minute, "*:0/15", "*/15 * * * *"},
		{20 * time.Minute, "*:0/20", "*/20 * * * *"},
		{30 * time.Minute, "*:0/30", "*/30 * * * *"},
		{60 * time.Minute, "hourly", "0 * * * *"},
		{2 * time.Hour, "*-*-* 0/2:00:00", "0 */2 * * *"},
		{3 * time.Hour, "*-*-* 0/3:00:00", "0 */3 * * *"},
		{8 * time.Hour, "*-*-* 0/8:00:00", "0 */8 * * *"},
		{12 * time.Hour, "*-*-* 0/12:00:00", "0 */12 * * *"},
		{24 * time.Hour, "daily", "0 0 * * *"},
	}
	for _, tc := range cases {
		cal, err := timer.OnCalendar(tc.every)
		if err != nil || cal != tc.onCalendar {
			t.Errorf("OnCalendar(%v) = %q, %v; want %q", tc.every, cal, err, tc.onCalendar)
		}
		cron, err := timer.CronSchedule(tc.every)
		if err != nil || cron != tc.cron {
			t.Errorf("CronSchedule(%v) = %q, %v; want %q", tc.every, cron, err, tc.cron)
		}
	}
}

// TestEveryValidIntervalWorks: every interval the error message offers is
// accepted.
func TestEveryValidIntervalWorks(t *testing.T) {
	for _, s := range strings.Fields(timer.Valid) {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := timer.OnCalendar(d); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		if got := timer.Format(d); got != s {
			t.Errorf("Format(%v) = %q, want %q", d, got, s)
		}
	}
}

func TestBadIntervals(t *testing.T) {
	cases := []struct {
		every time.Duration
		msg   string
	}{
		{0, "interval 0s: must be more than 0"},
		{-time.Hour, "must be more than 0"},
		{90 * time.Second, "interval 1m30s: must be a whole number of minutes"},
		{7 * time.Minute, "interval 7m: does not divide an hour evenly"},
		{45 * time.Minute, "does not divide an hour evenly"},
		{90 * time.Minute, "interval 90m: is not a whole number of hours"},
		{5 * time.Hour, "interval 5h: does not divide a day evenly"},
		{48 * time.Hour, "interval 48h: is longer than a day"},
	}
	for _, tc := range cases {
		for name, f := range map[string]func(time.Duration) (string, error){"OnCalendar": timer.OnCalendar, "CronSchedule": timer.CronSchedule} {
			_, err := f(tc.every)
			var ie *timer.IntervalError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s(%v) = %v, want an IntervalError with %q", name, tc.every, err, tc.msg)
			}
		}
	}
}

func TestQuoting(t *testing.T) {
	cases := []struct {
		in, systemd, shell string
	}{
		{"/usr/local/bin/handoff", "/usr/local/bin/handoff", "/usr/local/bin/handoff"},
		{"/home/me/My Files/writers.yaml", `"/home/me/My Files/writers.yaml"`, `'/home/me/My Files/writers.yaml'`},
		{"/h/100%/m.yaml", `"/h/100%%/m.yaml"`, `'/h/100%/m.yaml'`},
		{"/h/$HOME/m", `"/h/$$HOME/m"`, `'/h/$HOME/m'`},
		{`/h/a"b\c`, `"/h/a\"b\\c"`, `'/h/a"b\c'`},
		{"/h/it's", `"/h/it's"`, `'/h/it'\''s'`},
		{"", `""`, `''`},
	}
	for _, tc := range cases {
		got, err := timer.SystemdCommand([]string{"/bin/h", tc.in})
		if want := "/bin/h " + tc.systemd; err != nil || got != want {
			t.Errorf("SystemdCommand(%q) = %s, %v; want %s", tc.in, got, err, want)
		}
		if got := timer.ShellQuote(tc.in); got != tc.shell {
			t.Errorf("ShellQuote(%q) = %s, want %s", tc.in, got, tc.shell)
		}
	}
	// The executable: systemd expands no variable in it and refuses quotes
	// and backslashes.
	for in, want := range map[string]string{
		"/opt/a b/handoff":     `"/opt/a b/handoff"`,
		"/opt/$x/100%/handoff": `"/opt/$x/100%%/handoff"`,
	} {
		if got, err := timer.SystemdCommand([]string{in}); err != nil || got != want {
			t.Errorf("SystemdCommand(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{`/opt/a"b/handoff`, "/opt/it's/handoff", `/opt/a\b/handoff`} {
		if got, err := timer.SystemdCommand([]string{in}); err == nil {
			t.Errorf("SystemdCommand(%q) = %s, want an error", in, got)
		}
	}
	if got, err := timer.SystemdCommand([]string{"/bin/h", "a\nb"}); err == nil {
		t.Errorf("SystemdCommand with a newline = %s, want an error", got)
	}
}

// TestShellQuoteRoundTrip: sh reads back exactly the word ShellQuote wrote.
func TestShellQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, w := range []string{"/a b/c", `/it's "x" \n $HOME %d`, "/plain", "/*?[x]", "/a;b&c|d"} {
		out, err := exec.Command(sh, "-c", "printf %s "+timer.ShellQuote(w)).Output()
		if err != nil || string(out) != w {
			t.Errorf("sh read %q back as %q (%v)", w, out, err)
		}
	}
}

func TestUnits(t *testing.T) {
	j := timer.Job{Binary: "/opt/my tools/handoff", Manifest: "/home/me/.config/handoff/writers.yaml", Every: 30 * time.Minute}
	svc, err := j.Service()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n[Service]\nType=oneshot\n",
		"\nExecStart=\"/opt/my tools/handoff\" sync --manifest /home/me/.config/handoff/writers.yaml\n",
		"\nSuccessExitStatus=75\n",
		"\nIOSchedulingClass=idle\n",
	} {
		if !strings.Contains(svc, want) {
			t.Errorf("service lacks %q:\n%s", want, svc)
		}
	}
	tmr, err := j.Timer()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n[Timer]\nOnCalendar=*:0/30\nPersistent=true\nRandomizedDelaySec=60\n", "\n[Install]\nWantedBy=timers.target\n"} {
		if !strings.Contains(tmr, want) {
			t.Errorf("timer lacks %q:\n%s", want, tmr)
		}
	}
	line, err := j.CronLine()
	if err != nil {
		t.Fatal(err)
	}
	if want := "*/30 * * * * '/opt/my tools/handoff' sync --manifest /home/me/.config/handoff/writers.yaml >/dev/null 2>&1"; line != want {
		t.Errorf("cron line\n%s\nwant\n%s", line, want)
	}
	j.Manifest = "/h/100%.yaml"
	if line, _ := j.CronLine(); !strings.Contains(line, `'/h/100\%.yaml'`) {
		t.Errorf("cron line does not escape %%: %s", line)
	}
}

func TestJobRefusesBadPaths(t *testing.T) {
	for _, j := range []timer.Job{
		{Binary: "handoff", Manifest: "/m.yaml", Every: time.Hour},
		{Binary: "/bin/handoff", Manifest: "m.yaml", Every: time.Hour},
		{Binary: "/bin/handoff", Manifest: "/m\n.yaml", Every: time.Hour},
	} {
		if _, err := j.Service(); err == nil {
			t.Errorf("Service(%+v) accepted", j)
		}
		if _, err := j.CronLine(); err == nil {
			t.Errorf("CronLine(%+v) accepted", j)
		}
		if _, err := timer.Install(t.TempDir(), j); err == nil {
			t.Errorf("Install(%+v) accepted", j)
		}
	}
}

func TestInstallUninstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "systemd", "user")
	j := timer.Job{Binary: "/usr/bin/handoff", Manifest: "/m.yaml", Every: time.Hour}
	written, err := timer.Install(dir, j)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || written[0] != filepath.Join(dir, timer.ServiceName) || written[1] != filepath.Join(dir, timer.TimerName) {
		t.Fatalf("written %v", written)
	}
	svc, _ := j.Service()
	if b, err := os.ReadFile(written[0]); err != nil || string(b) != svc {
		t.Fatalf("service file %q, %v", b, err)
	}
	// Reinstalling with another interval replaces the timer.
	j.Every = 2 * time.Hour
	if _, err := timer.Install(dir, j); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(written[1]); !strings.Contains(string(b), "OnCalendar=*-*-* 0/2:00:00\n") {
		t.Fatalf("timer not replaced:\n%s", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("dir holds %d entries, want the 2 units only", len(ents))
	}
	mine := filepath.Join(dir, "other.service")
	os.WriteFile(mine, []byte("[Service]\n"), 0o644)

	removed, err := timer.Uninstall(dir)
	if err != nil || len(removed) != 2 {
		t.Fatalf("Uninstall = %v, %v", removed, err)
	}
	for _, p := range written {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there", p)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("Uninstall touched another unit: %v", err)
	}
	if removed, err := timer.Uninstall(dir); err != nil || len(removed) != 0 {
		t.Fatalf("second Uninstall = %v, %v", removed, err)
	}
	if removed, err := timer.Uninstall(filepath.Join(dir, "missing")); err != nil || len(removed) != 0 {
		t.Fatalf("Uninstall of a missing dir = %v, %v", removed, err)
	}
}

func TestUnitDir(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if d, _ := timer.UnitDir(); d != "/x/cfg/systemd/user" {
		t.Errorf("UnitDir = %s", d)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative")
	t.Setenv("HOME", "/x/home")
	if d, _ := timer.UnitDir(); d != "/x/home/.config/systemd/user" {
		t.Errorf("UnitDir = %s", d)
	}
}

// systemdAnalyze finds systemd-analyze, or skips (fails under
// HANDOFF_E2E_REQUIRED).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv(requiredEnv) != "" {
			t.Fatalf("systemd-analyze not found and %s is set (Debian package: systemd): %v", requiredEnv, err)
		}
		t.Skip("systemd-analyze not found (Debian package: systemd)")
	}
	return p
}

// verify runs `systemd-analyze verify` on the units in dir, as the user
// manager would load them (with a private runtime directory, so no running
// systemd is needed), falling back to the system manager's view where a
// user manager cannot be set up. It returns the combined output and
// whether verify passed.
func verify(t *testing.T, analyze, dir string) (string, bool) {
	t.Helper()
	units := []string{filepath.Join(dir, timer.ServiceName), filepath.Join(dir, timer.TimerName)}
	run := func(user bool) (string, error) {
		args := []string{"verify"}
		if user {
			args = []string{"--user", "verify"}
		}
		cmd := exec.Command(analyze, append(args, units...)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(true)
	if err != nil && strings.Contains(out, "Failed to initialize manager") {
		t.Logf("user manager unavailable (%s); verifying as the system manager", strings.TrimSpace(out))
		out, err = run(false)
	}
	return out, err == nil
}

// TestSystemdVerify: systemd itself accepts the generated units, with the
// binary and manifest under paths that need quoting; and rejects them when
// the binary is missing (so the check can fail).
func TestSystemdVerify(t *testing.T) {
	analyze := systemdAnalyze(t)
	// The binary's directory has everything systemd allows in an
	// executable's path; the manifest's, everything at all.
	base := filepath.Join(t.TempDir(), "my $dir 100% ;x")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(base, `"q" it's \ $HOME %h`, "writers.yaml")
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "hand off")
	if err := os.Symlink(truePath, bin); err != nil {
		t.Fatal(err)
	}
	sha, err := timer.HashFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for i, every := range []time.Duration{time.Minute, 30 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour} {
		dir := t.TempDir()
		j := timer.Job{Binary: bin, Manifest: manifest, Every: every}
		if i%2 == 0 {
			j.SHA256 = sha // pinned: systemd must accept the ExecStartPre check too
		}
		if _, err := timer.Install(dir, j); err != nil {
			t.Fatal(err)
		}
		out, ok := verify(t, analyze, dir)
		if !ok || strings.Contains(out, "handoff-sync") {
			t.Errorf("every %v: systemd-analyze verify:\n%s", every, out)
		}
	}

	// The negative control: the same units naming a binary that does not
	// exist must fail verification.
	dir := t.TempDir()
	if _, err := timer.Install(dir, timer.Job{Binary: bin + "-missing", Manifest: "/m.yaml", Every: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if out, ok := verify(t, analyze, dir); ok || !strings.Contains(out, "hand off-missing") {
		t.Errorf("verify passed a unit whose binary is missing:\n%s", out)
	}
}

// TestSystemdCalendar: systemd parses every OnCalendar expression, and the
// next elapses are the interval apart (on the hour or the day boundary).
func TestSystemdCalendar(t *testing.T) {
	analyze := systemdAnalyze(t)
	for _, s := range strings.Fields(timer.Valid) {
		every, _ := time.ParseDuration(s)
		cal, err := timer.OnCalendar(every)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "calendar", "--iterations=3", "--base-time=2026-03-01 00:00:30 UTC", cal)
		cmd.Env = append(os.Environ(), "TZ=UTC", "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: systemd-analyze calendar %q: %v\n%s", s, cal, err, out)
			continue
		}
		var elapses []time.Time
		for _, line := range strings.Split(string(out), "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "Next elapse:") && !strings.HasPrefix(line, "Iter. #") {
				continue
			}
			_, v, _ := strings.Cut(line, ": ")
			// "Sun 2026-03-01 00:30:00 UTC"
			f := strings.Fields(v)
			if len(f) < 3 {
				continue
			}
			tm, err := time.Parse("2006-01-02 15:04:05", f[1]+" "+f[2])
			if err != nil {
				t.Fatalf("%s: parse %q: %v", s, v, err)
			}
			elapses = append(elapses, tm)
		}
		if len(elapses) != 3 {
			t.Fatalf("%s: found %d elapses in:\n%s", s, len(elapses), out)
		}
		if want := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(every); !elapses[0].Equal(want) {
			t.Errorf("%s (%s): first elapse %v, want %v", s, cal, elapses[0], want)
		}
		for i := 1; i < len(elapses); i++ {
			if d := elapses[i].Sub(elapses[i-1]); d != every {
				t.Errorf("%s (%s): elapses %v apart, want %v", s, cal, d, every)
			}
		}
	}
}
