package doctor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gofrs/flock"
	_ "modernc.org/sqlite"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/doctor"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/internal/workspace"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
)

// drEnv is testenv's Env with the runs the doctor tests make.
type drEnv struct{ *testenv.Env }

func newDrEnv(t *testing.T, extra string) *drEnv { return &drEnv{testenv.NewEnv(t, extra)} }

func (e *drEnv) sync() *receipts.Receipt {
	e.T.Helper()
	r, err := handoff.Sync(context.Background(), handoff.Options{Manifest: e.M})
	if err != nil {
		e.T.Fatalf("Sync: %v", err)
	}
	return r
}

func (e *drEnv) doctor(set ...func(*doctor.Options)) *doctor.Report {
	e.T.Helper()
	opts := doctor.Options{Manifest: e.M}
	for _, f := range set {
		f(&opts)
	}
	rep := doctor.Run(context.Background(), opts)
	drCheckShape(e.T, rep)
	return rep
}

// drCheckShape asserts what every report must hold: OK is false exactly
// when a check failed, every status is known, every problem has a hint,
// and workspace checks come before host checks.
func drCheckShape(t testing.TB, rep *doctor.Report) {
	t.Helper()
	failed := false
	seenHost := false
	for _, c := range rep.Checks {
		switch c.Status {
		case doctor.CheckOK:
		case doctor.CheckWarn, doctor.CheckFail:
			if c.Hint == "" {
				t.Errorf("%s %s: %s has no hint", c.Scope, c.Name, c.Status)
			}
			failed = failed || c.Status == doctor.CheckFail
		default:
			t.Errorf("%s %s: unknown status %q", c.Scope, c.Name, c.Status)
		}
		if strings.HasPrefix(c.Scope, "host ") {
			seenHost = true
		} else if seenHost {
			t.Errorf("%s check %s after a host check", c.Scope, c.Name)
		}
	}
	if rep.OK == failed {
		t.Errorf("report OK = %v with a failed check = %v", rep.OK, failed)
	}
}

