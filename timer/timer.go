package timer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/handoff-sync/handoff/internal/durable"
)

// Unit file names, in the systemd user unit directory. PinName is not a
// unit: it is the sha256sum check file that pins the binary the service
// runs, kept beside the units so that install and uninstall keep them
// together.
const (
	ServiceName = "handoff-sync.service"
	TimerName   = "handoff-sync.timer"
	PinName     = "handoff-sync.sha256"
)

// DefaultSHA256Sum is where coreutils installs sha256sum.
const DefaultSHA256Sum = "/usr/bin/sha256sum"

// DefaultEvery is the interval `handoff timer install` uses by default.
const DefaultEvery = 30 * time.Minute

// Commands to print for the user: the units are only files until systemd
// is told about them.
const (
	EnableCommand  = "systemctl --user daemon-reload && systemctl --user enable --now " + TimerName
	DisableCommand = "systemctl --user disable --now " + TimerName + " && systemctl --user daemon-reload"
)

// Valid lists the accepted intervals, for error messages.
const Valid = "1m 2m 3m 4m 5m 6m 10m 12m 15m 20m 30m 1h 2h 3h 4h 6h 8h 12h 24h"

// IntervalError is an interval that does not divide an hour or a day
// evenly.
type IntervalError struct {
	Every time.Duration
	Msg   string
}

func (e *IntervalError) Error() string {
	return fmt.Sprintf("interval %s: %s", Format(e.Every), e.Msg)
}

