package e2e

// Hostile-host tests: the built binary syncs a manifest with one healthy
// local host and one SSH host served by internal/testkit/hostile, whose
// SFTP server lies (names, sizes, file types, data, renames, malformed
// packets). Each case runs
// `handoff sync --manifest M --json -v --log-format json` (the terminal
// case runs it bare), with HOME, XDG_CONFIG_HOME and TMPDIR inside the
// case's temporary root and no ssh-agent, so the pull of the hostile host
// goes through the real SSH transport inside a worker process.
//
// Invariants every case asserts (SPEC.md "Isolation"):
//   - nothing is written outside the workspace: the temporary root, minus
//     the workspace and the healthy host's inbox (whose handoff is archived
//     as SPEC step 4 says), is byte for byte unchanged, and the hostile
//     host's files are virtual, so no other local file can change; inside
//     the workspace only the files a sync writes exist, and every stored
//     content is one of the handoffs the test offered, intact;
//   - memory is bounded: the peak RSS of the sync and its workers (wait4's
//     ru_maxrss, the largest over the processes; see hostileRunMeasured)
//     stays under hostileMaxRSS;
//   - the hostile host's deadline holds: timeout 5s, so the run ends within
//     5s + the 3s worker grace + slack;
//   - the healthy host is unaffected: its handoff is promoted and archived,
//     and the run's outcome and exit code match the hostile host's fate
//     (ok → 0, error → partial and 1);
//   - the receipt says what happened to the hostile host (per case);
//   - output escapes hostile bytes: stdout, stderr and latest.log hold
//     valid UTF-8 and no control or format characters but newline and tab.
//
// A case whose invariant the product breaks today names the bug in `bug`
// and is skipped unless HANDOFF_KNOWN_BUGS is set.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/testkit/hostile"
	"github.com/handoff-sync/handoff/receipts"
)

const (
	hostileHome    = "/srv/hostile"
	hostileInbox   = hostileHome + "/repo/.claude/memory-handoffs"
	hostileTimeout = 5 * time.Second
	hostileGrace   = 3 * time.Second
	hostileSlack   = 2 * time.Second
	hostileMaxRSS  = 200 << 20 // bytes
	hostileMaxFile = 1 << 20   // the manifest default
	hostileBugsEnv = "HANDOFF_KNOWN_BUGS"
)

// hostileCase is one lying server. Exactly one of vfs and raw is set.
type hostileCase struct {
	name  string
	bug   string // a known product bug this case exposes: skipped unless HANDOFF_KNOWN_BUGS is set
	human bool   // run without --json and -v: check what a terminal shows
	inbox string // the hostile host's declared inbox; hostileInbox when empty
	root  string // a discovery root (max_depth 2) in place of the inbox
	vfs   func(x *hostileX)
	raw   func(x *hostileX)
	// host is the hostile host's expected outcome: "ok", "partial" (files
	// stored but not archived: their inbox is in state error) or "error".
	host string
	// unlisted: an inbox of the host could not be listed (state error),
	// which makes the run partial though the host itself is ok.
	unlisted bool
	errHas   []string // substrings of the hostile host's error
	check    func(t *testing.T, x *hostileX)
	// timeout is the hostile host's deadline; hostileTimeout when zero.
	// Cases that push a lot of data (floods, huge listings) get more, so
	// that a loaded 2-core machine does not end them at the deadline
	// before the bound they test is reached.
	timeout time.Duration
}

func (tc *hostileCase) deadline() time.Duration {
	if tc.timeout > 0 {
		return tc.timeout
	}
	return hostileTimeout
}

// hostileX is one case's hostile side and, after the run, what came of it.
type hostileX struct {
	t     *testing.T
	tc    *hostileCase
	vfs   *hostile.VFS
	raw   *hostile.Raw
	goods map[string]string // handoffs the hostile host offers honestly: name → content

	// After the run.
	ws       string
	run      hostileRun
	rc       *receipts.Receipt
	host     receipts.Host
	handoffs map[string]receipts.Handoff // the hostile host's, by name
}

// good offers an honest handoff on the hostile host. It returns its bytes.
func (x *hostileX) good(name string) string {
	content := docHandoff("rules/hostile.md", "- "+x.marker(name))
	x.goods[name] = content
	p := path.Join(hostileInbox, name)
	if x.vfs != nil {
		x.vfs.Add(p, hostile.File(content))
	} else {
		x.raw.Files[p] = content
	}
	return content
}

func (x *hostileX) marker(name string) string {
	return "marker-" + x.tc.name + "-" + regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(name, "_")
}

// inboxNode is the hostile inbox directory of a VFS case.
func (x *hostileX) inboxNode() *hostile.Node { return x.vfs.Node(hostileInbox) }

// file adds a regular-looking file to the hostile inbox.
func (x *hostileX) file(name, data string) *hostile.Node {
	return x.vfs.Add(path.Join(hostileInbox, name), hostile.File(data))
}

// routed asserts that an honest hostile handoff was stored, routed once and
// archived where SPEC step 4 says.
func (x *hostileX) routed(name string) {
	t := x.t
	t.Helper()
	content := x.goods[name]
	h, ok := x.handoffs[name]
	if !ok {
		t.Errorf("receipt has no entry for the hostile host's %s; entries: %s", name, x.entries())
		return
	}
	if h.Result != "routed" || h.SHA256 != sum(content) || h.Size != int64(len(content)) || h.ArchivedAs != processedName(name, content) {
		t.Errorf("%s: %+v, want routed, sha256 %s, archived as %s", name, h, sum(content), processedName(name, content))
	}
	if c := countIn(t, filepath.Join(x.ws, "rules/hostile.md"), x.marker(name)+"\n"); c != 1 {
		t.Errorf("%s: rules/hostile.md holds its marker %d times, want 1", name, c)
	}
}

// archived asserts that the hostile host now holds name under its archive
// name only, with the same bytes.
func (x *hostileX) archived(name string) {
	t := x.t
	t.Helper()
	content := x.goods[name]
	src, dst := path.Join(hostileInbox, name), path.Join(hostileInbox, processedName(name, content))
	if x.vfs != nil {
		if x.vfs.Node(src) != nil {
			t.Errorf("%s is still in the hostile inbox", name)
		}
		if n := x.vfs.Node(dst); n == nil || string(n.Data) != content {
			t.Errorf("%s was not archived as %s", name, dst)
		}
		return
	}
	files := x.raw.Snapshot()
	if _, ok := files[src]; ok {
		t.Errorf("%s is still in the hostile inbox", name)
	}
	if files[dst] != content {
		t.Errorf("%s was not archived as %s", name, dst)
	}
}

// item asserts a receipt entry for a file the pull did not store.
func (x *hostileX) item(name, result, reason, archivedAs string) {
	t := x.t
	t.Helper()
	h, ok := x.handoffs[name]
	if !ok {
		t.Errorf("receipt has no entry for the hostile host's %s; entries: %s", name, x.entries())
		return
	}
	if h.Result != result || h.Reason != reason || h.ArchivedAs != archivedAs || h.SHA256 != "" {
		t.Errorf("%s: %+v, want %s/%s archived as %q and no hash", name, h, result, reason, archivedAs)
	}
}

// inbox is the receipt's entry for the hostile host's only inbox.
func (x *hostileX) inbox() receipts.Inbox {
	x.t.Helper()
	if len(x.host.Inboxes) != 1 {
		x.t.Fatalf("hostile host lists %d inboxes, want 1: %+v", len(x.host.Inboxes), x.host)
	}
	return x.host.Inboxes[0]
}

