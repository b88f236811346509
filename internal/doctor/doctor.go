package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// TimerUnit is the name of the systemd user units that run `handoff sync`:
// TimerUnit.timer starts TimerUnit.service.
const TimerUnit = "handoff-sync"

// Check statuses, mildest first.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// Doctor's defaults and thresholds.
const (
	// DefaultEvery is how often the timer is expected to run a sync.
	DefaultEvery = 30 * time.Minute
	// DoctorConnectTimeout caps the connect deadline of each host.
	DoctorConnectTimeout = 20 * time.Second
	// ReviewInboxWarn is how many review drafts may wait before doctor warns.
	ReviewInboxWarn = 20
	// staleWarn and staleFail multiply Every: a last run older than that
	// warns, or fails.
	staleWarn = 2
	staleFail = 6
	// maxRejectedListed bounds the names listed per inbox.
	maxRejectedListed = 20
	// WaitWarn is how long a handoff may wait in an inbox before doctor
	// warns: every sync should have pulled it long before.
	WaitWarn = 3 * 24 * time.Hour
)

// ledgerFacts is what the workspace checks learned from the ledger that
// the host checks use.
type ledgerFacts struct {
	ok       bool                           // the ledger was read
	activity map[string]ledger.HostActivity // by host name
	firstRun time.Time                      // the first sync's start; zero if none
	// workspaceID is the identity file's id, which the ledger must
	// record too; "" when the workspace has none yet.
	workspaceID string
}

// Options configure Doctor.
type Options struct {
	Manifest  *manifest.Manifest
	Workspace string        // overrides the manifest's
	Every     time.Duration // the timer's interval; 0 means DefaultEvery
	// Parallel is how many hosts are checked at once; 0: as many as sync
	// pulls at once (fanout.HostsAtOnce).
	Parallel int
	// ConnectTimeout caps each host's connect deadline (the host's own
	// timeout applies when shorter); 0 means DoctorConnectTimeout.
	ConnectTimeout time.Duration
	Dial           setup.Dialer // nil: setup.Dial
	Log            *slog.Logger // nil discards
	Now            func() time.Time

	workspace string // resolved, for the host checks
}

// Check is one finding. Scope is "manifest", "workspace", "timer" or
// "host NAME"; Name identifies the check within its scope.
type Check struct {
	Scope   string `json:"scope"`
	Name    string `json:"name"`
	Status  string `json:"status"` // ok | warn | fail
	Message string `json:"message"`
	Hint    string `json:"hint"` // what to do; empty for ok
	// Inbox carries the counts of an "inbox" check.
	Inbox *InboxStatus `json:"inbox,omitempty"`
}

// InboxStatus is one inbox as doctor sees it.
type InboxStatus struct {
	Path      string `json:"path"`
	State     string `json:"state"`
	Pending   int    `json:"pending"`   // plain *.md files waiting, git-tracked ones excluded
	Tracked   int    `json:"tracked"`   // skipped because git tracks them
	Processed int    `json:"processed"` // files in processed/
	Malformed int    `json:"malformed"` // files in malformed/ named <stem>.<sha12>.md: stored, did not parse
	// Rejected lists (quoted, at most 20) the other files in malformed/:
	// moved there unread. RejectedCount counts them all.
	Rejected      []string `json:"rejected"`
	RejectedCount int      `json:"rejected_count"`
}

// Report is every check, workspace first, then hosts in manifest
// order. OK is false when any check failed.
type Report struct {
	// WorkspaceID is the workspace's identity; empty when it has none.
	WorkspaceID string  `json:"workspace_id"`
	Checks      []Check `json:"checks"`
	OK          bool    `json:"ok"`
}