// Format writes an interval the way a person would: 30m, 2h, 90s.
func Format(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// split checks every and returns it as a whole number of minutes below an
// hour, or of hours up to a day (the other is 0).
func split(every time.Duration) (minutes, hours int, err error) {
	bad := func(msg string) (int, int, error) { return 0, 0, &IntervalError{Every: every, Msg: msg} }
	switch {
	case every <= 0:
		return bad("must be more than 0")
	case every%time.Minute != 0:
		return bad("must be a whole number of minutes")
	case every < time.Hour:
		if m := int(every / time.Minute); 60%m == 0 {
			return m, 0, nil
		}
		return bad("does not divide an hour evenly")
	case every > 24*time.Hour:
		return bad("is longer than a day")
	case every%time.Hour != 0:
		return bad("is not a whole number of hours")
	}
	if h := int(every / time.Hour); 24%h == 0 {
		return 0, h, nil
	}
	return bad("does not divide a day evenly")
}

// OnCalendar is the systemd calendar expression for every: 30m is
// "*:0/30", 1h "hourly", 2h "*-*-* 0/2:00:00", 24h "daily".
func OnCalendar(every time.Duration) (string, error) {
	m, h, err := split(every)
	switch {
	case err != nil:
		return "", err
	case m > 0:
		return fmt.Sprintf("*:0/%d", m), nil
	case h == 1:
		return "hourly", nil
	case h == 24:
		return "daily", nil
	}
	return fmt.Sprintf("*-*-* 0/%d:00:00", h), nil
}

// CronSchedule is the crontab schedule for every: 30m is "*/30 * * * *",
// 1h "0 * * * *", 2h "0 */2 * * *", 24h "0 0 * * *".
func CronSchedule(every time.Duration) (string, error) {
	m, h, err := split(every)
	switch {
	case err != nil:
		return "", err
	case m == 1:
		return "* * * * *", nil
	case m > 0:
		return fmt.Sprintf("*/%d * * * *", m), nil
	case h == 1:
		return "0 * * * *", nil
	case h == 24:
		return "0 0 * * *", nil
	}
	return fmt.Sprintf("0 */%d * * *", h), nil
}

// Job is what the timer runs, and how often.
type Job struct {
	Binary   string // absolute path of the handoff binary
	Manifest string // absolute path of the writers manifest
	Every    time.Duration

	// SHA256 pins Binary: the hex SHA-256 that sha256sum checks it
	// against before the service (or the cron line) starts it, failing
	// the run when they differ. Empty means no pin.
	SHA256 string
	// PinFile is the absolute path of the check file the service reads;
	// Install sets it to PinName in its directory when empty.
	PinFile string
	// SHA256Sum is the absolute path of sha256sum; DefaultSHA256Sum when
	// empty.
	SHA256Sum string
	// Log, when set, is the absolute path of the file the cron line
	// keeps each run's output in (CronLog); else the output is dropped.
	Log string
}

// HashFile is the hex SHA-256 of the file at path, for Job.SHA256.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// PinLine is the pin in sha256sum's check format: "<hex>  <binary>\n".
func (j Job) PinLine() (string, error) {
	if len(j.SHA256) != sha256.Size*2 || strings.Trim(j.SHA256, "0123456789abcdef") != "" {
		return "", fmt.Errorf("timer: pin %q is not a hex SHA-256", j.SHA256)
	}
	if _, err := j.args(); err != nil {
		return "", err
	}
	if strings.Contains(j.Binary, `\`) {
		return "", fmt.Errorf("timer: cannot pin %q: its path holds a backslash", j.Binary)
	}
	return j.SHA256 + "  " + j.Binary + "\n", nil
}

// ParsePin reads a pin file's text back: the hash and the binary's path.
func ParsePin(text string) (sha, binary string, err error) {
	line, _, _ := strings.Cut(text, "\n")
	sha, binary, ok := strings.Cut(line, "  ")
	j := Job{Binary: binary, Manifest: "/", SHA256: sha}
	if _, perr := j.PinLine(); !ok || perr != nil {
		return "", "", fmt.Errorf("timer: %q is not a pin line (<sha256>  <absolute path>)", line)
	}
	return sha, binary, nil
}

func (j Job) sha256sum() string {
	if j.SHA256Sum != "" {
		return j.SHA256Sum
	}
	return DefaultSHA256Sum
}

// args is the command line the job runs.
func (j Job) args() ([]string, error) {
	for _, p := range []struct{ what, path string }{{"binary", j.Binary}, {"manifest", j.Manifest}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("timer: %s path %q is not absolute", p.what, p.path)
		}
		if strings.ContainsFunc(p.path, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return nil, fmt.Errorf("timer: %s path %q holds a control character", p.what, p.path)
		}
	}
	return []string{j.Binary, "sync", "--manifest", j.Manifest}, nil
}

// Service renders handoff-sync.service.
func (j Job) Service() (string, error) {
	args, err := j.args()
	if err != nil {
		return "", err
	}
	cmd, err := SystemdCommand(args)
	if err != nil {
		return "", err
	}
	pre := ""
	if j.SHA256 != "" {
		if _, err := j.PinLine(); err != nil {
			return "", err
		}
		if !filepath.IsAbs(j.PinFile) {
			return "", fmt.Errorf("timer: pin file path %q is not absolute", j.PinFile)
		}
		check, err := SystemdCommand([]string{j.sha256sum(), "--check", "--strict", "--quiet", j.PinFile})
		if err != nil {
			return "", err
		}
		pre = `# Fail closed: start only the binary "handoff timer install" pinned. After
# upgrading handoff, run "handoff timer install" again to pin the new one.
ExecStartPre=` + check + "\n"
	}
	return `# Written by "handoff timer install"; "handoff timer uninstall" removes it.
[Unit]
Description=Pull memory handoffs and ingest them (handoff sync)
Documentation=https://github.com/handoff-sync/handoff

[Service]
Type=oneshot
` + pre + `ExecStart=` + cmd + `
# 75: another run holds the workspace lock; the next tick retries.
SuccessExitStatus=75
Nice=10
IOSchedulingClass=idle
`, nil
}

// Timer renders handoff-sync.timer.
func (j Job) Timer() (string, error) {
	cal, err := OnCalendar(j.Every)
	if err != nil {
		return "", err
	}
	// Spread the start a little, never more than a tenth of the interval.
	delay := min(j.Every/10, time.Minute)
	return fmt.Sprintf(`# Written by "handoff timer install"; "handoff timer uninstall" removes it.
[Unit]
Description=Run handoff sync every %s

[Timer]
OnCalendar=%s
Persistent=true
RandomizedDelaySec=%d

[Install]
WantedBy=timers.target
`, Format(j.Every), cal, int(delay/time.Second)), nil
}

// CronLine renders a crontab line equivalent to the timer. With j.Log,
// each run's output (and the pin check's) is appended to that file,
// framed by a start and an exit line, and the file moves to Log+".1"
// once over CronLogMax; without it, output is discarded.
func (j Job) CronLine() (string, error) {
	sched, err := CronSchedule(j.Every)
	if err != nil {
		return "", err
	}
	args, err := j.args()
	if err != nil {
		return "", err
	}
	quote := func(words []string) string {
		q := make([]string, len(words))
		for i, a := range words {
			// cron turns an unescaped % into a newline, whatever the quoting.
			q[i] = strings.ReplaceAll(ShellQuote(a), "%", `\%`)
		}
		return strings.Join(q, " ")
	}
	cmd := quote(args)
	if j.SHA256 != "" {
		pin, err := j.PinLine()
		if err != nil {
			return "", err
		}
		// The pin travels in the line itself: sync runs only if the
		// binary still hashes to it.
		cmd = "echo " + quote([]string{strings.TrimSuffix(pin, "\n")}) + " | " +
			quote([]string{j.sha256sum(), "--check", "--strict", "--quiet"}) + " && " + cmd
	}
	if j.Log != "" {
		if !filepath.IsAbs(j.Log) || strings.ContainsFunc(j.Log, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", fmt.Errorf("timer: cron log %q: want an absolute path without control characters", j.Log)
		}
		return sched + " " + cronLogged(cmd, j.Log, quote), nil
	}
	return sched + " " + cmd + " >/dev/null 2>&1", nil
}

// SystemdCommand renders args as a systemd command line (ExecStart): "%"
// is doubled everywhere so that no specifier is expanded, "$" is doubled
// in the arguments so that no variable is (systemd does not expand them in
// the executable's path), and a word with anything but plain characters
// is double-quoted with C escapes. systemd refuses an executable path
// holding a quote or a backslash, so SystemdCommand does too.
func SystemdCommand(args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("timer: empty command")
	}
	for _, a := range args {
		if strings.ContainsFunc(a, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", fmt.Errorf("timer: %q holds a control character", a)
		}
	}
	if strings.ContainsAny(args[0], `"'\`) {
		return "", fmt.Errorf("timer: systemd cannot run %q: its path holds a quote or a backslash", args[0])
	}
	words := make([]string, len(args))
	for i, a := range args {
		if i == 0 {
			a = strings.ReplaceAll(a, "%", "%%")
		} else {
			a = strings.NewReplacer("%", "%%", "$", "$$").Replace(a)
		}
		if a == "" || !plain(a) {
			a = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a) + `"`
		}
		words[i] = a
	}
	return strings.Join(words, " "), nil
}

