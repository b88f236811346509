package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/timer"
)

func init() { commands = append(commands, newTimerCmd) }

func newTimerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "timer",
		Short: "Run handoff sync on a schedule: a systemd user timer, or a cron line",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msg := "timer needs a subcommand: install or uninstall"
			if len(args) > 0 {
				msg = fmt.Sprintf("unknown command %q for \"handoff timer\"; use install or uninstall", args[0])
			}
			return &exitError{code: exitUsage, err: errors.New(msg), hint: "see `handoff timer --help`"}
		},
	}
	cmd.AddCommand(newTimerInstallCmd(g), newTimerUninstallCmd(g))
	return cmd
}

type timerInstallCmd struct {
	g            *globals
	every        time.Duration
	manifestPath string
	print, cron  bool
}

func newTimerInstallCmd(g *globals) *cobra.Command {
	c := &timerInstallCmd{g: g}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write a systemd user service and timer that run handoff sync",
		Long: `install writes handoff-sync.service and handoff-sync.timer into
$XDG_CONFIG_HOME/systemd/user (default ~/.config/systemd/user) and prints the
systemctl line that enables them. The service runs this handoff binary
(symlinks resolved) with the manifest's absolute path; the timer fires at the
same minutes every hour (or hours every day) and catches up on a missed run
after boot. Installing again replaces both units.

The manifest's workspace must exist, made by ` + "`handoff init`" + ` (or by an
earlier handoff); install refuses one that does not (exit 2) rather than
install a timer that fails every tick.

The binary is pinned: install writes its SHA-256 to handoff-sync.sha256 beside
the units, and the service checks it with sha256sum before it starts handoff,
so a replaced binary is refused rather than run (the cron line carries the
same check). After upgrading handoff, run timer install again; handoff doctor
reports a pin that no longer matches.

Units need a systemd user session (systemctl --user reaches the user manager
through $XDG_RUNTIME_DIR). Without one, as on a server reached over ssh
without lingering, install writes nothing, says so, and points at --cron.

--every takes an interval that divides an hour or a day evenly: ` + timer.Valid + `.
--print shows the units instead of writing them; --cron prints an equivalent
crontab line instead (add it with crontab -e). The cron line appends each
run's output, with its start time and exit status, to
$XDG_STATE_HOME/handoff/cron.log (~/.local/state/handoff/cron.log), moved to
cron.log.1 once over 1 MiB; handoff doctor shows the last run from it.`,
		Example: "  handoff timer install --every 30m\n  (crontab -l; handoff timer install --cron) | crontab -",
		Args:    cobra.NoArgs,
		RunE:    c.run,
	}
	f := cmd.Flags()
	f.DurationVar(&c.every, "every", timer.DefaultEvery, "how often to sync: an interval that divides an hour or a day evenly")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.BoolVar(&c.print, "print", false, "print the units instead of writing them")
	f.BoolVar(&c.cron, "cron", false, "print an equivalent crontab line instead of writing units")
	return cmd
}