// Doctor checks the workspace, the timer and every host, and reports what
// it found with a hint for each problem.
//
// Guarantees: Doctor writes nothing but, in each inbox it lists, the
// probe that tells whether the account may archive there: an empty
// directory with a new random dot-name, removed at once (see
// probeArchive). It lists and reads, opens the ledger
// read-only (see ledger.View), and never creates the workspace, the lock
// file or the ledger. To read the ledger consistently it holds the workspace lock
// shared for a few milliseconds when no run holds it; a sync that starts in
// that instant exits 75 and the next tick retries.
func Run(ctx context.Context, opts Options) *Report {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DoctorConnectTimeout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Checks: []Check{}, OK: true}
	add := func(cs ...Check) {
		for _, c := range cs {
			if c.Status == CheckFail {
				rep.OK = false
			}
			rep.Checks = append(rep.Checks, c)
		}
	}
	m := opts.Manifest
	if m == nil {
		add(Check{Scope: "manifest", Name: "manifest", Status: CheckFail, Message: "no manifest",
			Hint: "pass --manifest FILE or write $XDG_CONFIG_HOME/handoff/writers.yaml"})
		return rep
	}
	ws := opts.Workspace
	if abs, err := setup.Workspace(m, ws); err == nil {
		ws = abs
	} else if ws == "" {
		ws = m.Workspace
	}
	add(Check{Scope: "manifest", Name: "manifest", Status: CheckOK,
		Message: fmt.Sprintf("%s: %d host(s), workspace %s", m.Path, len(m.Hosts), ws)})
	opts.workspace = ws
	facts := &ledgerFacts{}
	add(doctorWorkspace(ctx, ws, opts, facts)...)
	if fi, err := os.Stat(ws); err == nil && fi.IsDir() {
		add(doctorOpenClaw(ws, m)...)
	}
	rep.WorkspaceID = facts.workspaceID
	timerCheck := doctorTimer(ctx)
	cron, ok := doctorCron()
	if ok && timerCheck.Status != CheckOK {
		// The cron check below says how the runs go: the timer's own
		// warning would send the person to a cron line that works.
		timerCheck.Status, timerCheck.Message, timerCheck.Hint = CheckOK, timerCheck.Message+"; cron runs the sync (see the cron check)", ""
	}
	add(timerCheck)
	if ok {
		add(cron)
	}
	add(doctorPin()...)
	for _, cs := range doctorHosts(ctx, m.HostConfigs(), opts, facts) {
		add(cs...)
	}
	return rep
}

// ---------------------------------------------------------------------------
// Workspace.

func doctorWorkspace(ctx context.Context, ws string, opts Options, facts *ledgerFacts) []Check {
	var out []Check
	check := func(name, status, msg, hint string) {
		out = append(out, Check{Scope: "workspace", Name: name, Status: status, Message: msg, Hint: hint})
	}
	fi, err := os.Stat(ws)
	var missing *workspace.MissingError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		_, _, err := workspace.Check(ws)
		if errors.As(err, &missing) {
			check("workspace", CheckFail, missing.Error(), missing.Hint())
		} else {
			check("workspace", CheckFail, fmt.Sprintf("%s does not exist", ws), fmt.Sprintf("`handoff init --workspace %s` makes it", ws))
		}
		return out
	case err != nil:
		check("workspace", CheckFail, err.Error(), "make the workspace readable by this user")
		return out
	case !fi.IsDir():
		check("workspace", CheckFail, fmt.Sprintf("%s is not a directory", ws), "point the manifest's workspace at a directory")
		return out
	}
	writable := []string{ws}
	if fi, err := os.Lstat(filepath.Join(ws, layout.StateDir)); err == nil {
		if !fi.IsDir() {
			check("workspace", CheckFail, fmt.Sprintf("%s is not a directory", filepath.Join(ws, layout.StateDir)),
				"move it aside; handoff keeps its state in that directory")
			return out
		}
		writable = append(writable, filepath.Join(ws, layout.StateDir))
	}
	notWritable := ""
	for _, d := range writable {
		if err := unix.Access(d, unix.W_OK|unix.X_OK); err != nil {
			notWritable = d
			break
		}
	}
	if notWritable != "" {
		check("workspace", CheckFail, fmt.Sprintf("%s is not writable by this user", notWritable),
			"run handoff as the workspace's owner, or fix its ownership and mode (chown, chmod u+rwx)")
	} else {
		check("workspace", CheckOK, fmt.Sprintf("%s is writable", ws), "")
	}
	id, legacy, err := workspace.Check(ws)
	var bad *workspace.Error
	switch {
	case errors.As(err, &missing):
		check("identity", CheckFail, missing.Error(), missing.Hint())
		return out
	case errors.As(err, &bad):
		check("identity", CheckFail, bad.Error(), bad.Hint())
	case err != nil:
		check("identity", CheckFail, err.Error(), "make the workspace readable by this user")
	case legacy:
		check("identity", CheckWarn, "no identity yet: an earlier handoff made this workspace",
			"the next `handoff sync` gives it one (or run `handoff init` now)")
	default:
		facts.workspaceID = id.ID
		check("identity", CheckOK, fmt.Sprintf("workspace id %s, made %s (%s)", id.ID, id.CreatedAt.Format(time.RFC3339), id.Origin), "")
	}

	// The lock, held shared while the ledger is read when no run holds it.
	lockPath := filepath.Join(ws, layout.LockFile)
	lk, err := setup.ProbeLock(lockPath)
	if err != nil {
		check("lock", CheckFail, fmt.Sprintf("cannot check the lock %s: %v", lockPath, err),
			"make it a regular file readable by this user, or remove it when no sync is running")
	}
	defer lk.Release()
	switch {
	case err != nil:
	case !lk.Exists:
		check("lock", CheckOK, "lock free (no run has taken it yet)", "")
	case !lk.Held:
		check("lock", CheckOK, "lock free", "")
	case lk.PID > 0 && setup.PIDAlive(lk.PID) && lk.Holder.Editing():
		check("lock", CheckWarn, fmt.Sprintf("lock held by %s: a person's editor is open on a review item; the timer's syncs are skipped (exit 75) until it is closed", lk.Holder.Describe()),
			"save and quit that editor (or quit without saving) to let the timer's syncs run again")
	case lk.PID > 0 && setup.PIDAlive(lk.PID):
		check("lock", CheckOK, fmt.Sprintf("lock held by %s (a run is in progress; syncs started meanwhile, the timer's too, exit 75 and are skipped)", lk.Holder.Describe()), "")
	case lk.PID > 0:
		check("lock", CheckWarn, fmt.Sprintf("lock held, but pid %d named in it is not running", lk.PID),
			fmt.Sprintf("a dry run (which does not write its pid) or a process the run started holds it: find the holder with `fuser -v %s`, and stop it if it is stuck; until then every sync exits 75", lockPath))
	default:
		check("lock", CheckWarn, "lock held by a process that did not write its pid",
			fmt.Sprintf("find the holder with `fuser -v %s`; until it lets go every sync exits 75", lockPath))
	}

	// Idle: this doctor holds the lock, or there is no lock file and so
	// no run. Otherwise the ledger is read live.
	idle := err == nil && !lk.Held
	out = append(out, doctorLedger(ctx, ws, idle, lk.Held, facts)...)
	lk.Release() // the rest reads files that runs replace atomically

	out = append(out, doctorReview(ctx, ws, opts)...)
	out = append(out, doctorReviewInbox(ws))
	out = append(out, doctorReceipt(ws, opts))
	return out
}

