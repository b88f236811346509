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
//   - [Install] writes the service before the timer, each durably (temporary
//     file, fsync, rename, directory fsync), so a crash never leaves a
//     half-written unit or a timer without its service. [Uninstall] removes
//     the timer before the service.
//
// The package only writes files; it never runs systemctl or crontab.
package timer
