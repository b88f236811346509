package timer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CronLogMax is the size past which the cron line moves its log to
// CronLog+".1" (replacing the one there) before a run: the log holds at
// most about two of these, whatever runs.
const CronLogMax = 1 << 20

// Markers the cron line writes into its log around each run, which
// ReadCronLog looks for.
const (
	cronStart = "handoff cron: start "
	cronExit  = "handoff cron: exit "
)

// CronLog is where the cron line keeps each run's output:
// $XDG_STATE_HOME/handoff/cron.log, or ~/.local/state/handoff/cron.log
// when XDG_STATE_HOME is unset or relative.
func CronLog() (string, error) {
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "handoff", "cron.log"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("timer: %w", err)
	}
	return filepath.Join(home, ".local", "state", "handoff", "cron.log"), nil
}

// cronLogged wraps cmd (shell words, quoted for cron) so that its output
// goes to log: the log moves to log.1 once over CronLogMax, and each run
// is framed by a start line with the date and an exit line with its
// status, which is also the line's.
func cronLogged(cmd, log string, quote func([]string) string) string {
	l := quote([]string{log})
	return "L=" + l + "; mkdir -p " + quote([]string{filepath.Dir(log)}) +
		` && { [ "$(wc -c 2>/dev/null <"$L" || echo 0)" -lt ` + strconv.Itoa(CronLogMax) + ` ] || mv -f "$L" "$L.1"; }` +
		` && { echo "` + cronStart + `$(date -u)"; ` + cmd + `; s=$?; echo "` + cronExit + `$s"; exit $s; } >>"$L" 2>&1`
}

// CronRun is the last run a cron log records.
type CronRun struct {
	Started string   // the date its start line gives
	Exit    int      // its exit status; -1 when the log has no exit line for it (running, or killed)
	Lines   []string // its output, the last maxRunLines lines
}

// maxRunLines bounds CronRun.Lines; maxLogTail how much of the log is read.
const (
	maxRunLines = 8
	maxLogTail  = 64 << 10
)

// ErrNoCronRun means a cron log holds no run (or none in its last
// maxLogTail bytes).
var ErrNoCronRun = errors.New("no run recorded")

// ReadCronLog reads the last run from the cron log at path, reading at
// most its last 64 KiB. A missing log is fs.ErrNotExist, wrapped.
func ReadCronLog(path string) (CronRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return CronRun{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return CronRun{}, err
	}
	if st.Size() > maxLogTail {
		if _, err := f.Seek(st.Size()-maxLogTail, io.SeekStart); err != nil {
			return CronRun{}, err
		}
	}
	tail, err := io.ReadAll(io.LimitReader(f, maxLogTail))
	if err != nil {
		return CronRun{}, err
	}
	i := bytes.LastIndex(tail, []byte(cronStart))
	if i < 0 || i > 0 && tail[i-1] != '\n' {
		return CronRun{}, fmt.Errorf("%s: %w", path, ErrNoCronRun)
	}
	lines := strings.Split(strings.TrimRight(string(tail[i:]), "\n"), "\n")
	run := CronRun{Started: strings.TrimPrefix(lines[0], cronStart), Exit: -1}
	lines = lines[1:]
	if n := len(lines); n > 0 {
		if code, ok := strings.CutPrefix(lines[n-1], cronExit); ok {
			if c, err := strconv.Atoi(code); err == nil {
				run.Exit = c
				lines = lines[:n-1]
			}
		}
	}
	if len(lines) > maxRunLines {
		lines = lines[len(lines)-maxRunLines:]
	}
	run.Lines = lines
	return run, nil
}

// UserManager reports whether this login can reach a systemd user
// manager, as systemctl --user would: $XDG_RUNTIME_DIR is set and holds
// the manager's socket (systemd/private) or the session bus (bus). It
// returns why not, for a message.
func UserManager() error {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return errors.New("$XDG_RUNTIME_DIR is not set")
	}
	for _, name := range []string{"systemd/private", "bus"} {
		if _, err := os.Stat(filepath.Join(rt, name)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("neither %s nor %s exists", filepath.Join(rt, "systemd/private"), filepath.Join(rt, "bus"))
}