func doctorLedger(ctx context.Context, ws string, idle, runInProgress bool, facts *ledgerFacts) []Check {
	var out []Check
	check := func(name, status, msg, hint string) {
		out = append(out, Check{Scope: "workspace", Name: name, Status: status, Message: msg, Hint: hint})
	}
	p := filepath.Join(ws, layout.LedgerFile)
	v, err := ledger.OpenReadOnly(p, idle)
	if errors.Is(err, ledger.ErrNoLedger) {
		check("ledger", CheckWarn, "no ledger yet: no run has stored anything", "run `handoff sync` (or wait for the timer)")
		return out
	}
	if err != nil {
		check("ledger", CheckFail, err.Error(), ledgerRepairHint(p))
		return out
	}
	defer v.Close()
	if err := v.IntegrityCheck(ctx); err != nil {
		hint := ledgerRepairHint(p)
		if errors.Is(err, ledger.ErrNumbersDisagree) {
			hint = fmt.Sprintf("no handoff writes such rows, so the ledger was changed outside handoff: stop the timer, copy %s* aside, and put back a copy from before the change; lookups go by number, so no handoff is applied twice meanwhile, but `where` and `review` may name the wrong hash", p)
		}
		check("ledger", CheckFail, fmt.Sprintf("%s fails integrity_check: %v", p, err), hint)
		return out
	}
	tot, err := v.Totals(ctx)
	if err != nil {
		check("ledger", CheckFail, fmt.Sprintf("%s: %v", p, err), ledgerRepairHint(p))
		return out
	}
	distinct := 0
	for _, n := range tot.Results {
		distinct += n
	}
	check("ledger", CheckOK, fmt.Sprintf("ledger passes integrity_check (%d source(s), %d distinct handoff(s), %d not ingested yet)",
		tot.Sources, distinct, tot.Pending), "")
	if rec, ok, err := v.Identity(ctx); err == nil && ok && facts.workspaceID != "" && rec.ID != facts.workspaceID {
		e := workspace.Mismatch(ws, facts.workspaceID, rec.ID)
		check("identity", CheckFail, e.Err.Error(), e.Hint())
	}
	if act, first, err := v.Activity(ctx); err == nil {
		facts.ok, facts.activity, facts.firstRun = true, act, first
	}

	n, err := v.InterruptedPlans(ctx)
	switch {
	case err != nil:
		check("plans", CheckFail, fmt.Sprintf("cannot count interrupted plans: %v", err), ledgerRepairHint(p))
	case n == 0:
		check("plans", CheckOK, "no interrupted plans", "")
	case runInProgress:
		check("plans", CheckOK, fmt.Sprintf("%d plan(s) in progress (a run holds the lock)", n), "")
	default:
		check("plans", CheckWarn, fmt.Sprintf("%d interrupted plan(s): a run stopped in the middle of applying", n),
			"the next sync finishes them (run `handoff sync` now, or wait for the timer)")
	}
	check("malformed", CheckOK, malformedMessage(ctx, v, tot.Results[receipts.ResultMalformed]), "")
	return out
}