func (c *timerInstallCmd) run(cmd *cobra.Command, _ []string) error {
	if c.print && c.cron {
		return &exitError{code: exitUsage, err: errors.New("--print and --cron cannot be used together")}
	}
	if _, err := timer.OnCalendar(c.every); err != nil {
		return &exitError{code: exitUsage, err: err, hint: "use one of " + timer.Valid}
	}
	job, err := c.job()
	if err != nil {
		return err
	}
	out := c.g.stdout
	switch {
	case c.cron:
		if job.Log, err = timer.CronLog(); err != nil {
			return err
		}
		line, err := job.CronLine()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, line)
		fmt.Fprintf(c.g.stderr, "note: each run's output goes to %s (moved to %s.1 past 1 MiB); handoff doctor shows the last run\n", job.Log, filepath.Base(job.Log))
		return nil
	case c.print:
		dir, err := timer.UnitDir()
		if err != nil {
			return err
		}
		job.PinFile = filepath.Join(dir, timer.PinName)
		pin, err := job.PinLine()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "# %s\n%s", job.PinFile, pin)
		svc, err := job.Service()
		if err != nil {
			return err
		}
		tmr, err := job.Timer()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "# %s\n%s\n# %s\n%s", filepath.Join(dir, timer.ServiceName), svc, filepath.Join(dir, timer.TimerName), tmr)
		return nil
	}
	if err := timer.UserManager(); err != nil {
		log, _ := timer.CronLog()
		return &exitError{code: exitFailed,
			err: fmt.Errorf("no systemd user session here (%v): systemctl --user could not start the timer, so no units were written", err),
			hint: fmt.Sprintf("use cron: `handoff timer install --cron` prints a crontab line (add it with crontab -e) that keeps each run's output in %s\n"+
				"hint: or start a user manager for this login (`loginctl enable-linger $USER`, then log in again) and run timer install again", log)}
	}
	dir, err := timer.UnitDir()
	if err != nil {
		return err
	}
	written, err := timer.Install(dir, job)
	for _, p := range written {
		fmt.Fprintf(out, "wrote %s\n", p)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "The service runs only %s with SHA-256 %s; after upgrading handoff, run `handoff timer install` again.\n", job.Binary, job.SHA256)
	fmt.Fprintf(out, "handoff sync will run every %s. To start the timer, run:\n  %s\n", timer.Format(c.every), timer.EnableCommand)
	fmt.Fprintln(out, "To keep it running while you are logged out: loginctl enable-linger")
	return nil
}

// job is what the timer runs: this binary and the manifest, both absolute.
// The manifest must load, so that a broken one is caught now rather than
// at every tick.
func (c *timerInstallCmd) job() (timer.Job, error) {
	path := c.manifestPath
	if path == "" {
		path = manifest.DefaultPath()
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return timer.Job{}, err
	}
	m, err := loadManifest(path)
	if err != nil {
		return timer.Job{}, err
	}
	// A timer must not sync into a directory that is no workspace: every
	// tick would fail. A workspace an earlier handoff made is fine: its
	// first sync gives it its identity.
	ws, err := setup.Workspace(m, "")
	if err != nil {
		return timer.Job{}, err
	}
	if _, _, err := workspace.Check(ws); err != nil {
		return timer.Job{}, err
	}
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return timer.Job{}, fmt.Errorf("find the handoff binary: %w", err)
	}
	if strings.Contains(self, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(c.g.stderr, "handoff: warning: %s is a temporary binary from go run\nhint: install handoff (go install or make build) and run that one's timer install\n", self)
	}
	sum, err := exec.LookPath("sha256sum")
	if err == nil {
		sum, err = filepath.Abs(sum)
	}
	if err != nil {
		return timer.Job{}, &exitError{code: exitFailed, err: fmt.Errorf("find sha256sum, which checks the pinned binary: %w", err),
			hint: "install coreutils (sha256sum); the timer refuses to run a binary it cannot check"}
	}
	sha, err := timer.HashFile(self)
	if err != nil {
		return timer.Job{}, fmt.Errorf("hash the handoff binary to pin it: %w", err)
	}
	return timer.Job{Binary: self, Manifest: path, Every: c.every, SHA256: sha, SHA256Sum: sum}, nil
}

func newTimerUninstallCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the systemd user service and timer (and the pin) that install wrote",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := timer.UnitDir()
			if err != nil {
				return err
			}
			removed, err := timer.Uninstall(dir)
			for _, p := range removed {
				fmt.Fprintf(g.stdout, "removed %s\n", p)
			}
			if err != nil {
				return err
			}
			if len(removed) == 0 {
				fmt.Fprintf(g.stdout, "no handoff units in %s\n", dir)
			}
			fmt.Fprintf(g.stdout, "To stop a timer that is still running, run:\n  %s\n", timer.DisableCommand)
			return nil
		},
	}
}
