package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/handoff-sync/handoff/timer"
)

// doctorCron reports the last run the cron line logged (timer.CronLog),
// with the last lines of a run that failed; false when there is no log
// with a run in it (no cron line, or one from before the log).
func doctorCron() (Check, bool) {
	path, err := timer.CronLog()
	if err != nil {
		return Check{}, false
	}
	run, err := timer.ReadCronLog(path)
	switch {
	case errors.Is(err, timer.ErrNoCronRun) || errors.Is(err, fs.ErrNotExist):
		return Check{}, false
	case err != nil:
		return Check{Scope: "timer", Name: "cron", Status: CheckWarn, Message: fmt.Sprintf("cannot read the cron log: %v", err),
			Hint: "make it a regular file readable by this user"}, true
	}
	c := Check{Scope: "timer", Name: "cron"}
	last := ""
	if len(run.Lines) > 0 {
		last = ":\n" + strings.Join(run.Lines, "\n")
	}
	switch run.Exit {
	case 0:
		c.Status, c.Message = CheckOK, fmt.Sprintf("the last cron run (started %s) exited 0", run.Started)
	case -1:
		c.Status = CheckWarn
		c.Message = fmt.Sprintf("the last cron run (started %s) has not logged its end: it is still running, or it was killed%s", run.Started, last)
		c.Hint = fmt.Sprintf("if no handoff sync is running, see %s", path)
	default:
		c.Status = CheckWarn
		if run.Exit == 2 {
			c.Status = CheckFail // a usage or manifest error: every tick fails the same way
		}
		c.Message = fmt.Sprintf("the last cron run (started %s) failed with exit %d; its last lines%s", run.Started, run.Exit, last)
		c.Hint = fmt.Sprintf("fix what they name, then run the sync by hand to check; every run's output is in %s", path)
	}
	return c, true
}