func ledgerRepairHint(p string) string {
	return fmt.Sprintf("stop the timer, copy %s* aside, and rebuild it with `sqlite3 %s .recover | sqlite3 new.db` (that salvages the stored handoffs' bytes too, its contents table); the hosts' processed/ directories keep a copy of every archived handoff until prune removes it",
		p, p)
}

func doctorReviewInbox(ws string) Check {
	c := Check{Scope: "workspace", Name: "review-inbox", Status: CheckOK}
	dir := filepath.Join(ws, layout.ReviewDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		c.Message = "review inbox empty"
		return c
	}
	if err != nil {
		c.Status, c.Message = CheckWarn, fmt.Sprintf("cannot list %s: %v", dir, err)
		c.Hint = "make it a directory readable by this user"
		return c
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".md") {
			n++
		}
	}
	c.Message = fmt.Sprintf("%d draft(s) waiting in %s", n, layout.ReviewDir)
	if n > ReviewInboxWarn {
		c.Status = CheckWarn
		c.Hint = "go through them: `handoff review` lists what waits and why, then accept, edit or reject each"
	}
	return c
}

func doctorReceipt(ws string, opts Options) Check {
	c := Check{Scope: "workspace", Name: "last-run", Status: CheckOK}
	p := filepath.Join(ws, layout.ReceiptsDir, "latest.json")
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Message = CheckWarn, "no receipt yet: no sync has finished in this workspace"
		c.Hint = "run `handoff sync`, and install the timer (`handoff timer install`) so that it runs every " + opts.Every.String()
		return c
	}
	r, err := receipts.Read(p)
	if err != nil {
		c.Status, c.Message = CheckFail, fmt.Sprintf("cannot read the last receipt: %v", err)
		c.Hint = fmt.Sprintf("move %s aside; the next sync writes a new one", p)
		return c
	}
	at := r.FinishedAt
	if at.IsZero() {
		at = r.StartedAt
	}
	age := opts.Now().Sub(at)
	if age < 0 {
		age = 0
	}
	c.Message = fmt.Sprintf("last run %s finished %s ago: %s", r.RunID, roundAge(age), r.Outcome)
	var hints []string
	worse := func(status string) {
		if status == CheckFail || c.Status == CheckOK {
			c.Status = status
		}
	}
	switch {
	case r.Interrupted:
		// Stopped by a person or the system, not failed: what it
		// stored is kept, and the next run finishes the rest.
		worse(CheckWarn)
		c.Message = fmt.Sprintf("last run %s was interrupted %s ago (%s)", r.RunID, roundAge(age), strings.TrimPrefix(r.Error, "interrupted: "))
		if why := partialReasons(r); why != "" {
			c.Message += "; " + why
		}
		hints = append(hints, "nothing stored is lost: the next `handoff sync` (the timer's too) ingests, archives and publishes what it left")
	case r.Outcome == receipts.OutcomeOK:
	case r.Outcome == receipts.OutcomePartial:
		worse(CheckWarn)
		if why := partialReasons(r); why != "" {
			c.Message += " (" + why + ")"
		}
		hints = append(hints, "see the host checks below and "+filepath.Join(ws, layout.ReceiptsDir, "latest.log"))
	default:
		worse(CheckFail)
		own := ""
		if r.Error != "" {
			var msg string
			msg, own = splitHint(r.Error)
			c.Message += ": " + msg
		} else if fh := partialReasons(r); fh != "" {
			c.Message += " (" + fh + ")"
		}
		if own != "" {
			hints = append(hints, own)
		}
		hints = append(hints, "see "+filepath.Join(ws, layout.ReceiptsDir, "latest.log")+" and the host checks below")
	}
	switch {
	case age > staleFail*opts.Every:
		worse(CheckFail)
		c.Message += fmt.Sprintf("; expected every %s", opts.Every)
		hints = append(hints, timerHint(opts.Every))
	case age > staleWarn*opts.Every:
		worse(CheckWarn)
		c.Message += fmt.Sprintf("; expected every %s", opts.Every)
		hints = append(hints, timerHint(opts.Every))
	}
	c.Hint = strings.Join(hints, "; ")
	return c
}

func timerHint(every time.Duration) string {
	return fmt.Sprintf("the timer may not be running: check `systemctl --user status %s.timer` or your cron line (pass --every if it runs less often than every %s)", TimerUnit, every)
}

