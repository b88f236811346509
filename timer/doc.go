// Package timer schedules `handoff sync`: it renders a systemd user service
// and timer, or an equivalent crontab line, and installs or removes the
// units.
//
// Guarantees:
//   - Only intervals that divide an hour (1m … 30m) or a day (1h … 24h)
//     evenly are accepted, so the schedule is the same wall-clock minutes
//     every hour or day, for systemd and cron alike; anything else is an
//     [*IntervalError].
//   - Paths are quoted for their reader: systemd's own quoting in
//     ExecStart (with "%" and, in arguments, "$" escaped, so nothing is
//     expanded), POSIX shell quoting in the crontab line (with "%" escaped
//     for cron). Relative paths, control characters, and an executable
//     path that systemd would refuse (one holding a quote or a backslash)
//     are errors rather than broken units.
//   - A job with a pin (Job.SHA256) fails closed: the service's
//     ExecStartPre runs coreutils' sha256sum on the pin file, and the cron
//     line does the same with the pin in the line, so a binary that was
//     replaced, changed or removed is never started (see docs/design.md,
//     "The timer's pin").
//   - A cron line with a log (Job.Log, [CronLog]) appends every run's
//     output, the pin check's included, to that file between a start
//     line and an exit line, exits with the run's status, and moves the
//     file to ".1" before a run once it is over [CronLogMax]: the log
//     never holds much more than twice that. [ReadCronLog] reads only
//     its last 64 KiB.
//   - [UserManager] tells whether systemctl --user can reach a user
//     manager, from $XDG_RUNTIME_DIR, without running anything.
//   - [Install] writes the pin, then the service, then the timer, each
//     durably (temporary file, fsync, rename, directory fsync), so a crash
//     never leaves a half-written unit, a service without its pin, or a
//     timer without its service. [Uninstall] removes the timer, the
//     service, then the pin.
//
// The package only writes files; it never runs systemctl or crontab.
package timer