func (x *hostileX) entries() string {
	var out []string
	for _, h := range x.handoffs {
		out = append(out, fmt.Sprintf("%q:%s/%s", h.Name, h.Result, h.Reason))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// untouched asserts the client never asked the VFS about these inbox names.
func (x *hostileX) untouched(names ...string) {
	x.t.Helper()
	for _, n := range names {
		if p := path.Join(hostileInbox, n); x.vfs.Touched(p) {
			x.t.Errorf("the client asked about %q, a name it must ignore", p)
		}
	}
}

// hostileRun is one finished sync with its resource use.
type hostileRun struct {
	sshRun
	maxRSS int64 // bytes: the largest RSS of the sync and its reaped workers

	// Sampled every 10ms from /proc (VmHWM), so a worker's last moments may
	// be missed: the parent's peak and the largest worker peak seen.
	parentHWM, workerHWM int64
}

// hostilePollHWM samples the VmHWM of pid's descendants until stop is closed: it
// returns the largest among its children (the sync) and among their
// children (the workers), in bytes.
func hostilePollHWM(pid int, stop <-chan struct{}) [2]int64 {
	var out [2]int64
	hwm := func(pid string) int64 {
		b, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
				return kb << 10
			}
		}
		return 0
	}
	children := func(pid string) []string {
		var out []string
		// Children hang off whichever thread forked them.
		tasks, _ := filepath.Glob("/proc/" + pid + "/task/*/children")
		for _, f := range tasks {
			if b, err := os.ReadFile(f); err == nil {
				out = append(out, strings.Fields(string(b))...)
			}
		}
		return out
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, s := range children(fmt.Sprint(pid)) {
			out[0] = max(out[0], hwm(s))
			for _, w := range children(s) {
				out[1] = max(out[1], hwm(w))
			}
		}
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
	}
}

// hostileFigures collects each case's wall time and peak RSS for the
// summary the parent test logs (docs/RELIABILITY.md takes them).
var hostileFigures struct {
	sync.Mutex
	rows []string
}

func TestHostile(t *testing.T) {
	t.Cleanup(func() {
		hostileFigures.Lock()
		defer hostileFigures.Unlock()
		sort.Strings(hostileFigures.rows)
		t.Logf("hostile-host figures (bound %d MiB, deadline %v + %v grace):\n| case | wall | peak RSS MiB | sync MiB | worker MiB | exit | hostile host |\n|---|---|---|---|---|---|---|\n%s",
			hostileMaxRSS>>20, hostileTimeout, hostileGrace, strings.Join(hostileFigures.rows, "\n"))
	})
	for i := range hostileCases {
		tc := &hostileCases[i]
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.bug != "" && os.Getenv(hostileBugsEnv) == "" {
				t.Skipf("known bug (set %s=1 to run): %s", hostileBugsEnv, tc.bug)
			}
			runHostileCase(t, tc)
		})
	}
}