// drFind returns the checks of scope with name.
func drFind(rep *doctor.Report, scope, name string) []doctor.Check {
	var out []doctor.Check
	for _, c := range rep.Checks {
		if c.Scope == scope && c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func drOne(t *testing.T, rep *doctor.Report, scope, name string) doctor.Check {
	t.Helper()
	cs := drFind(rep, scope, name)
	if len(cs) != 1 {
		t.Fatalf("%d %q checks in scope %q, want 1: %+v", len(cs), name, scope, rep.Checks)
	}
	return cs[0]
}

func drWant(t *testing.T, c doctor.Check, status, msgPart string) {
	t.Helper()
	if c.Status != status || !strings.Contains(c.Message, msgPart) {
		t.Errorf("%s %s: [%s] %s (hint %q); want [%s] containing %q", c.Scope, c.Name, c.Status, c.Message, c.Hint, status, msgPart)
	}
}

// TestDoctorHealthy: after a sync, doctor reports every workspace check
// and the inbox counts (pending, processed, malformed, rejected by name),
// fails nothing, and writes nothing: the whole tree (workspace and
// inboxes) hashes the same before and after.
func TestDoctorHealthy(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	e.Put(e.Inbox, "junk.md", "not a handoff\n")
	if err := os.Symlink(filepath.Join(e.Dir, "writers.yaml"), filepath.Join(e.Inbox, "link.md")); err != nil {
		t.Fatal(err)
	}
	r := e.sync()
	if r.Outcome != receipts.OutcomeOK || r.Counts.Rejected != 1 || r.Counts.Malformed != 1 {
		t.Fatalf("fixture sync: %s %+v", r.Outcome, r.Counts)
	}
	e.Put(e.Inbox, "later.md", testenv.Doc("TOOLS.md", "- later"))

	before := testenv.Tree(t, e.Dir)
	rep := e.doctor()
	testenv.SameTree(t, "doctor", before, testenv.Tree(t, e.Dir))

	if !rep.OK {
		t.Fatalf("report not OK: %+v", rep.Checks)
	}
	if rep.Checks[0].Scope != "manifest" {
		t.Errorf("first check %+v, want the manifest", rep.Checks[0])
	}
	drWant(t, drOne(t, rep, "workspace", "workspace"), doctor.CheckOK, "is writable")
	drWant(t, drOne(t, rep, "workspace", "lock"), doctor.CheckOK, "lock free")
	drWant(t, drOne(t, rep, "workspace", "ledger"), doctor.CheckOK, "passes integrity_check (2 source(s)")
	drWant(t, drOne(t, rep, "workspace", "plans"), doctor.CheckOK, "no interrupted plans")
	drWant(t, drOne(t, rep, "workspace", "malformed"), doctor.CheckOK, "1 malformed handoff(s)")
	drWant(t, drOne(t, rep, "workspace", "review-inbox"), doctor.CheckOK, "")
	drWant(t, drOne(t, rep, "workspace", "last-run"), doctor.CheckOK, "last run "+r.RunID+" finished")
	drWant(t, drOne(t, rep, "timer", "timer"), doctor.CheckWarn, "systemd user session not available")
	drWant(t, drOne(t, rep, "host canonical", "reachable"), doctor.CheckOK, "reachable (local)")

	inboxes := drFind(rep, "host canonical", "inbox")
	if len(inboxes) != 2 {
		t.Fatalf("%d inbox checks, want 2: %+v", len(inboxes), inboxes)
	}
	app := inboxes[0]
	if app.Inbox == nil || app.Inbox.Path != e.Inbox {
		t.Fatalf("first inbox check %+v, want %s", app, e.Inbox)
	}
	st := app.Inbox
	if st.Pending != 1 || st.Processed != 1 || st.Malformed != 1 || st.RejectedCount != 1 || len(st.Rejected) != 1 || st.Rejected[0] != `"link.md"` {
		t.Errorf("app inbox counts %+v", st)
	}
	drWant(t, app, doctor.CheckWarn, `1 pending`)
	drWant(t, app, doctor.CheckWarn, `1 rejected (never read): "link.md"`)
	if !strings.Contains(app.Hint, "handoff where") {
		t.Errorf("rejected hint %q does not point at handoff where", app.Hint)
	}
	drWant(t, inboxes[1], doctor.CheckOK, "0 pending, 0 processed, 0 malformed")

	// --json's shape: checks with scope, name, status, message, hint; ok.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Checks []map[string]any `json:"checks"`
		OK     *bool            `json:"ok"`
	}
	if err := json.Unmarshal(b, &generic); err != nil || generic.OK == nil || !*generic.OK || len(generic.Checks) != len(rep.Checks) {
		t.Fatalf("JSON %s: %v", b, err)
	}
	for _, c := range generic.Checks {
		for _, k := range []string{"scope", "name", "status", "message", "hint"} {
			if _, ok := c[k]; !ok {
				t.Errorf("JSON check %v lacks %q", c, k)
			}
		}
	}
}

// TestDoctorNoWorkspace: before `handoff init` the workspace is an error,
// not an empty workspace: its check fails with init's hint, doctor
// creates nothing, and the hosts are still checked. A directory that
// exists without an identity fails the same way.
func TestDoctorNoWorkspace(t *testing.T) {
	e := &drEnv{testenv.NewEnvNoWorkspace(t, "")}
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	before := testenv.Tree(t, e.Dir)
	rep := e.doctor()
	testenv.SameTree(t, "doctor", before, testenv.Tree(t, e.Dir))
	if rep.OK || rep.WorkspaceID != "" {
		t.Fatalf("no workspace must fail, with no id: %+v", rep)
	}
	c := drOne(t, rep, "workspace", "workspace")
	drWant(t, c, doctor.CheckFail, "no workspace at "+e.WS+": the directory does not exist")
	if !strings.Contains(c.Hint, "handoff init --workspace") {
		t.Errorf("hint %q does not say to run handoff init", c.Hint)
	}
	if len(drFind(rep, "workspace", "lock")) != 0 {
		t.Errorf("checks of a workspace that does not exist: %+v", rep.Checks)
	}
	if in := drFind(rep, "host canonical", "inbox"); len(in) != 2 || in[0].Inbox.Pending != 1 {
		t.Errorf("inbox checks %+v", in)
	}

	if err := os.MkdirAll(e.WS, 0o700); err != nil {
		t.Fatal(err)
	}
	before = testenv.Tree(t, e.Dir)
	rep = e.doctor()
	testenv.SameTree(t, "doctor", before, testenv.Tree(t, e.Dir))
	drWant(t, drOne(t, rep, "workspace", "identity"), doctor.CheckFail, "is not a handoff workspace")
	if rep.OK || len(drFind(rep, "workspace", "ledger")) != 0 {
		t.Errorf("a directory without an identity: %+v", rep.Checks)
	}
}

// TestDoctorNoRunYet: after `handoff init` and before the first sync,
// doctor shows the workspace's id, only warns, and creates nothing.
func TestDoctorNoRunYet(t *testing.T) {
	e := newDrEnv(t, "")
	id, err := workspace.Read(e.WS)
	if err != nil {
		t.Fatal(err)
	}
	before := testenv.Tree(t, e.Dir)
	rep := e.doctor()
	testenv.SameTree(t, "doctor", before, testenv.Tree(t, e.Dir))
	if !rep.OK || rep.WorkspaceID != id.ID {
		t.Fatalf("no run yet must not fail, and must carry id %s: %+v", id.ID, rep)
	}
	drWant(t, drOne(t, rep, "workspace", "identity"), doctor.CheckOK, "workspace id "+id.ID)
	drWant(t, drOne(t, rep, "workspace", "last-run"), doctor.CheckWarn, "no receipt yet")
}

// TestDoctorLastRun: the last receipt's outcome and age decide its check:
// fresh and ok is ok; older than 2x --every warns, older than 6x fails;
// partial warns, failed fails; no receipt warns, an unreadable one fails.
func TestDoctorLastRun(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	r := e.sync()
	latest := filepath.Join(e.WS, ".handoff/receipts/latest.json")
	orig, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	withOutcome := func(outcome string) func() {
		return func() {
			rc := *r
			rc.Outcome = outcome
			if outcome == receipts.OutcomePartial {
				rc.Hosts = append([]receipts.Host{{Name: "laptop", Outcome: "error", Error: "unreachable"}}, rc.Hosts...)
			}
			b, err := receipts.Marshal(&rc)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(latest, b, 0o600)
		}
	}
	tests := []struct {
		name   string
		setup  func()
		age    time.Duration
		every  time.Duration
		status string
		msg    string
		hint   string
	}{
		{name: "fresh", status: doctor.CheckOK, msg: ": ok"},
		{name: "a little late", age: 50 * time.Minute, status: doctor.CheckOK, msg: ": ok"},
		{name: "stale", age: 2 * time.Hour, status: doctor.CheckWarn, msg: "expected every 30m0s", hint: "handoff-sync.timer"},
		{name: "very stale", age: 4 * time.Hour, status: doctor.CheckFail, msg: "expected every 30m0s", hint: "cron"},
		{name: "stale but --every 1h", age: 2 * time.Hour, every: time.Hour, status: doctor.CheckOK, msg: ": ok"},
		{name: "partial", setup: withOutcome(receipts.OutcomePartial), status: doctor.CheckWarn, msg: "partial (failed: laptop)", hint: "latest.log"},
		{name: "failed", setup: withOutcome(receipts.OutcomeFailed), status: doctor.CheckFail, msg: "failed", hint: "latest.log"},
		// A run partial because a host was partial and a mirror was
		// interrupted names both, not an empty list of failed hosts.
		{name: "partial host, interrupted mirror", setup: func() {
			rc := *r
			rc.Outcome = receipts.OutcomePartial
			rc.Hosts = []receipts.Host{{Name: "desk", Outcome: receipts.HostPartial, Error: "1 file(s) stored but not archived"},
				{Name: "laptop", Outcome: receipts.HostOK, Mirror: &receipts.Mirror{Outcome: "error", Interrupted: true, Error: "interrupted"}}}
			b, err := receipts.Marshal(&rc)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(latest, b, 0o600)
		}, status: doctor.CheckWarn, msg: "partial (partial: desk; mirror failed: laptop (interrupted))", hint: "latest.log"},
		// An interrupted run (SIGINT during its publish) is what its
		// receipt says: interrupted, a warning with the next step, not a
		// failure to repair (issue 48, item 6).
		{name: "interrupted", setup: func() {
			rc := *r
			rc.Outcome, rc.Interrupted, rc.Error = receipts.OutcomeFailed, true, "interrupted: interrupt signal received"
			rc.Hosts = []receipts.Host{{Name: "laptop", Outcome: receipts.HostOK, Mirror: &receipts.Mirror{Outcome: "error", Interrupted: true, Error: "interrupted"}}}
			b, err := receipts.Marshal(&rc)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(latest, b, 0o600)
		}, status: doctor.CheckWarn, msg: "was interrupted 0s ago (interrupt signal received); mirror failed: laptop (interrupted)", hint: "the next `handoff sync`"},
		{name: "partial and stale", setup: withOutcome(receipts.OutcomePartial), age: 5 * time.Hour, status: doctor.CheckFail, msg: "partial"},
		{name: "missing", setup: func() { os.Remove(latest) }, status: doctor.CheckWarn, msg: "no receipt yet", hint: "handoff timer install"},
		{name: "garbage", setup: func() { os.WriteFile(latest, []byte("{not json"), 0o600) }, status: doctor.CheckFail, msg: "cannot read the last receipt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(latest, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup()
			}
			rep := e.doctor(func(o *doctor.Options) {
				o.Every = tt.every
				o.Now = func() time.Time { return r.FinishedAt.Add(tt.age) }
			})
			c := drOne(t, rep, "workspace", "last-run")
			drWant(t, c, tt.status, tt.msg)
			if !strings.Contains(c.Hint, tt.hint) {
				t.Errorf("hint %q lacks %q", c.Hint, tt.hint)
			}
			if rep.OK != (tt.status != doctor.CheckFail) {
				t.Errorf("report OK = %v with last-run %s", rep.OK, tt.status)
			}
		})
	}
}