// ShellQuote quotes one word for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plain reports whether s needs no quoting for the shell or systemd.
func plain(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("/._-+,:@=", r):
		default:
			return false
		}
	}
	return true
}

// UnitDir is the systemd user unit directory: $XDG_CONFIG_HOME/systemd/user,
// or ~/.config/systemd/user when XDG_CONFIG_HOME is unset or relative.
func UnitDir() (string, error) {
	if dir := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "systemd", "user"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("timer: %w", err)
	}
	return filepath.Join(home, ".config", "systemd", "user"), nil
}

// Install writes the pin (when j has one), the service, then the timer,
// into dir (created if missing), replacing earlier versions. It returns
// the paths written.
func Install(dir string, j Job) ([]string, error) {
	var pin string
	if j.SHA256 != "" {
		if j.PinFile == "" {
			j.PinFile = filepath.Join(dir, PinName)
		}
		var err error
		if pin, err = j.PinLine(); err != nil {
			return nil, err
		}
	}
	svc, err := j.Service()
	if err != nil {
		return nil, err
	}
	tmr, err := j.Timer()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("timer: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("timer: %w", err)
	}
	defer root.Close()
	var written []string
	units := []struct{ name, text string }{{ServiceName, svc}, {TimerName, tmr}}
	if pin != "" {
		// The pin first: the service never names a pin that is not there.
		if j.PinFile != filepath.Join(dir, PinName) {
			return nil, fmt.Errorf("timer: the pin file must be %s", filepath.Join(dir, PinName))
		}
		units = append([]struct{ name, text string }{{PinName, pin}}, units...)
	}
	for _, u := range units {
		if err := durable.WriteFile(root, u.name, []byte(u.text), 0o644); err != nil {
			return written, fmt.Errorf("timer: %w", err)
		}
		written = append(written, filepath.Join(dir, u.name))
	}
	return written, nil
}

// Uninstall removes the timer, then the service, then the pin, from dir. Missing files
// are not an error. It returns the paths removed.
func Uninstall(dir string) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("timer: %w", err)
	}
	defer root.Close()
	var removed []string
	for _, name := range []string{TimerName, ServiceName, PinName} {
		err := root.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, fmt.Errorf("timer: %w", err)
		}
		removed = append(removed, filepath.Join(dir, name))
	}
	if len(removed) > 0 {
		if err := durable.SyncDir(root, "."); err != nil {
			return removed, fmt.Errorf("timer: %w", err)
		}
	}
	return removed, nil
}