func runHostileCase(t *testing.T, tc *hostileCase) {
	root := t.TempDir()
	home, tmp := filepath.Join(root, "home"), filepath.Join(root, "tmp")
	ws := filepath.Join(root, "ws")
	manifestPath := filepath.Join(root, "writers.yaml")
	localInbox := filepath.Join(root, "local/notes/.claude/memory-handoffs")
	mustMkdir(t, home)
	mustMkdir(t, tmp)
	healthy := cardHandoff("create-card", "healthy-"+tc.name+".md", "the healthy host's handoff")
	mustWrite(t, filepath.Join(localInbox, "healthy.md"), healthy)

	x := &hostileX{t: t, tc: tc, goods: map[string]string{}}
	var engine hostile.Engine
	if tc.vfs != nil {
		x.vfs = hostile.NewVFS(hostileHome)
		x.vfs.Add(hostileInbox, hostile.Dir())
		tc.vfs(x)
		engine = x.vfs
	} else {
		x.raw = &hostile.Raw{Home: hostileHome, Files: map[string]string{}}
		tc.raw(x)
		engine = x.raw
	}
	srv := hostile.Start(t, filepath.Join(root, "keys"), engine)
	inbox := tc.inbox
	if inbox == "" {
		inbox = hostileInbox
	}
	sshYAML := fmt.Sprintf("{host: %s, port: %d, user: %s, identity_file: %s, known_hosts: %s}",
		srv.Host, srv.Port, srv.User, srv.IdentityFile, srv.KnownHosts)
	var inboxes, roots []string
	if tc.root != "" {
		roots = []string{tc.root}
	} else {
		inboxes = []string{inbox}
	}
	writeManifest(t, manifestPath, ws,
		hostYAML("local", "", []string{localInbox}, nil),
		hostYAML("hostile", sshYAML, inboxes, roots, "timeout: "+tc.deadline().String()))

	outside := func() map[string]string {
		m := hashTree(t, root)
		for k := range m {
			if k == "ws" || strings.HasPrefix(k, "ws/") || strings.HasPrefix(filepath.Join(root, k), localInbox) {
				delete(m, k)
			}
		}
		return m
	}
	before := outside()

	args := []string{"sync", "--manifest", manifestPath}
	if !tc.human {
		args = append(args, "--json", "-v", "--log-format", "json")
	}
	x.run = hostileRunMeasured(t, childEnv(home, "SSH_AUTH_SOCK=", "TMPDIR="+tmp), args...)
	r := x.run
	t.Logf("%s: exit %d, wall %v, peak RSS %.1f MiB (sampled: sync %.1f MiB, largest worker %.1f MiB)", tc.name, r.code,
		r.elapsed.Round(time.Millisecond), hostileMiB(r.maxRSS), hostileMiB(r.parentHWM), hostileMiB(r.workerHWM))

	// The receipt: printed with --json, else the one written.
	if tc.human {
		x.rc = latestReceipt(t, ws)
	} else {
		x.rc = decodeReceipt(t, r.sshRun)
	}
	x.ws = ws
	x.host = receiptHost(t, x.rc, "hostile")
	x.handoffs = map[string]receipts.Handoff{}
	for _, h := range x.rc.Handoffs {
		if h.Host != "hostile" {
			continue
		}
		if _, dup := x.handoffs[h.Name]; dup {
			t.Errorf("receipt lists the hostile host's %q twice", h.Name)
		}
		x.handoffs[h.Name] = h
	}
	for _, in := range x.host.Inboxes {
		t.Logf("hostile inbox %s: state %q pending %d error %q ignored %d", in.Path, in.State, in.Pending, in.Error, len(in.Ignored))
	}
	t.Logf("hostile host: outcome %q error %q; entries: %s", x.host.Outcome, x.host.Error, x.entries())
	hostileFigures.Lock()
	hostileFigures.rows = append(hostileFigures.rows, fmt.Sprintf("| %s | %v | %.1f | %.1f | %.1f | %d | %s %s |", tc.name,
		r.elapsed.Round(10*time.Millisecond), hostileMiB(r.maxRSS), hostileMiB(r.parentHWM), hostileMiB(r.workerHWM), r.code, x.host.Outcome, hostileOneLine(x.host.Error, 90)))
	hostileFigures.Unlock()

	// The deadline holds, memory is bounded.
	if limit := tc.deadline() + hostileGrace + hostileSlack; r.elapsed > limit {
		t.Errorf("sync took %v, over the host deadline %v + worker grace %v + slack", r.elapsed, tc.deadline(), hostileGrace)
	}
	if r.maxRSS > hostileMaxRSS {
		t.Errorf("peak RSS %.1f MiB, over the %d MiB bound (sampled: sync %.1f MiB, largest worker %.1f MiB)",
			hostileMiB(r.maxRSS), hostileMaxRSS>>20, hostileMiB(r.parentHWM), hostileMiB(r.workerHWM))
	}

	// The hostile host's fate, and the run's outcome and exit code with it.
	wantCode, wantOutcome := 0, receipts.OutcomeOK
	if tc.host != "ok" || tc.unlisted {
		wantCode, wantOutcome = 1, receipts.OutcomePartial
	}
	if x.host.Outcome != tc.host {
		t.Errorf("hostile host: outcome %q (error %q), want %q", x.host.Outcome, x.host.Error, tc.host)
	}
	if tc.host == "partial" && x.inbox().State != receipts.InboxError {
		t.Errorf("hostile host partial, yet its inbox is in state %q, not %q", x.inbox().State, receipts.InboxError)
	}
	if strings.Contains(x.host.Error, "worker crashed") {
		t.Errorf("hostile host crashed its worker: %s\nstderr:\n%s", x.host.Error, hostileTail(r.stderr, 3000))
	}
	for _, s := range tc.errHas {
		if !strings.Contains(x.host.Error, s) {
			t.Errorf("hostile host's error %q lacks %q", x.host.Error, s)
		}
	}
	if r.code != wantCode || x.rc.Outcome != wantOutcome {
		t.Errorf("exit %d outcome %q, want %d and %q", r.code, x.rc.Outcome, wantCode, wantOutcome)
	}

	// The healthy host is unaffected.
	if h := receiptHost(t, x.rc, "local"); h.Outcome != "ok" {
		t.Errorf("healthy host: outcome %q error %q", h.Outcome, h.Error)
	}
	var got *receipts.Handoff
	for i, h := range x.rc.Handoffs {
		if h.Host == "local" {
			if got != nil {
				t.Errorf("healthy host has several receipt entries")
			}
			got = &x.rc.Handoffs[i]
		}
	}
	if got == nil || got.Name != "healthy.md" || got.Result != "promoted" || got.ArchivedAs != processedName("healthy.md", healthy) {
		t.Errorf("healthy handoff: %+v, want promoted and archived as %s", got, processedName("healthy.md", healthy))
	}
	if b, err := os.ReadFile(filepath.Join(localInbox, processedName("healthy.md", healthy))); err != nil || string(b) != healthy {
		t.Errorf("healthy handoff not archived on its host: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(localInbox, "healthy.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("healthy handoff still in its inbox (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory/cards/healthy-"+tc.name+".md")); err != nil {
		t.Errorf("healthy card not promoted: %v", err)
	}

	// Nothing written outside the workspace; inside it, only a sync's files.
	assertTreeUnchanged(t, "the test's root outside the workspace", before, outside())
	allowed := map[string]bool{sum(healthy): true}
	for _, c := range x.goods {
		allowed[sum(c)] = true
	}
	hostileCheckWorkspace(t, ws, tc.name, allowed)

	// Output escapes hostile bytes.
	hostileCheckEscaped(t, "stdout", []byte(r.stdout))
	hostileCheckEscaped(t, "stderr", []byte(r.stderr))
	if b, err := os.ReadFile(filepath.Join(ws, ".handoff/receipts/latest.log")); err == nil {
		hostileCheckEscaped(t, "latest.log", b)
	} else {
		t.Errorf("no latest.log: %v", err)
	}

	if tc.check != nil {
		tc.check(t, x)
	}
}

// hostileRunMeasured runs the binary and reports its wall time and the peak RSS of
// it and its workers. The peak comes from wait4's rusage, which covers a
// process and every descendant it reaped (ru_maxrss is the largest of
// them; the sync reaps its workers, killed ones included). The binary is
// started through a launcher, a fresh copy of this test binary, because a
// child's ru_maxrss starts at its parent's RSS when it execs (the child
// borrows the parent's memory until then), and this test process grows
// large serving hostile listings. /proc is sampled as well, for the sync's
// and the largest worker's own peaks.
func hostileRunMeasured(t *testing.T, env []string, args ...string) hostileRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command(self, append([]string{binary()}, args...)...)
	cmd.Env = append(env, hostileLauncherEnv+"=1")
	cmd.ExtraFiles = []*os.File{pw}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("run handoff: %v", err)
	}
	pw.Close()
	stop := make(chan struct{})
	polled := make(chan [2]int64, 1)
	go func() { polled <- hostilePollHWM(cmd.Process.Pid, stop) }()
	err = cmd.Wait()
	close(stop)
	hwm := <-polled
	r := hostileRun{sshRun: sshRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}, parentHWM: hwm[0], workerHWM: hwm[1]}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run handoff: %v", err)
	}
	report, _ := io.ReadAll(pr)
	var code int
	if _, err := fmt.Sscanf(string(report), "%d %d", &r.maxRSS, &code); err != nil {
		t.Fatalf("launcher: no report (%q): %s", report, r.sshRun)
	}
	r.code = code
	return r
}

// hostileLauncherEnv turns this test binary into the launcher hostileRunMeasured uses:
// it runs os.Args[1:], then writes "<maxrss bytes> <exit code>" to fd 3
// (-9 for a child killed by a signal) and exits with the child's code.
const hostileLauncherEnv = "HANDOFF_HOSTILE_LAUNCHER"

func init() {
	if os.Getenv(hostileLauncherEnv) == "" {
		return
	}
	report := os.NewFile(3, "report")
	syscall.CloseOnExec(3)
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, hostileLauncherEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode() // -1 when killed by a signal
		if code == -1 {
			code = -9
		}
	default:
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(125)
	}
	var maxRSS int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	fmt.Fprintf(report, "%d %d\n", maxRSS, code)
	report.Close()
	os.Exit(max(code, 0))
}

// hostileCheckWorkspace asserts that the workspace holds only what init and
// a sync write (no spool directory: a sync stores in the ledger), and that
// every stored content is intact and one of the offered handoffs.
func hostileCheckWorkspace(t *testing.T, ws, caseName string, allowed map[string]bool) {
	t.Helper()
	for sha, b := range stored(t, ws) {
		if !allowed[sha] {
			t.Errorf("the store holds bytes the test never offered (sha256 %s): %q", sha, hostileOneLine(string(b), 120))
		}
	}
	fixed := map[string]bool{
		".": true, ".handoff": true, ".handoff/backups": true, ".handoff/receipts": true,
		".handoff/lock": true, ".handoff/workspace.json": true, ".handoff/ledger.db": true, ".handoff/ledger.db-wal": true, ".handoff/ledger.db-shm": true,
		".handoff/walks": true, ".handoff/walks/hostile.json": true, ".handoff/walks/local.json": true, ".handoff/backups-retained": true,
		"memory": true, "memory/cards": true, ".handoff/review": true, "rules": true, ".learnings": true,
		// The card index in MEMORY.md, and handoff's note of it.
		"MEMORY.md": true, ".handoff/openclaw.json": true,
		"memory/cards/healthy-" + caseName + ".md": true, "rules/hostile.md": true,
	}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		switch {
		case strings.HasPrefix(rel, ".handoff/walks/") && fixed[rel]:
			// What the walk asked, for the next run: it must read back
			// as a hint, however hostile the names it holds.
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := claim.ParseHint(b); err != nil {
				t.Errorf("%s does not read back as a walk hint: %v", rel, err)
			}
		case fixed[rel], strings.HasPrefix(rel, ".handoff/receipts/"), strings.HasPrefix(rel, ".handoff/backups/"):
		default:
			t.Errorf("unexpected path in the workspace: %q", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hostileCheckEscaped asserts b is valid UTF-8 without control or format
// characters other than newline and tab: what reaches a terminal or a log
// cannot carry an escape sequence or hide text.
func hostileCheckEscaped(t *testing.T, what string, b []byte) {
	t.Helper()
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			i += size
		}
		t.Errorf("%s is not valid UTF-8 (at byte %d: %q)", what, i, hostileAround(b, i))
		return
	}
	for i, r := range string(b) {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			t.Errorf("%s holds a raw %U at byte %d: %q", what, r, i, hostileAround(b, i))
			return
		}
	}
}