// ledgerExec runs statements on the workspace's ledger as a person with
// sqlite3 (or a crashed run) would leave it, behind handoff's back.
func (e *drEnv) ledgerExec(t *testing.T, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(e.WS, ".handoff/ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// drDeadPid returns the pid of a process that has exited.
func drDeadPid(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no `true` to run:", err)
	}
	return cmd.Process.Pid
}

// A ledger whose rows' hashes and content numbers disagree (changed
// outside handoff) fails the ledger check with a hint that says so, not
// the .recover one, which would keep the rows as they are.
func TestDoctorNumbersDisagree(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	e.sync()
	e.ledgerExec(t, `UPDATE handoffs SET sha256 = '`+testenv.Sum("other")+`'`)
	c := drOne(t, e.doctor(), "workspace", "ledger")
	drWant(t, c, doctor.CheckFail, "1 rows name a content other than their number's")
	if !strings.Contains(c.Hint, "changed outside handoff") || strings.Contains(c.Hint, ".recover") {
		t.Errorf("ledger hint %q", c.Hint)
	}
}

// TestDoctorLockAndPlans: a lock held by a live process is a run in
// progress (its unfinished plans too); held with a dead pid in the file
// warns; unfinished plans with the lock free warn that the next sync
// finishes them. The ledger is read in every case.
func TestDoctorLockAndPlans(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	e.sync()

	// A plan a crashed run left: state planned.
	e.ledgerExec(t, `INSERT INTO shas (sha256) VALUES ('`+testenv.Sum("x")+`')`,
		`INSERT INTO plans (sha_id, sha256, source_id, kind, action, target, before_sha256, after_sha256, content, state, run_id, created_at)
		SELECT id, sha256, 1, 'document', 'no-card', 'TOOLS.md', '', '`+testenv.Sum("y")+`', x'00', 'planned', 'crashed-run', '2026-01-01T00:00:00Z'
		FROM shas WHERE sha256 = '`+testenv.Sum("x")+`'`)

	rep := e.doctor()
	drWant(t, drOne(t, rep, "workspace", "lock"), doctor.CheckOK, "lock free")
	c := drOne(t, rep, "workspace", "plans")
	drWant(t, c, doctor.CheckWarn, "1 interrupted plan(s)")
	if !strings.Contains(c.Hint, "the next sync finishes them") {
		t.Errorf("plans hint %q", c.Hint)
	}

	lockPath := filepath.Join(e.WS, ".handoff/lock")
	fl := flock.New(lockPath)
	if ok, err := fl.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer fl.Unlock()

	os.WriteFile(lockPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	rep = e.doctor()
	drWant(t, drOne(t, rep, "workspace", "lock"), doctor.CheckOK, fmt.Sprintf("lock held by pid %d (a run is in progress", os.Getpid()))
	drWant(t, drOne(t, rep, "workspace", "plans"), doctor.CheckOK, "1 plan(s) in progress")
	drWant(t, drOne(t, rep, "workspace", "ledger"), doctor.CheckOK, "passes integrity_check")

	// A person's `review edit` holds it while their editor is open: doctor
	// names the command and says the timer's syncs are skipped.
	os.WriteFile(lockPath, []byte(fmt.Sprintf("%d\nreview edit 092d1437c453\n%s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))), 0o600)
	rep = e.doctor()
	c = drOne(t, rep, "workspace", "lock")
	drWant(t, c, doctor.CheckWarn, fmt.Sprintf("lock held by `handoff review edit 092d1437c453` (pid %d) since ", os.Getpid()))
	drWant(t, c, doctor.CheckWarn, "the timer's syncs are skipped (exit 75) until it is closed")
	if !strings.Contains(c.Hint, "quit that editor") {
		t.Errorf("editing lock hint %q", c.Hint)
	}

	dead := drDeadPid(t)
	os.WriteFile(lockPath, []byte(strconv.Itoa(dead)+"\n"), 0o600)
	rep = e.doctor()
	c = drOne(t, rep, "workspace", "lock")
	drWant(t, c, doctor.CheckWarn, fmt.Sprintf("pid %d named in it is not running", dead))
	if !strings.Contains(c.Hint, "fuser") {
		t.Errorf("stale lock hint %q", c.Hint)
	}
	if !rep.OK {
		t.Errorf("a held lock must not fail doctor: %+v", rep.Checks)
	}
}

// TestDoctorLedgerCorrupt: a ledger that fails integrity_check fails
// doctor with a hint to rebuild it.
func TestDoctorLedgerCorrupt(t *testing.T) {
	e := newDrEnv(t, "")
	for i := range 20 {
		e.Put(e.Inbox, fmt.Sprintf("d%02d.md", i), testenv.Doc("TOOLS.md", fmt.Sprintf("- item %d %s", i, strings.Repeat("x", 500))))
	}
	e.sync()
	p := filepath.Join(e.WS, ".handoff/ledger.db")
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the header page; scribble over the pages after it.
	if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 3*4096)), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep := e.doctor()
	c := drOne(t, rep, "workspace", "ledger")
	if c.Status != doctor.CheckFail || !strings.Contains(c.Hint, ".recover") {
		t.Errorf("corrupt ledger: %+v", c)
	}
	if rep.OK {
		t.Error("a corrupt ledger must fail doctor")
	}
}

// drDialer fails some hosts and blocks on others until their connect
// deadline; the rest are local.
func drDialer(fail, hang map[string]bool) setup.Dialer {
	return func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		switch {
		case fail[h.Name]:
			return nil, errors.New("ssh: dial tcp 192.0.2.1:22: connect: connection refused")
		case hang[h.Name]:
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return transport.NewLocal(), nil
	}
}

// TestDoctorHosts: an unreachable host fails with a hint, a silent one
// fails at the connect deadline, and neither stops the other hosts;
// checks come back in manifest order whatever order the hosts finish in.
func TestDoctorHosts(t *testing.T) {
	e := newDrEnv(t, `  - name: gone
    transport: ssh
    ssh: {host: gone.invalid}
    inboxes: [~/notes/.claude/memory-handoffs]
  - name: silent
    transport: ssh
    ssh: {host: silent.invalid}
    inboxes: [~/notes/.claude/memory-handoffs]
  - name: other
    transport: local
    inboxes: [/nonexistent/.claude/memory-handoffs]
`)
	start := time.Now()
	rep := e.doctor(func(o *doctor.Options) {
		o.Dial = drDialer(map[string]bool{"gone": true}, map[string]bool{"silent": true})
		o.ConnectTimeout = 300 * time.Millisecond
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("doctor took %v with a silent host and a 300ms connect deadline", d)
	}
	if rep.OK {
		t.Fatal("unreachable hosts must fail doctor")
	}
	c := drOne(t, rep, "host gone", "reachable")
	drWant(t, c, doctor.CheckFail, "unreachable: ssh: dial tcp 192.0.2.1:22: connect: connection refused")
	if !strings.Contains(c.Hint, "ssh gone.invalid") || !strings.Contains(c.Hint, "handoff hosts trust gone") {
		t.Errorf("unreachable hint %q", c.Hint)
	}
	c = drOne(t, rep, "host silent", "reachable")
	drWant(t, c, doctor.CheckFail, "unreachable")
	if !strings.Contains(c.Hint, "no answer within 300ms") {
		t.Errorf("silent host hint %q", c.Hint)
	}
	drWant(t, drOne(t, rep, "host canonical", "reachable"), doctor.CheckOK, "reachable (local)")
	c = drOne(t, rep, "host other", "inbox")
	drWant(t, c, doctor.CheckWarn, "/nonexistent/.claude/memory-handoffs: missing")
	if !strings.Contains(c.Hint, "mkdir -p /nonexistent/.claude/memory-handoffs") {
		t.Errorf("missing inbox hint %q", c.Hint)
	}
	var order []string
	for _, c := range rep.Checks {
		if s, ok := strings.CutPrefix(c.Scope, "host "); ok && (len(order) == 0 || order[len(order)-1] != s) {
			order = append(order, s)
		}
	}
	if strings.Join(order, ",") != "canonical,gone,silent,other" {
		t.Errorf("host order %v, want manifest order", order)
	}
}

// TestDoctorInboxStates: a symlinked inbox and one whose git index cannot
// be read warn with hints; an opted-out one is fine.
func TestDoctorInboxStates(t *testing.T) {
	e := newDrEnv(t, "")
	real := filepath.Join(e.Dir, "elsewhere")
	os.MkdirAll(real, 0o755)
	os.MkdirAll(filepath.Join(e.Dir, "repos/linked/.claude"), 0o755)
	if err := os.Symlink(real, filepath.Join(e.Dir, "repos/linked/.claude/memory-handoffs")); err != nil {
		t.Fatal(err)
	}
	// lib: a repository whose index is garbage, with a candidate.
	os.MkdirAll(filepath.Join(e.Dir, "repos/lib/.git"), 0o755)
	os.WriteFile(filepath.Join(e.Dir, "repos/lib/.git/index"), []byte("DIRC garbage, not an index"), 0o644)
	e.Put(e.Inbox2, "x.md", testenv.Doc("TOOLS.md", "- x"))
	// opted: opted out.
	opted := filepath.Join(e.Dir, "repos/opted/.grok/memory-handoffs")
	os.MkdirAll(opted, 0o755)
	os.WriteFile(filepath.Join(opted, ".no-memory-handoffs"), nil, 0o644)

	rep := e.doctor()
	byPath := map[string]doctor.Check{}
	for _, c := range drFind(rep, "host canonical", "inbox") {
		byPath[c.Inbox.Path] = c
	}
	c := byPath[filepath.Join(e.Dir, "repos/linked/.claude/memory-handoffs")]
	drWant(t, c, doctor.CheckWarn, "is a symlink")
	c = byPath[e.Inbox2]
	drWant(t, c, doctor.CheckWarn, "git index unreadable")
	if !strings.Contains(c.Hint, "git status") {
		t.Errorf("git-unreadable hint %q", c.Hint)
	}
	drWant(t, byPath[e.Inbox], doctor.CheckOK, "0 pending")
	drWant(t, byPath[opted], doctor.CheckOK, "opted out")
	if !rep.OK {
		t.Errorf("inbox warnings must not fail doctor: %+v", rep.Checks)
	}
}

// TestDoctorReviewInbox: more than 20 drafts waiting warns.
func TestDoctorReviewInbox(t *testing.T) {
	e := newDrEnv(t, "")
	e.Put(e.Inbox, "doc.md", testenv.Doc("TOOLS.md", "- jq"))
	e.sync()
	dir := filepath.Join(e.WS, layout.ReviewDir)
	os.MkdirAll(dir, 0o755)
	for i := range doctor.ReviewInboxWarn {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("d%d.md", i)), []byte("x"), 0o644)
	}
	drWant(t, drOne(t, e.doctor(), "workspace", "review-inbox"), doctor.CheckOK, "20 draft(s) waiting")
	os.WriteFile(filepath.Join(dir, "one-more.md"), []byte("x"), 0o644)
	c := drOne(t, e.doctor(), "workspace", "review-inbox")
	drWant(t, c, doctor.CheckWarn, "21 draft(s) waiting")
}

// TestDoctorTimer asks a stand-in systemctl: active is ok, inactive and
// not installed warn; without a user bus doctor does not ask at all.
func TestDoctorTimer(t *testing.T) {
	e := newDrEnv(t, "")
	bin := filepath.Join(e.Dir, "bin")
	os.MkdirAll(bin, 0o755)
	script := `#!/bin/sh
[ "$1 $2 $4" = "--user show handoff-sync.timer" ] || { echo "unexpected: $*" >&2; exit 2; }
printf '%s\n' "$FAKE_SYSTEMD"
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	rt := filepath.Join(e.Dir, "run")
	os.MkdirAll(rt, 0o700)
	os.WriteFile(filepath.Join(rt, "bus"), nil, 0o600)
	t.Setenv("XDG_RUNTIME_DIR", rt)
	tests := []struct {
		props, status, msg, hint string
	}{
		{"LoadState=loaded\nActiveState=active", doctor.CheckOK, "handoff-sync.timer is active", ""},
		{"LoadState=loaded\nActiveState=inactive", doctor.CheckWarn, "installed but inactive", "systemctl --user enable --now handoff-sync.timer"},
		{"LoadState=not-found\nActiveState=inactive", doctor.CheckWarn, "not installed", "handoff timer install"},
	}
	for _, tt := range tests {
		t.Setenv("FAKE_SYSTEMD", tt.props)
		c := drOne(t, e.doctor(), "timer", "timer")
		drWant(t, c, tt.status, tt.msg)
		if !strings.Contains(c.Hint, tt.hint) {
			t.Errorf("%s: hint %q lacks %q", tt.props, c.Hint, tt.hint)
		}
	}
	os.Remove(filepath.Join(rt, "bus"))
	drWant(t, drOne(t, e.doctor(), "timer", "timer"), doctor.CheckWarn, "systemd user session not available")
}

// followFS is the local file system as a server whose LSTAT follows
// symlinks (ProFTPD's mod_sftp) sees it: LSTAT is stat(2) unless the link
// dangles; listings report each entry's own type.
type followFS struct{ transport.Local }

func (followFS) Lstat(ctx context.Context, name string) (transport.FileInfo, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return transport.Local{}.Lstat(ctx, name)
	}
	return transport.FileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}, nil
}

func (followFS) RealPath(ctx context.Context, name string) (string, error) {
	return filepath.EvalSymlinks(name)
}

// TestDoctorFollowsSymlinks: doctor names a server whose LSTAT follows
// symlinks, from a symlinked handoff and a symlinked processed/ whose
// listing and LSTAT disagree, and counts nothing through the link; on the
// same tree served honestly it says nothing of the kind.
func TestDoctorFollowsSymlinks(t *testing.T) {
	e := newDrEnv(t, "")
	elsewhere := filepath.Join(e.Dir, "elsewhere")
	os.MkdirAll(elsewhere, 0o755)
	os.WriteFile(filepath.Join(elsewhere, "a.x.0123456789ab.md"), []byte("x"), 0o644)
	if err := os.Symlink(elsewhere, filepath.Join(e.Inbox, "processed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.Dir, "outside.txt"), filepath.Join(e.Inbox2, "y.md")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.Dir, "outside.txt"), []byte("mine"), 0o644)
	before := testenv.Tree(t, e.Dir)

	rep := e.doctor(func(o *doctor.Options) {
		o.Dial = func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) { return followFS{}, nil }
	})
	drWant(t, drOne(t, rep, "host canonical", "sftp-server"), doctor.CheckWarn, "follows symlinks")
	for _, c := range drFind(rep, "host canonical", "inbox") {
		if c.Inbox.Path == e.Inbox {
			drWant(t, c, doctor.CheckWarn, "cannot list processed/")
			if c.Inbox.Processed != 0 {
				t.Errorf("counted %d processed through a symlinked processed/", c.Inbox.Processed)
			}
		}
	}
	testenv.SameTree(t, "the host after doctor", before, testenv.Tree(t, e.Dir))

	rep = e.doctor()
	if cs := drFind(rep, "host canonical", "sftp-server"); len(cs) != 0 {
		t.Errorf("an honest server reported as following symlinks: %+v", cs)
	}
}

// TestDoctorWaitingAndStale: a handoff older than 3 days in an inbox warns;
// a reachable host whose last handoff is older than stale_after warns with
// the closeout hint, one within it is ok, stale_after 0 is not checked; an
// unreachable host says how long its handoffs may have waited.
func TestDoctorWaitingAndStale(t *testing.T) {
	e := newDrEnv(t, `    stale_after: 5d
  - name: off
    transport: local
    stale_after: 0
    inboxes: [~/off/.claude/memory-handoffs]
  - name: away
    transport: ssh
    ssh: {host: away.invalid}
    inboxes: [~/notes/.claude/memory-handoffs]
`)
	e.Put(e.Inbox, "a.md", testenv.Doc("TOOLS.md", "- a"))
	e.sync()
	// The ledger says away sent a handoff at the same time.
	e.ledgerExec(t, `INSERT INTO sources (sha256, sha_id, size, host, inbox, name, stored_at, stored_run, result)
		SELECT sha256, sha_id, size, 'away', inbox, name, stored_at, stored_run, result FROM sources`)
	e.Put(e.Inbox2, "waits.md", testenv.Doc("TOOLS.md", "- b"))

	at := func(d time.Duration) *doctor.Report {
		return e.doctor(func(o *doctor.Options) {
			o.Now = func() time.Time { return time.Now().Add(d) }
			o.Every = 30 * 24 * time.Hour
			o.Dial = drDialer(map[string]bool{"away": true}, nil)
		})
	}
	rep := at(0)
	drWant(t, drOne(t, rep, "host canonical", "activity"), doctor.CheckOK, "last handoff ")
	if len(drFind(rep, "host off", "activity")) != 0 {
		t.Error("stale_after 0 checked")
	}
	drWant(t, drOne(t, rep, "host away", "reachable"), doctor.CheckFail, "unreachable")
	if c := drOne(t, rep, "host away", "reachable"); strings.Contains(c.Message, "waited") {
		t.Errorf("a fresh host's failure says handoffs waited: %s", c.Message)
	}

	rep = at(6 * 24 * time.Hour)
	c := drOne(t, rep, "host canonical", "activity")
	drWant(t, c, doctor.CheckWarn, "no handoff from this host for 6d0h (stale_after 5d)")
	if !strings.Contains(c.Hint, "`handoff instructions --host canonical`") {
		t.Errorf("stale hint %q", c.Hint)
	}
	waiting := 0
	for _, c := range drFind(rep, "host canonical", "inbox") {
		if strings.Contains(c.Message, "1 handoff(s) waiting more than 3d") {
			waiting++
			drWant(t, c, doctor.CheckWarn, "waiting")
		}
	}
	if waiting != 1 {
		t.Errorf("%d inboxes warn of a waiting handoff, want 1: %+v", waiting, rep.Checks)
	}
	drWant(t, drOne(t, rep, "host away", "reachable"), doctor.CheckFail, "its last handoff arrived 6d0h ago")
}

// TestDoctorHostsAtOnce: with no Parallel set, doctor checks as many hosts
// at once as sync pulls at once (fanout.HostsAtOnce), not a fixed 8.
// Invariant: a fleet's doctor does not wait in waves that its sync does
// not, so a host that is down holds up no more than it does in a sync.
func TestDoctorHostsAtOnce(t *testing.T) {
	const n = 12 // more than fanout.MinHosts, so the old fixed 8 shows
	m := testenv.DownFleet(t, filepath.Join(t.TempDir(), "ws"), t.TempDir(), n)
	t.Setenv("XDG_RUNTIME_DIR", "") // no systemd: the timer check asks nobody
	synctest.Test(t, func(t *testing.T) {
		dial := testenv.NewHeldDial()
		before := fanout.Available()
		done := make(chan *doctor.Report)
		go func() { done <- doctor.Run(context.Background(), doctor.Options{Manifest: m, Dial: dial.Dial}) }()
		synctest.Wait() // every check that can start is held in its dial
		got := dial.Dialing.Load()
		close(dial.Release)
		rep := <-done
		after := fanout.Available()
		lo, hi := fanout.HostsAtOnce(n, min(before, after)), fanout.HostsAtOnce(n, max(before, after))
		if got < int64(lo) || got > int64(hi) {
			t.Errorf("%d hosts checked at once, want fanout.HostsAtOnce(%d) = %d..%d", got, n, lo, hi)
		}
		for i := range n {
			drWant(t, drOne(t, rep, fmt.Sprintf("host h%d", i), "reachable"), doctor.CheckFail, "unreachable: down")
		}
	})
}

// TestDoctorReach: doctor lists the inboxes under a discover root that
// no sync reaches (a repository one level deeper than max_depth, an
// inbox in a harness directory the host leaves out), with the handoffs
// waiting there and the fix; an inbox hidden by an opt-out marker is
// not listed. Invariant: a handoff that no sync will ever pull does not
// wait unseen on a host doctor can reach.
func TestDoctorReach(t *testing.T) {
	e := newDrEnv(t, "")
	e.M.Hosts[0].Harnesses = []string{".claude", ".codex"}
	deep := filepath.Join(e.Dir, "repos/a/b/deep/.claude/memory-handoffs")
	grok := filepath.Join(e.Dir, "repos/tool/.grok/memory-handoffs")
	hidden := filepath.Join(e.Dir, "repos/q/r/s/.claude/memory-handoffs")
	for _, d := range []string{deep, grok, hidden} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.Put(deep, "x.md", testenv.Doc("TOOLS.md", "- x"))
	os.WriteFile(filepath.Join(e.Dir, "repos/q/.no-memory-handoffs"), nil, 0o644)

	rep := e.doctor()
	c := drOne(t, rep, "host canonical", "reach")
	drWant(t, c, doctor.CheckWarn, "2 inbox(es) under this host's discover roots that no sync reaches")
	for _, want := range []string{deep + ": it is 3 directory levels below the discover root", "(1 handoff(s) wait there)",
		grok + ": its inbox is in .grok, and this host's harnesses (.claude, .codex) leave that directory out"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("reach check lacks %q:\n%s", want, c.Message)
		}
	}
	if strings.Contains(c.Message, hidden) {
		t.Errorf("an opted-out inbox is listed: %s", c.Message)
	}
	if !strings.Contains(c.Hint, "max_depth") && !strings.Contains(c.Hint, "harnesses") {
		t.Errorf("reach hint %q", c.Hint)
	}
	if !rep.OK {
		t.Errorf("an unreached inbox must warn, not fail: %+v", c)
	}
	// Reached again once the manifest reaches them: no check.
	e.M.Hosts[0].Harnesses = nil
	e.M.Hosts[0].Discover[0].MaxDepth = ptrInt(3)
	if cs := drFind(e.doctor(), "host canonical", "reach"); len(cs) != 0 {
		t.Errorf("reach check with every inbox reached: %+v", cs)
	}
}

func ptrInt(n int) *int { return &n }