// partialReasons says what made a run partial or failed, as its receipt
// tells it: hosts that failed, hosts partial (an inbox's handoffs stored
// but not archived), hosts with an inbox that could not be listed, and
// mirrors that failed or were interrupted ("failed: laptop; inbox not
// listed: vps"). "" when the receipt names none.
func partialReasons(r *receipts.Receipt) string {
	var failed, partial, unlisted, mirrors []string
	for _, h := range r.Hosts {
		switch h.Outcome {
		case receipts.HostError:
			failed = append(failed, h.Name)
		case receipts.HostPartial:
			partial = append(partial, h.Name)
		}
		for _, in := range h.Inboxes {
			if in.State == receipts.InboxError && h.Outcome != receipts.HostPartial {
				unlisted = append(unlisted, h.Name)
				break
			}
		}
		if m := h.Mirror; m != nil && m.Outcome == mirror.OutcomeError {
			if m.Interrupted {
				mirrors = append(mirrors, h.Name+" (interrupted)")
			} else {
				mirrors = append(mirrors, h.Name)
			}
		}
	}
	var parts []string
	for _, p := range []struct {
		label string
		names []string
	}{{"failed", failed}, {"partial", partial}, {"inbox not listed", unlisted}, {"mirror failed", mirrors}} {
		if len(p.names) > 0 {
			parts = append(parts, p.label+": "+strings.Join(p.names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// configAge renders a configured duration: whole days as 7d, whole
// hours as 36h, else as roundAge does.
func configAge(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return roundAge(d)
}

// roundAge renders a duration as a person reads an age: 45s, 12m, 3h5m, 2d4h.
func roundAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// ---------------------------------------------------------------------------
// Timer.

// noSession is the timer check's message without a systemd user session.
const noSession = "systemd user session not available"

// doctorTimer asks systemd, when a user session is there to ask, whether
// the timer is installed and active. Without one it can only warn.
func doctorTimer(ctx context.Context) Check {
	unit := TimerUnit + ".timer"
	c := Check{Scope: "timer", Name: "timer", Status: CheckWarn}
	systemctl, err := exec.LookPath("systemctl")
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if err != nil || rt == "" {
		c.Message = noSession
		c.Hint = "make sure `crontab -l` has a line that runs `handoff sync` (`handoff timer install --cron` prints one)"
		return c
	}
	if _, err := os.Stat(filepath.Join(rt, "bus")); err != nil {
		c.Message = noSession
		c.Hint = "make sure `crontab -l` has a line that runs `handoff sync` (`handoff timer install --cron` prints one)"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, systemctl, "--user", "show", "--property=LoadState,ActiveState", unit).Output()
	if err != nil {
		c.Message = fmt.Sprintf("cannot ask systemd about %s: %v", unit, err)
		c.Hint = fmt.Sprintf("run `systemctl --user status %s`", unit)
		return c
	}
	props := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			props[k] = v
		}
	}
	switch {
	case props["LoadState"] != "loaded":
		c.Message = fmt.Sprintf("%s is not installed", unit)
		c.Hint = "run `handoff timer install` (or use cron: `handoff timer install --cron` prints a line)"
	case props["ActiveState"] != "active":
		c.Message = fmt.Sprintf("%s is installed but %s", unit, props["ActiveState"])
		c.Hint = fmt.Sprintf("start it with `systemctl --user enable --now %s`", unit)
	default:
		c.Status, c.Message = CheckOK, fmt.Sprintf("%s is active", unit)
	}
	return c
}

// ---------------------------------------------------------------------------
// Hosts.

// doctorHosts checks hosts concurrently, at most opts.Parallel at once (by
// default as many as sync pulls at once), and returns their checks in
// manifest order.
func doctorHosts(ctx context.Context, hosts []manifest.HostConfig, opts Options, facts *ledgerFacts) [][]Check {
	out := make([][]Check, len(hosts))
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = fanout.HostsAtOnce(len(hosts), fanout.Available())
	}
	setup.ForEachHost(hosts, parallel, func(i int, h manifest.HostConfig) {
		out[i] = doctorHost(ctx, h, opts, facts)
	})
	return out
}

func withScope(c Check, scope string) Check {
	c.Scope = scope
	return c
}

func doctorHost(ctx context.Context, h manifest.HostConfig, opts Options, facts *ledgerFacts) (out []Check) {
	scope := "host " + h.Name
	check := func(c Check) {
		c.Scope = scope
		out = append(out, c)
	}
	var hostInfo *mirror.Info // the mirror's MIRROR.json, once the host is reached
	if h.Mirror != nil {
		// Last: its hints point at the host's checks above.
		defer func() {
			out = append(out, withScope(doctorMirror(opts.workspace, h, opts, hostInfo, facts.workspaceID), scope))
		}()
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	connect := min(h.Timeout, opts.ConnectTimeout)
	dctx, dcancel := context.WithTimeout(ctx, connect)
	dial := opts.Dial.Or(opts.Log)
	start := time.Now()
	fsys, err := dial(dctx, h)
	timedOut := errors.Is(dctx.Err(), context.DeadlineExceeded)
	dcancel()
	if err != nil {
		msg, hint := unreachableHint(h, err, timedOut, connect)
		if last := facts.activity[h.Name].LastStored; facts.ok && !last.IsZero() && opts.Now().Sub(last) > WaitWarn {
			msg += fmt.Sprintf("; its last handoff arrived %s ago, so whatever its agents wrote since has waited there as long", roundAge(opts.Now().Sub(last)))
		}
		check(Check{Name: "reachable", Status: CheckFail, Message: "unreachable: " + msg, Hint: hint})
		return out
	}
	defer fsys.Close()
	how := h.Transport
	if h.Transport != manifest.TransportLocal {
		how += ", " + time.Since(start).Round(time.Millisecond).String()
	}
	check(Check{Name: "reachable", Status: CheckOK, Message: "reachable (" + how + ")"})
	if h.Mirror != nil {
		hostInfo, _ = mirror.ReadHostInfo(ctx, fsys, h.Mirror.Path)
	}

	cfg := setup.ClaimConfig(h, opts.Log)
	inboxes, err := claim.Discover(ctx, fsys, cfg)
	if err != nil {
		hint := "check this host's inboxes and discover roots in the manifest (symlinks are never followed: name the real path)"
		if ctx.Err() != nil {
			hint = fmt.Sprintf("the host did not finish answering within its timeout of %s; check the network, or raise timeout for this host", h.Timeout)
		}
		check(Check{Name: "discovery", Status: CheckFail, Message: "discovery failed: " + err.Error(), Hint: hint})
		return out
	}
	if len(inboxes) == 0 {
		check(Check{Name: "discovery", Status: CheckWarn, Message: "no inboxes found",
			Hint: fmt.Sprintf("declare inboxes, or discover roots holding repositories with <harness>/%s (harnesses %s, at most max_depth levels down)",
				claim.InboxDir, strings.Join(h.Harnesses, ", "))})
		if c, ok := doctorReach(ctx, fsys, h, cfg, nil); ok {
			check(c)
		}
		return out
	}
	follows := false
	for _, in := range inboxes {
		c, f := doctorInbox(ctx, fsys, h, in, opts.Now())
		check(c)
		follows = follows || f
		if ctx.Err() != nil {
			check(Check{Name: "discovery", Status: CheckFail, Message: fmt.Sprintf("timed out after %s", h.Timeout),
				Hint: "check the network, or raise timeout for this host"})
			break
		}
	}
	if c, ok := doctorReach(ctx, fsys, h, cfg, inboxes); ok {
		check(c)
	}
	if c, ok := doctorActivity(h, facts, opts.Now()); ok {
		check(c)
	}
	if follows {
		check(Check{Name: "sftp-server", Status: CheckWarn,
			Message: "the SFTP server follows symlinks in LSTAT, RENAME and REMOVE (as ProFTPD's mod_sftp does): its symlinked inboxes, archive directories and handoffs are left in place, never pulled or moved",
			Hint:    "replace those symlinks with real directories and files, or serve SFTP on this host with OpenSSH's sftp-server"})
	}
	return out
}

// unreachableHint splits DialHost's error into a message and a hint.
func unreachableHint(h manifest.HostConfig, err error, timedOut bool, connect time.Duration) (string, string) {
	msg := err.Error()
	for _, sep := range []string{"\nhint: ", "; hint: "} {
		if m, hint, ok := strings.Cut(msg, sep); ok {
			return strings.ReplaceAll(m, "\n", "; "), hint // the transport's own advice
		}
	}
	msg = strings.ReplaceAll(msg, "\n", "; ")
	target := h.Name
	if h.SSH != nil {
		target = h.SSH.Host
		if h.SSH.User != "" {
			target = h.SSH.User + "@" + target
		}
		if h.SSH.Port != 0 {
			target = fmt.Sprintf("-p %d %s", h.SSH.Port, target)
		}
	}
	switch {
	case errors.Is(err, sshfs.ErrAuth):
		return msg, "the host refused every key offered: check ssh.identity_file (or the ssh-agent) and that the key's public half is in the host's ~/.ssh/authorized_keys"
	case timedOut || errors.Is(err, context.DeadlineExceeded):
		return msg, fmt.Sprintf("no answer within %s: check that the host is up and reachable (`ssh %s`), and the ssh block in the manifest or ~/.ssh/config", connect, target)
	}
	return msg, fmt.Sprintf("check that the host is up and its sshd listens (`ssh %s`), and the ssh block in the manifest or ~/.ssh/config; for a host key error run `handoff hosts trust %s`", target, h.Name)
}

// archivedName matches what the pull names a stored source in processed/
// or malformed/: <stem>.<sha12>.md.
var archivedName = regexp.MustCompile(`^.+\.[0-9a-f]{12}\.md$`)

// follows reports that the server was seen to follow symlinks in LSTAT:
// its listing and its LSTAT disagree about the inbox, an archive
// directory or a symlinked handoff.
func doctorInbox(ctx context.Context, fsys transport.FS, h manifest.HostConfig, in *claim.Inbox, now time.Time) (c Check, follows bool) {
	st := &InboxStatus{Path: in.Path, State: in.State, Pending: len(in.Candidates), Tracked: in.Tracked, Rejected: []string{}}
	c = Check{Name: "inbox", Status: CheckOK, Inbox: st}
	label := "inbox " + displayName(in.Path)
	follows = in.FollowsSymlinks
	for _, f := range in.Candidates {
		if f.IsSymlink() {
			if fi, err := fsys.Lstat(ctx, path.Join(in.Path, f.Name)); err == nil && !fi.IsSymlink() {
				follows = true
			}
		}
	}
	switch in.State {
	case claim.StateMissing:
		c.Status, c.Message = CheckWarn, label+": missing"
		c.Hint = fmt.Sprintf("create it on %s (mkdir -p %s), or fix or remove it in the manifest's inboxes", h.Name, in.Path)
		return c, follows
	case claim.StateSymlink:
		c.Status, c.Message = CheckWarn, label+": is a symlink; never followed, so nothing is pulled from it"
		c.Hint = "name the real directory in the manifest, or replace the symlink with a directory"
		return c, follows
	case claim.StateOptedOut:
		c.Message = label + ": opted out (" + claim.OptOutMarker + ")"
		return c, follows
	case claim.StateError:
		c.Status, c.Message = CheckWarn, fmt.Sprintf("%s: cannot be listed: %v", label, in.Err)
		c.Hint = "make it a directory the ssh user can read"
		return c, follows
	}
	var probs, hints []string
	if in.State == claim.StateGitUnreadable {
		c.Status = CheckWarn
		probs = append(probs, fmt.Sprintf("skipped: git index unreadable (%v)", in.Err))
		hints = append(hints, fmt.Sprintf("run `git status` in %s to check its index (or delete a corrupt .git/index and run `git reset`); the inbox is skipped until then", in.Repo))
	}
	for _, d := range []string{claim.ProcessedDir, claim.MalformedDir} {
		ents, err := listArchive(ctx, fsys, path.Join(in.Path, d), in.ArchiveDirs, &follows)
		if err != nil {
			c.Status = CheckWarn
			probs = append(probs, fmt.Sprintf("cannot list %s/: %v", d, err))
			if errors.Is(err, errNotDir) {
				hints = append(hints, fmt.Sprintf("%s/ must be a real directory; move aside what is in the way (the next sync fails this inbox until then)", d))
			} else {
				hints = append(hints, fmt.Sprintf("check %s/ on %s: it must be readable by the ssh user", d, h.Name))
			}
			continue
		}
		for _, e := range ents {
			switch {
			case d == claim.ProcessedDir:
				st.Processed++
			case archivedName.MatchString(e.Name):
				st.Malformed++
			default:
				st.RejectedCount++
				if len(st.Rejected) < maxRejectedListed {
					st.Rejected = append(st.Rejected, claim.Quote(e.Name))
				}
			}
		}
	}
	if in.State == claim.StateOK {
		if err := probeArchive(ctx, fsys, in.Path); err != nil {
			c.Status = CheckFail
			probs = append(probs, "the account cannot archive here: "+strings.ReplaceAll(err.Error(), "\n", "; "))
			hints = append(hints, claim.ArchiveDeniedHint(in.Path))
		}
	}
	msg := fmt.Sprintf("%s: %d pending", label, st.Pending)
	if st.Pending > 0 {
		oldest := now
		for _, f := range in.Candidates {
			if f.ModTime.Before(oldest) {
				oldest = f.ModTime
			}
		}
		msg += fmt.Sprintf(" (oldest %s)", roundAge(max(now.Sub(oldest), 0)))
		waiting := 0
		for _, f := range in.Candidates {
			if now.Sub(f.ModTime) > WaitWarn {
				waiting++
			}
		}
		if waiting > 0 {
			c.Status = CheckWarn
			probs = append(probs, fmt.Sprintf("%d handoff(s) waiting more than %s", waiting, configAge(WaitWarn)))
			hints = append(hints, fmt.Sprintf("a sync should have pulled them long ago: run `handoff sync --host %s` and read the Deferred line and the host's error (a writer clock ahead of this one keeps files too young; a file rewritten all the time keeps changing)", h.Name))
		}
	}
	if st.Tracked > 0 {
		// Committed handoffs are the repository's files: never collected.
		c.Status = CheckWarn
		list := strings.Join(in.TrackedNames[:min(len(in.TrackedNames), maxRejectedListed)], ", ")
		if st.Tracked > min(len(in.TrackedNames), maxRejectedListed) {
			list += fmt.Sprintf(", … (%d more)", st.Tracked-min(len(in.TrackedNames), maxRejectedListed))
		}
		probs = append(probs, fmt.Sprintf("%d handoff(s) tracked by git, so never collected: %s", st.Tracked, list))
		rel := strings.TrimPrefix(in.Path, in.Repo+"/")
		hints = append(hints, fmt.Sprintf("handoffs are not to be committed: in %s run `git rm --cached %s/*.md` (the files stay, and the next sync collects them) and add the line `%s/` to its .gitignore", in.Repo, rel, rel))
	}
	msg += fmt.Sprintf(", %d processed, %d malformed", st.Processed, st.Malformed)
	if st.RejectedCount > 0 {
		c.Status = CheckWarn
		list := strings.Join(st.Rejected, ", ")
		if st.RejectedCount > len(st.Rejected) {
			list += fmt.Sprintf(", … (%d more)", st.RejectedCount-len(st.Rejected))
		}
		probs = append(probs, fmt.Sprintf("%d rejected (never read): %s", st.RejectedCount, list))
		hints = append(hints, fmt.Sprintf("`handoff where NAME` says why each was rejected (symlink, not a regular file, or over max_file_size %d bytes); fix it and move it back into the inbox, or delete it from %s/", h.MaxFileSize, claim.MalformedDir))
	}
	if in.IgnoredN > 0 {
		c.Status = CheckWarn
		probs = append(probs, fmt.Sprintf("%d name(s) ignored (not plain *.md names): %s", in.IgnoredN, strings.Join(in.Ignored[:min(len(in.Ignored), maxRejectedListed)], ", ")))
		hints = append(hints, "rename or remove them; names with control characters, invalid UTF-8 or over 255 bytes are never read")
	}
	if len(probs) > 0 {
		msg += "; " + strings.Join(probs, "; ")
	}
	c.Message = msg
	c.Hint = strings.Join(hints, "; ")
	return c, follows
}

// listArchive lists an archive directory: none yet is empty, and anything
// but a real directory is an error. listed holds what the inbox's listing
// said of its archive directories (nil: not listed); its type is trusted
// over an LSTAT, which some servers answer through a symlink (then
// *follows is set).
func listArchive(ctx context.Context, fsys transport.FS, dir string, listed map[string]transport.FileInfo, follows *bool) ([]transport.FileInfo, error) {
	fi, err := fsys.Lstat(ctx, dir)
	if errors.Is(err, transport.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e, ok := listed[path.Base(dir)]; ok && !e.IsDir() {
		if fi.IsDir() {
			*follows = true
		}
		return nil, errNotDir
	}
	if !fi.IsDir() {
		return nil, errNotDir
	}
	return fsys.ReadDir(ctx, dir, 0)
}

var errNotDir = errors.New("not a directory (a symlink or a file)")

// displayName prints a host-supplied path as is when it is safe on a
// terminal, else quoted with Go escapes.
func displayName(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
		return claim.Quote(s)
	}
	return s
}

// doctorActivity warns when a reachable host has sent no handoff for its
// stale_after (the design guide's sign that an agent's closeout
// instruction stopped firing). Not checked without a ledger, with
// stale_after 0, or while the workspace's first sync is younger than
// stale_after.
func doctorActivity(h manifest.HostConfig, facts *ledgerFacts, now time.Time) (Check, bool) {
	if !facts.ok || h.StaleAfter <= 0 || facts.firstRun.IsZero() {
		return Check{}, false
	}
	c := Check{Name: "activity", Status: CheckOK}
	hint := fmt.Sprintf("its agents may have stopped writing closeout handoffs: check the closeout instruction file on %s (CLAUDE.md, AGENTS.md; `handoff instructions --host %s` prints the block to put there), or set stale_after: 0 on this host if it rarely writes",
		h.Name, h.Name)
	last := facts.activity[h.Name].LastStored
	switch {
	case last.IsZero() && now.Sub(facts.firstRun) > h.StaleAfter:
		c.Status, c.Hint = CheckWarn, hint
		c.Message = fmt.Sprintf("no handoff from this host since the first sync %s ago (stale_after %s)", roundAge(now.Sub(facts.firstRun)), configAge(h.StaleAfter))
	case last.IsZero():
		return Check{}, false
	case now.Sub(last) > h.StaleAfter:
		c.Status, c.Hint = CheckWarn, hint
		c.Message = fmt.Sprintf("no handoff from this host for %s (stale_after %s)", roundAge(now.Sub(last)), configAge(h.StaleAfter))
	default:
		c.Message = fmt.Sprintf("last handoff %s ago", roundAge(max(now.Sub(last), 0)))
	}
	return c, true
}