func hostileAround(b []byte, i int) string {
	lo, hi := max(0, i-80), min(len(b), i+40)
	return string(b[lo:hi])
}

func hostileMiB(b int64) float64 { return float64(b) / (1 << 20) }

func hostileOneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

func hostileTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// ---------------------------------------------------------------------------
// The cases.

// hostileReportedNames are names no real directory holds, or that are not plain
// *.md names: each must be ignored, never opened, and reported (quoted).
var hostileReportedNames = []string{
	"",                                // empty
	"nul\x00.md",                      // NUL
	"new\nline.md",                    // newline
	"esc\x1b[2J\x1b[H.md",             // clear screen
	"osc\x1b]0;pwned\x07.md",          // set the terminal title
	"bad\xff\xfeutf8.md",              // invalid UTF-8
	strings.Repeat("L", 4093) + ".md", // 4 KiB
	"bidi\u202egnp.md",                // right-to-left override
	"zero\u200bwidth.md",              // zero-width space
}

// hostileSlashNames hold a "/": the server lists them in one directory, so they
// are not file names at all.
var hostileSlashNames = []string{"/", "a/b", "x/..", "sub/evil.md", "../../escape.md"}

// hostileQuietNames are not handoffs but harmless: ignored without a report.
var hostileQuietNames = []string{"notes.txt", "README", ".hidden.md", "..md."}

// hostileZGood is an honest handoff listed after the hostile file (names are
// claimed in order), so it shows whether the pull went on.
const hostileZGood = "z-good.md"

// hostileLieFstat makes a node's open handle report size and mode.
func hostileLieFstat(n *hostile.Node, size int64, mode fs.FileMode) *hostile.Node {
	n.Fstat = func(int64) (int64, fs.FileMode) { return size, mode }
	return n
}

// hostileRejectedUnread asserts a file was rejected as not-regular, never read,
// and moved unread into malformed/ under its own name.
// hostileReadFailed checks that name was deferred as read-failed with the
// host's error, nothing of it stored, and the honest handoff beside it
// pulled.
func hostileReadFailed(name string) func(t *testing.T, x *hostileX) {
	return func(t *testing.T, x *hostileX) {
		x.item(name, "deferred", "read-failed", "")
		if h := x.handoffs[name]; h.Error == "" {
			t.Errorf("%s: deferred without the host's error", name)
		}
		if _, ok := x.raw.Snapshot()[hostileInbox+"/"+name]; !ok {
			t.Errorf("%s left its inbox", name)
		}
		x.routed(hostileZGood)
		x.archived(hostileZGood)
	}
}

func hostileRejectedUnread(name string) func(t *testing.T, x *hostileX) {
	return func(t *testing.T, x *hostileX) {
		x.item(name, "rejected", "not-regular", "malformed/"+name)
		n := x.vfs.Node(path.Join(hostileInbox, "malformed", name))
		if n == nil {
			t.Errorf("%s not moved into malformed/ on the host", name)
		} else if n.Reads() != 0 {
			t.Errorf("%s: %d READs served (%d bytes); its open handle is not a regular file, so it must not be read", name, n.Reads(), n.Served())
		}
		x.routed(hostileZGood)
		x.archived(hostileZGood)
	}
}

// hostileDeferredChanging asserts a file was deferred as changing and left in place.
func hostileDeferredChanging(name string, maxServed int64) func(t *testing.T, x *hostileX) {
	return func(t *testing.T, x *hostileX) {
		x.item(name, "deferred", "changing", "")
		n := x.vfs.Node(path.Join(hostileInbox, name))
		if n == nil {
			t.Errorf("%s was moved; a deferred file stays in its inbox", name)
		} else if n.Served() > maxServed {
			t.Errorf("%s: the server was made to send %d bytes, more than %d", name, n.Served(), maxServed)
		}
		x.routed(hostileZGood)
		x.archived(hostileZGood)
	}
}

// hostileReadBound is the most a read of a max_file_size file may pull: the
// limit, one byte, and the rest of one 32 KiB request.
const hostileReadBound = hostileMaxFile + 1 + 32<<10

var hostileCases = []hostileCase{
	{
		name: "names",
		vfs: func(x *hostileX) {
			x.good("A.md")
			x.good("a.md") // case twins: both legitimate
			d := x.inboxNode()
			for _, n := range append(append([]string{".", ".."}, hostileReportedNames...), hostileQuietNames...) {
				d.Extra = append(d.Extra, hostile.Entry(n, 0o600, 10))
			}
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			// The twins: both pulled, distinct, each archived.
			x.routed("A.md")
			x.routed("a.md")
			x.archived("A.md")
			x.archived("a.md")
			if x.handoffs["A.md"].SHA256 == x.handoffs["a.md"].SHA256 {
				t.Errorf("A.md and a.md have the same hash")
			}
			in := x.inbox()
			if in.State != "ok" || in.Pending != 2 {
				t.Errorf("inbox: %+v, want ok with 2 pending", in)
			}
			ignored := map[string]bool{}
			for _, q := range in.Ignored {
				ignored[q] = true
			}
			for _, n := range hostileReportedNames[1:] {
				if !ignored[claim.Quote(n)] {
					t.Errorf("ignored names %q lack %s", in.Ignored, claim.Quote(n))
				}
			}
			// pkg/sftp reports the empty name as "."; OpenSSH's own "." and
			// ".." are dropped quietly.
			if len(in.Ignored) != len(hostileReportedNames) {
				t.Errorf("%d ignored names %q, want %d", len(in.Ignored), in.Ignored, len(hostileReportedNames))
			}
			for _, n := range hostileQuietNames {
				if ignored[claim.Quote(n)] {
					t.Errorf("%q is reported; a name that merely is not *.md is ignored quietly", n)
				}
			}
			x.untouched(append(hostileReportedNames[1:], hostileQuietNames...)...)
			if len(x.handoffs) != 2 {
				t.Errorf("receipt entries %s, want only the twins", x.entries())
			}
		},
	},
	{
		name: "names-with-slash",
		vfs: func(x *hostileX) {
			x.good(hostileZGood)
			for _, n := range hostileSlashNames {
				x.inboxNode().Extra = append(x.inboxNode().Extra, hostile.Entry(n, 0o600, 10))
			}
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			in := x.inbox()
			ignored := map[string]bool{}
			for _, q := range in.Ignored {
				ignored[q] = true
			}
			for _, n := range hostileSlashNames {
				if !ignored[claim.Quote(n)] {
					t.Errorf("ignored names %q lack %s", in.Ignored, claim.Quote(n))
				}
			}
			x.untouched("evil.md", "escape.md", "b")
			x.routed(hostileZGood)
			x.archived(hostileZGood)
		},
	},
	{
		name: "duplicate-entries",
		vfs: func(x *hostileX) {
			// The real file lists itself; the listing repeats it twice more.
			fi := hostile.Entry("dup.md", 0o600, int64(len(x.good("dup.md"))))
			x.inboxNode().Extra = []os.FileInfo{fi, fi}
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			x.routed("dup.md")
			x.archived("dup.md")
			if x.rc.Counts.Pulled != 2 { // the healthy handoff and dup.md
				t.Errorf("pulled %d, want 2: a name listed thrice is one file", x.rc.Counts.Pulled)
			}
		},
	},
	{
		name: "fifo-handle",
		vfs: func(x *hostileX) {
			hostileLieFstat(x.file("fifo.md", "0123456789"), 10, fs.ModeNamedPipe|0o600)
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileRejectedUnread("fifo.md"),
	},
	{
		name: "dir-handle",
		vfs: func(x *hostileX) {
			hostileLieFstat(x.file("dir.md", "0123456789"), 10, fs.ModeDir|0o700)
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileRejectedUnread("dir.md"),
	},
	{
		// A symlink to /dev/zero swapped in after the listing: LSTAT says
		// a 10-byte file, the open handle is a character device.
		name: "devzero-chardev",
		vfs: func(x *hostileX) {
			n := hostileLieFstat(x.file("zero.md", "0123456789"), 0, fs.ModeDevice|fs.ModeCharDevice|0o666)
			n.Read = hostile.Endless(0)
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileRejectedUnread("zero.md"),
	},
	{
		// The same, but the handle claims to be a huge regular file.
		name: "devzero-hugesize",
		vfs: func(x *hostileX) {
			n := hostileLieFstat(x.file("zero.md", "0123456789"), 1<<40, 0o600)
			n.Read = hostile.Endless(0)
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileDeferredChanging("zero.md", hostileReadBound),
	},
	{
		name: "endless-data",
		vfs: func(x *hostileX) {
			x.file("endless.md", "0123456789").Read = hostile.Endless('x')
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileDeferredChanging("endless.md", hostileReadBound),
	},
	{
		// One byte every 250ms of a 1000-byte file: the read is within its
		// bounds all along, and only the host's deadline ends it.
		name: "trickle",
		vfs: func(x *hostileX) {
			x.file("trickle.md", strings.Repeat("0", 1000)).Read = func(ctx context.Context, p []byte, _ int64) (int, error) {
				select {
				case <-time.After(250 * time.Millisecond):
					p[0] = 'x'
					return 1, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			x.good(hostileZGood)
		},
		host:   "error",
		errHas: []string{"deadline of 5s exceeded"},
		check: func(t *testing.T, x *hostileX) {
			if x.run.elapsed < hostileTimeout {
				t.Errorf("sync ended after %v, before the host's deadline: what stopped the trickle?", x.run.elapsed)
			}
			if len(x.handoffs) != 0 {
				t.Errorf("receipt entries %s, want none from a host cut off mid-read", x.entries())
			}
			if x.vfs.Node(path.Join(hostileInbox, "trickle.md")) == nil || x.vfs.Node(path.Join(hostileInbox, hostileZGood)) == nil {
				t.Errorf("a file was moved on a host cut off mid-read")
			}
		},
	},
	{
		// The handle matches the Lstat, but the data runs past the size
		// (a writer appending) and the final FSTAT says so.
		name: "grows-during-read",
		vfs: func(x *hostileX) {
			n := x.file("grows.md", "0123456789abcdefghij")
			n.Size = 10
			n.Fstat = func(served int64) (int64, fs.FileMode) {
				if served > 0 {
					return 20, 0o600
				}
				return 10, 0o600
			}
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileDeferredChanging("grows.md", 20),
	},
	{
		name: "shrinks-during-read",
		vfs: func(x *hostileX) {
			n := x.file("shrinks.md", "01234")
			n.Size = 10
			n.Fstat = func(served int64) (int64, fs.FileMode) {
				if served > 0 {
					return 5, 0o600
				}
				return 10, 0o600
			}
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileDeferredChanging("shrinks.md", 10),
	},
	{
		// A writer appended between the listing and the open.
		name: "grew-before-open",
		vfs: func(x *hostileX) {
			n := hostileLieFstat(x.file("grew.md", "0123456789abcdefghij"), 20, 0o600)
			n.Size = 10
			x.good(hostileZGood)
		},
		host:  "ok",
		check: hostileDeferredChanging("grew.md", 20),
	},
	{
		// Every READ answers 7 bytes, whatever was asked.
		name: "short-reads",
		vfs: func(x *hostileX) {
			content := docHandoff("rules/hostile.md", "- "+x.marker("short.md")+"\n"+strings.Repeat("- filler line\n", 200))
			x.goods["short.md"] = content
			n := x.file("short.md", content)
			n.Read = func(_ context.Context, p []byte, off int64) (int, error) {
				if off >= int64(len(content)) {
					return 0, io.EOF
				}
				return copy(p[:min(len(p), 7)], content[off:]), nil
			}
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			x.routed("short.md")
			x.archived("short.md")
			// Stored exactly: one read to archive-verify aside, at least
			// len/7 short reads were needed.
			if n := x.vfs.Node(path.Join(hostileInbox, processedName("short.md", x.goods["short.md"]))); n.Reads() < int64(len(x.goods["short.md"])/7) {
				t.Errorf("only %d READs for %d bytes 7 at a time", n.Reads(), len(x.goods["short.md"]))
			}
		},
	},
	{
		name:    "million-entries",
		timeout: 30 * time.Second,
		vfs: func(x *hostileX) {
			var generated atomic.Int64
			x.inboxNode().List = func(dst []os.FileInfo, off int64) (int, error) {
				for i := range dst {
					idx := off + int64(i)
					if idx >= 1_000_000 {
						return i, io.EOF
					}
					dst[i] = hostile.Entry(fmt.Sprintf("f%07d.md", idx), 0o600, 10)
					generated.Store(idx + 1)
				}
				return len(dst), nil
			}
			hostileListed.Store(x.tc.name, &generated)
		},
		host:     "ok",
		unlisted: true,
		check: func(t *testing.T, x *hostileX) {
			in := x.inbox()
			if in.State != "error" || !strings.Contains(in.Error, "more than 100000 entries") {
				t.Errorf("inbox %+v, want state error saying more than 100000 entries", in)
			}
			g, _ := hostileListed.Load(x.tc.name)
			if n := g.(*atomic.Int64).Load(); n > 100_000+2+200 {
				t.Errorf("the client made the server list %d entries; the bound is 100000", n)
			} else {
				t.Logf("entries listed before the client stopped: %d", n)
			}
			for _, r := range x.vfs.Requests() {
				if strings.HasPrefix(r, "Open ") {
					t.Errorf("a file was opened from a listing that was cut off: %s", r)
				}
			}
		},
	},
	{
		// NAME replies of ~600 KiB (100 entries of 3 KiB names), over the
		// 256 KiB packet bound.
		name: "listing-over-packet-limit",
		vfs: func(x *hostileX) {
			x.good(hostileZGood)
			x.inboxNode().List = func(dst []os.FileInfo, off int64) (int, error) {
				for i := range dst {
					dst[i] = hostile.Entry(fmt.Sprintf("%0*d.md", 3000, off+int64(i)), 0o600, 10)
				}
				return len(dst), nil
			}
		},
		host:   "error",
		errHas: []string{"packet"},
		check: func(t *testing.T, x *hostileX) {
			if len(x.handoffs) != 0 {
				t.Errorf("receipt entries %s, want none", x.entries())
			}
		},
	},
	{
		// RENAME answers OK and renames nothing.
		name: "rename-lies",
		vfs: func(x *hostileX) {
			x.good("good.md")
			x.vfs.Rename = func(from, to string) (bool, error) {
				return strings.Contains(to, "/processed/"), nil
			}
		},
		host:   "partial",
		errHas: []string{"stored but not archived"},
		check: func(t *testing.T, x *hostileX) {
			x.routed("good.md") // stored before the rename: ingested once
			if x.vfs.Node(path.Join(hostileInbox, "good.md")) == nil {
				t.Errorf("good.md vanished from the host")
			}
			if x.vfs.Node(path.Join(hostileInbox, processedName("good.md", x.goods["good.md"]))) != nil {
				t.Errorf("an archive copy appeared though the rename did nothing")
			}
		},
	},
	{
		// processed/<stem>.<sha12>.md already there: once with the same
		// bytes (an earlier run got that far), once with other bytes.
		name: "processed-exists",
		vfs: func(x *hostileX) {
			same := x.good("same.md")
			diff := x.good("diff.md")
			x.vfs.Add(path.Join(hostileInbox, processedName("same.md", same)), hostile.File(same))
			x.vfs.Add(path.Join(hostileInbox, processedName("diff.md", diff)), hostile.File("planted by the host\n"))
		},
		host:   "partial",
		errHas: []string{"already holds different content"},
		check: func(t *testing.T, x *hostileX) {
			x.routed("same.md")
			x.archived("same.md")
			x.routed("diff.md") // stored and ingested; only the archive failed
			if n := x.vfs.Node(path.Join(hostileInbox, processedName("diff.md", x.goods["diff.md"]))); n == nil || string(n.Data) != "planted by the host\n" {
				t.Errorf("the planted archive file was replaced")
			}
			if x.vfs.Node(path.Join(hostileInbox, "diff.md")) == nil {
				t.Errorf("diff.md left its inbox though its archive name was taken")
			}
		},
	},
	{
		// A server whose LSTAT, RENAME and REMOVE follow symlinks (as
		// ProFTPD's mod_sftp does). Invariant: nothing outside the inbox
		// is read, renamed or removed; the symlinked entries are left in
		// place and the host is reported as following symlinks.
		name: "follows-symlinks",
		vfs: func(x *hostileX) {
			x.vfs.FollowSymlinks = true
			x.good("good.md")
			x.vfs.Add(hostileHome+"/outside.txt", hostile.File("the login's own file\n"))
			x.vfs.Add("/etc/passwd", hostile.File("root:x:0:0::/root:/bin/sh\n"))
			x.vfs.Add(path.Join(hostileInbox, "y.md"), hostile.Symlink(hostileHome+"/outside.txt"))
			x.vfs.Add(path.Join(hostileInbox, "x.md"), hostile.Symlink("/etc/passwd"))
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			x.routed("good.md")
			x.archived("good.md")
			for name, target := range map[string]string{"y.md": hostileHome + "/outside.txt", "x.md": "/etc/passwd"} {
				x.item(name, "rejected", "symlink", "")
				if h := x.handoffs[name]; !strings.Contains(h.Error, "follows symlinks") {
					t.Errorf("%s: error %q does not say the server follows symlinks", name, h.Error)
				}
				if n := x.vfs.Node(path.Join(hostileInbox, name)); n == nil || n.Target != target {
					t.Errorf("%s is no longer the symlink in the inbox", name)
				}
				if n := x.vfs.Node(target); n == nil || n.Opens() != 0 {
					t.Errorf("%s (what %s points to) was moved or opened", target, name)
				}
				for _, r := range x.vfs.Requests() {
					if strings.HasPrefix(r, "Rename "+path.Join(hostileInbox, name)+" ") || strings.HasPrefix(r, "Remove "+path.Join(hostileInbox, name)) {
						t.Errorf("the client asked the server to %s", r)
					}
				}
			}
			if !slices.Contains(x.host.Quirks, claim.QuirkFollowsSymlinks) {
				t.Errorf("host quirks %q lack %q", x.host.Quirks, claim.QuirkFollowsSymlinks)
			}
		},
	},
	{
		// The same entries on a server whose LSTAT is lstat(2): the
		// symlinks are moved into malformed/ as links, their targets
		// untouched, and no quirk is reported.
		name: "symlinks-honest-server",
		vfs: func(x *hostileX) {
			x.good("good.md")
			x.vfs.Add(hostileHome+"/outside.txt", hostile.File("the login's own file\n"))
			x.vfs.Add(path.Join(hostileInbox, "y.md"), hostile.Symlink(hostileHome+"/outside.txt"))
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			x.routed("good.md")
			x.item("y.md", "rejected", "symlink", "malformed/y.md")
			if n := x.vfs.Node(path.Join(hostileInbox, "malformed/y.md")); n == nil || n.Target != hostileHome+"/outside.txt" {
				t.Errorf("malformed/y.md is not the link")
			}
			if n := x.vfs.Node(hostileHome + "/outside.txt"); n == nil || n.Opens() != 0 {
				t.Errorf("the link's target was moved or opened")
			}
			if len(x.host.Quirks) != 0 {
				t.Errorf("quirks %q reported for an honest server", x.host.Quirks)
			}
		},
	},
	{
		// A symlinked inbox on a server whose LSTAT calls it a directory:
		// it is reported as a symlink, and nothing it points to is read or
		// moved.
		name: "follows-symlinks-inbox",
		vfs: func(x *hostileX) {
			x.vfs.FollowSymlinks = true
			x.vfs.Add(hostileHome+"/elsewhere/a.md", hostile.File(docHandoff("rules/x.md", "- elsewhere")))
			x.vfs.Add(hostileInbox, hostile.Symlink(hostileHome+"/elsewhere"))
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			if in := x.inbox(); in.State != "symlink" {
				t.Errorf("inbox state %q, want symlink", in.State)
			}
			if n := x.vfs.Node(hostileHome + "/elsewhere/a.md"); n == nil || n.Opens() != 0 {
				t.Errorf("a handoff behind the symlinked inbox was moved or opened")
			}
			if len(x.handoffs) != 0 {
				t.Errorf("entries for a symlinked inbox: %s", x.entries())
			}
			if !slices.Contains(x.host.Quirks, claim.QuirkFollowsSymlinks) {
				t.Errorf("host quirks %q lack %q", x.host.Quirks, claim.QuirkFollowsSymlinks)
			}
		},
	},
	{
		// A symlinked processed/ on a server whose LSTAT calls it a
		// directory: nothing is written through it. The handoff is stored
		// and applied once; its archive waits for a person to fix the
		// inbox.
		name: "follows-symlinks-processed",
		vfs: func(x *hostileX) {
			x.vfs.FollowSymlinks = true
			x.good("good.md")
			x.vfs.Add(hostileHome+"/pdir", hostile.Dir())
			x.vfs.Add(path.Join(hostileInbox, "processed"), hostile.Symlink(hostileHome+"/pdir"))
		},
		host:   "partial",
		errHas: []string{"stored but not archived", "not a directory"},
		check: func(t *testing.T, x *hostileX) {
			x.routed("good.md")
			if x.vfs.Node(path.Join(hostileInbox, "good.md")) == nil {
				t.Errorf("good.md left its inbox")
			}
			for _, p := range x.vfs.Paths() {
				if strings.HasPrefix(p, hostileHome+"/pdir/") {
					t.Errorf("%s written through the symlinked processed/", p)
				}
			}
			if h := x.handoffs["good.md"]; !strings.Contains(h.Error, "not a directory") {
				t.Errorf("good.md's entry error %q does not say why it was not archived", h.Error)
			}
			if !slices.Contains(x.host.Quirks, claim.QuirkFollowsSymlinks) {
				t.Errorf("host quirks %q lack %q", x.host.Quirks, claim.QuirkFollowsSymlinks)
			}
		},
	},
	{
		// Discovery on a server whose LSTAT follows symlinks: below a
		// root walked to max_depth 2, a repository at the last level whose
		// harness directory is a symlink, and one whose inbox is. Both are
		// reported as symlinks and nothing behind them is read or moved;
		// the real repository beside them is pulled as usual.
		name: "follows-symlinks-discovery",
		root: hostileHome + "/tree",
		vfs: func(x *hostileX) {
			x.vfs.FollowSymlinks = true
			tree := hostileHome + "/tree/g"
			x.goods["r.md"] = docHandoff("rules/hostile.md", "- real")
			x.vfs.Add(tree+"/real/.claude/memory-handoffs/r.md", hostile.File(x.goods["r.md"]))
			x.vfs.Add(hostileHome+"/elsewhere/memory-handoffs/h.md", hostile.File(docHandoff("rules/hostile.md", "- behind a harness link")))
			x.vfs.Add(tree+"/harness/.claude", hostile.Symlink(hostileHome+"/elsewhere"))
			x.vfs.Add(hostileHome+"/elsewhere2/i.md", hostile.File(docHandoff("rules/hostile.md", "- behind an inbox link")))
			x.vfs.Add(tree+"/inbox/.claude", hostile.Dir())
			x.vfs.Add(tree+"/inbox/.claude/memory-handoffs", hostile.Symlink(hostileHome+"/elsewhere2"))
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			states := map[string]string{}
			for _, in := range x.host.Inboxes {
				states[strings.TrimPrefix(in.Path, hostileHome+"/tree/g/")] = in.State
			}
			want := map[string]string{"real/.claude/memory-handoffs": "ok", "harness/.claude/memory-handoffs": "symlink", "inbox/.claude/memory-handoffs": "symlink"}
			if !maps.Equal(states, want) {
				t.Errorf("inbox states %v, want %v", states, want)
			}
			if h := x.handoffs["r.md"]; h.Result != "routed" {
				t.Errorf("r.md: %+v, want routed", h)
			}
			for _, p := range []string{hostileHome + "/elsewhere/memory-handoffs/h.md", hostileHome + "/elsewhere2/i.md"} {
				if n := x.vfs.Node(p); n == nil || n.Opens() != 0 {
					t.Errorf("%s, behind a symlink, was moved or opened", p)
				}
			}
			if !slices.Contains(x.host.Quirks, claim.QuirkFollowsSymlinks) {
				t.Errorf("host quirks %q lack %q", x.host.Quirks, claim.QuirkFollowsSymlinks)
			}
		},
	},
	{
		// Size 2^64-16: int64 -16 once decoded.
		name: "negative-size",
		vfs: func(x *hostileX) {
			n := hostileLieFstat(x.file("neg.md", "0123456789"), -16, 0o600)
			n.Size = -16
			x.good(hostileZGood)
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			h := x.handoffs["neg.md"]
			if h.Result != "rejected" || h.Reason != "oversize" {
				t.Errorf("neg.md: %+v, want rejected as oversize", h)
			}
			x.routed(hostileZGood)
		},
	},
	{
		// The repository's git index: LSTAT says 10 bytes, the data never
		// ends (index reads are bounded at 256 MiB, not by the Lstat).
		name: "git-index-endless",
		vfs: func(x *hostileX) {
			x.vfs.Add(hostileHome+"/repo/.git", hostile.Dir())
			x.vfs.Add(hostileHome+"/repo/.git/index", hostile.File("DIRC\x00\x00\x00\x02\x00\x00")).Read = hostile.Endless(0)
			x.good(hostileZGood)
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			if in := x.inbox(); in.State != "git-unreadable" {
				t.Errorf("inbox %+v, want git-unreadable", in)
			}
			if n := x.vfs.Node(hostileHome + "/repo/.git/index"); n.Served() > hostileReadBound {
				t.Errorf("the server was made to send %d bytes of a 10-byte index", n.Served())
			}
		},
	},
	{
		// The login directory holds escape sequences, and the inbox under
		// it cannot be read: the error names the path. A terminal run.
		name:  "home-escape",
		human: true,
		inbox: "~/repo/.claude/memory-handoffs",
		vfs: func(x *hostileX) {
			x.vfs.Home = "/srv/\x1b[2J\x1b]0;pwned\x07home"
			x.vfs.Lstat = func(p string) (os.FileInfo, bool, error) {
				if strings.HasPrefix(p, x.vfs.Home+"/") {
					return nil, true, os.ErrPermission
				}
				return nil, false, nil
			}
		},
		host:   "error",
		errHas: []string{"lstat inbox"},
	},

	{
		// Every rename into malformed/ fails with a 200,000-byte message of
		// ESC bytes, for each of 40 symlinks (rejected, never read).
		name:    "huge-error-messages",
		timeout: 30 * time.Second,
		vfs: func(x *hostileX) {
			for i := range 40 {
				x.vfs.Add(path.Join(hostileInbox, fmt.Sprintf("l%03d.md", i)), &hostile.Node{Mode: fs.ModeSymlink | 0o777, Size: 10, ModTime: hostile.Past})
			}
			msg := strings.Repeat("\x1b", 200_000)
			x.vfs.Rename = func(_, to string) (bool, error) {
				return strings.Contains(to, "/malformed/"), errors.New(msg)
			}
		},
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			x.item("l000.md", "rejected", "symlink", "")
			x.item("l039.md", "rejected", "symlink", "")
			if len(x.handoffs) != 40 {
				t.Errorf("%d receipt entries for the hostile host, want the 40 rejected symlinks", len(x.handoffs))
			}
		},
	},
	{
		// 50,000 files (five times the report bound) with 250-byte names, all
		// modified in the future: each is deferred as too young.
		name:    "deferred-flood",
		timeout: 30 * time.Second,
		vfs: func(x *hostileX) {
			future := time.Now().Add(time.Hour)
			x.inboxNode().List = func(dst []os.FileInfo, off int64) (int, error) {
				for i := range dst {
					idx := off + int64(i)
					if idx >= 50_000 {
						return i, io.EOF
					}
					dst[i] = hostile.EntryAt(fmt.Sprintf("%0247d.md", idx), 0o600, 10, future)
				}
				return len(dst), nil
			}
		},
		// Today the host fails: "worker report larger than 16777216 bytes",
		// or killed at its deadline when the machine is busy.
		host: "ok",
		check: func(t *testing.T, x *hostileX) {
			if in := x.inbox(); in.State != "ok" || in.Pending != 50_000 {
				t.Errorf("inbox %+v, want ok with 50000 pending", in)
			}
			// The report keeps at most claim.MaxItems of them and counts
			// the rest, so its size stays bounded.
			if len(x.handoffs) != 10_000 {
				t.Errorf("%d receipt entries for the hostile host, want the first 10000 deferrals", len(x.handoffs))
			}
		},
	},
	{
		// A discovery root holding 100,000 directories with 250-byte
		// names, the first ten of which hold 100,000 directories each (the
		// server stops there, to spare the machine running the test).
		name:    "wide-discovery-tree",
		timeout: 30 * time.Second,
		root:    hostileHome + "/tree",
		raw: func(x *hostileX) {
			tree := hostileHome + "/tree"
			var mu sync.Mutex
			type listing struct {
				entries, sent int
				name          func(int) string
			}
			handles := map[string]*listing{}
			full := 0 // level-1 directories listed with entries so far
			x.raw.Hook = func(r hostile.Request) []byte {
				mu.Lock()
				defer mu.Unlock()
				under := r.Path == tree || strings.HasPrefix(r.Path, tree+"/")
				switch {
				case (r.Type == hostile.FxpLstat || r.Type == hostile.FxpStat) && under:
					return hostile.Frame(hostile.Attrs(hostile.U32([]byte{hostile.FxpAttrs}, r.ID), 4096, hostile.ModeDir|0o700))
				case r.Type == hostile.FxpOpendir && under:
					l := &listing{}
					switch strings.Count(strings.TrimPrefix(r.Path, tree), "/") {
					case 0:
						l.entries, l.name = 100_000, func(i int) string { return fmt.Sprintf("d%0249d", i) }
					case 1:
						if full < 10 {
							full++
							l.entries, l.name = 100_000, func(i int) string { return fmt.Sprintf("e%09d", i) }
						}
					}
					h := fmt.Sprintf("tree%d", len(handles))
					handles[h] = l
					return hostile.Frame(hostile.Str(hostile.U32([]byte{hostile.FxpHandle}, r.ID), h))
				case r.Type == hostile.FxpReaddir && handles[r.Handle] != nil:
					l := handles[r.Handle]
					n := min(800, l.entries-l.sent)
					if n == 0 {
						return hostile.Frame(hostile.Status(r.ID, hostile.FxEOF, "eof"))
					}
					b := hostile.U32(hostile.U32([]byte{hostile.FxpName}, r.ID), uint32(n))
					for i := range n {
						b = hostile.Str(hostile.Str(b, l.name(l.sent+i)), "")
						b = hostile.U32(hostile.U32(b, hostile.AttrPermissions), hostile.ModeDir|0o700)
					}
					l.sent += n
					return hostile.Frame(b)
				case r.Type == hostile.FxpClose && handles[r.Handle] != nil:
					delete(handles, r.Handle)
					return hostile.Frame(hostile.Status(r.ID, hostile.FxOK, ""))
				}
				return nil
			}
		},
		host: "error",
	},

	// Malformed protocol replies, from the raw responder.
	{
		name: "raw-data-length-lie",
		raw: func(x *hostileX) {
			x.raw.Files[hostileInbox+"/lie.md"] = "0123456789"
			x.good(hostileZGood)
			x.raw.Hook = func(r hostile.Request) []byte {
				if r.Type == hostile.FxpRead && r.File == hostileInbox+"/lie.md" {
					// DATA claiming 1,000,000 bytes, carrying 10.
					return hostile.Frame(append(hostile.U32(hostile.U32([]byte{hostile.FxpData}, r.ID), 1_000_000), "0123456789"...))
				}
				return nil
			}
		},
		// A malformed reply to one file's request is that file's
		// failure: it waits, unstored, and the rest of the host is
		// pulled (the session itself is intact).
		host:  "ok",
		check: hostileReadFailed("lie.md"),
	},
	{
		name: "raw-ext-count",
		raw: func(x *hostileX) {
			x.raw.Files[hostileInbox+"/ext.md"] = "0123456789"
			x.good(hostileZGood)
			x.raw.Hook = func(r hostile.Request) []byte {
				// A file listed as a plain file is read without another
				// LSTAT; its open handle's FSTAT carries the lie then.
				if r.Type == hostile.FxpLstat && r.Path == hostileInbox+"/ext.md" ||
					r.Type == hostile.FxpFstat && r.File == hostileInbox+"/ext.md" {
					// Attributes announcing 2^32-1 extended pairs, holding none.
					b := hostile.U32([]byte{hostile.FxpAttrs}, r.ID)
					b = hostile.U32(b, hostile.AttrSize|hostile.AttrPermissions|hostile.AttrExtended)
					b = hostile.U64(b, 10)
					b = hostile.U32(b, hostile.ModeRegular|0o600)
					return hostile.Frame(hostile.U32(b, 0xFFFFFFFF))
				}
				return nil
			}
		},
		// A malformed reply to one file's request is that file's
		// failure: it waits, unstored, and the rest of the host is
		// pulled (the session itself is intact).
		host:  "ok",
		check: hostileReadFailed("ext.md"),
	},
	{
		// STATUS replies cut after the request id: no code, no message.
		name: "raw-truncated-status",
		raw: func(x *hostileX) {
			x.raw.Files[hostileInbox+"/trunc.md"] = "0123456789"
			x.good(hostileZGood)
			x.raw.Hook = func(r hostile.Request) []byte {
				if r.Type == hostile.FxpRead && r.File == hostileInbox+"/trunc.md" && r.N > 0 {
					return hostile.Frame(hostile.U32([]byte{hostile.FxpStatus}, r.ID))
				}
				return nil
			}
		},
		// A malformed reply to one file's request is that file's
		// failure: it waits, unstored, and the rest of the host is
		// pulled (the session itself is intact).
		host:  "ok",
		check: hostileReadFailed("trunc.md"),
	},
	{
		// The same for the RENAME that archives a stored handoff.
		name: "raw-truncated-status-rename",
		raw: func(x *hostileX) {
			x.good("good.md")
			x.raw.Hook = func(r hostile.Request) []byte {
				if r.Type == hostile.FxpRename {
					return hostile.Frame(hostile.U32([]byte{hostile.FxpStatus}, r.ID))
				}
				return nil
			}
		},
		host:   "partial",
		errHas: []string{"stored but not archived"},
		check: func(t *testing.T, x *hostileX) {
			x.routed("good.md")
			if _, ok := x.raw.Snapshot()[hostileInbox+"/good.md"]; !ok {
				t.Errorf("good.md left its inbox though no rename succeeded")
			}
		},
	},
	{
		// A frame header announcing 200,000 bytes, then 20, then silence.
		name: "raw-frame-length-lie",
		raw: func(x *hostileX) {
			x.raw.Files[hostileInbox+"/frame.md"] = "0123456789"
			x.good(hostileZGood)
			x.raw.Hook = func(r hostile.Request) []byte {
				if r.Type == hostile.FxpRead && r.File == hostileInbox+"/frame.md" {
					b := hostile.U32(nil, 200_000)
					b = append(b, hostile.FxpData)
					b = hostile.U32(b, r.ID)
					b = hostile.U32(b, 199_991)
					return append(b, "0123456789"...)
				}
				return nil
			}
		},
		host:   "error",
		errHas: []string{"deadline of 5s exceeded"},
		check: func(t *testing.T, x *hostileX) {
			if len(x.handoffs) != 0 {
				t.Errorf("receipt entries %s, want none", x.entries())
			}
		},
	},
	{
		// One NAME reply announcing 2^32-1 entries, holding one.
		name: "raw-name-count-lie",
		raw: func(x *hostileX) {
			x.good(hostileZGood)
			x.raw.Hook = func(r hostile.Request) []byte {
				if r.Type == hostile.FxpReaddir && r.File == hostileInbox {
					b := hostile.U32(hostile.U32([]byte{hostile.FxpName}, r.ID), 0xFFFFFFFF)
					b = hostile.Str(hostile.Str(b, "x.md"), "x.md")
					return hostile.Frame(hostile.Attrs(b, 10, hostile.ModeRegular|0o600))
				}
				return nil
			}
		},
		host:     "ok",
		unlisted: true,
		check: func(t *testing.T, x *hostileX) {
			if in := x.inbox(); in.State != "error" || !strings.Contains(in.Error, "more than 100000 entries") {
				t.Errorf("inbox %+v, want state error saying more than 100000 entries", in)
			}
		},
	},
}

// hostileListed holds the million-entries case's counter of entries listed.
var hostileListed sync.Map
