package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gofrs/flock"

	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/receipts"
)

// ccReceiptsOnce: across every per-run receipt in the workspace, each
// source (host, inbox, name, hash) got a terminal result at most once, and
// each content was promoted or routed at most once. Invariant: nothing is
// applied twice, whichever run applied it.
func ccReceiptsOnce(t *testing.T, ws string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(ws, ".handoff/receipts/*.json"))
	seen := map[string]string{}
	applied := map[string]string{}
	for _, p := range paths {
		if filepath.Base(p) == "latest.json" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := receipts.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, h := range r.Handoffs {
			if h.Result == "deferred" || h.Result == "rejected" {
				continue
			}
			key := h.Host + "|" + h.Inbox + "|" + h.Name + "|" + h.SHA256
			if prev, ok := seen[key]; ok {
				t.Errorf("%s got a result in run %s and again in run %s", h.Name, prev, r.RunID)
			}
			seen[key] = r.RunID
			if h.Result == "promoted" || h.Result == "routed" {
				if prev, ok := applied[h.SHA256]; ok {
					t.Errorf("content %s (%s) applied in run %s and again in run %s", h.SHA256[:12], h.Name, prev, r.RunID)
				}
				applied[h.SHA256] = r.RunID
			}
		}
	}
}

// TestConcurrencyEightSyncs starts eight `handoff sync` processes at once on
// one workspace with a backlog. Each exits 0 or 75 (a 75 names the lock);
// nothing is applied twice; a final run leaves everything ingested.
func TestConcurrencyEightSyncs(t *testing.T) {
	w := newWorld(t)
	markers := w.mixed()
	results := map[string]string{}
	for k, v := range mixedResults {
		results[k] = v
	}
	for i := 0; i < 40; i++ {
		m := fmt.Sprintf("marker-c8-%03d", i)
		name := fmt.Sprintf("c8-%03d.md", i)
		mustWrite(t, filepath.Join(w.inboxes[i%2], name), docHandoff("TOOLS.md", "- "+m))
		markers["TOOLS.md"] = append(markers["TOOLS.md"], m)
		results[name] = "routed"
	}
	const n = 8
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.Command(binary(), "sync", "--manifest", w.manifest)
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
	}
	start := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	zero, locked := 0, 0
	for i, c := range cmds {
		err := c.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		switch code {
		case 0:
			zero++
		case 75:
			locked++
			if !strings.Contains(outs[i].String(), "another handoff run holds the workspace lock") {
				t.Errorf("run %d exited 75 without naming the lock:\n%s", i, outs[i])
			}
		default:
			t.Errorf("run %d exited %d, want 0 or 75:\n%s", i, code, outs[i])
		}
	}
	t.Logf("%d concurrent runs: %d exited 0, %d exited 75, in %v", n, zero, locked, time.Since(start).Round(time.Millisecond))
	if zero == 0 {
		t.Fatal("no concurrent run succeeded")
	}
	ccReceiptsOnce(t, w.ws)

	// Second wave: eight runs started at staggered moments while new
	// handoffs keep arriving, so that several runs get the lock in turn
	// and each has work to do.
	arrivals := make(chan struct{})
	go func() {
		defer close(arrivals)
		for i := 0; i < 16; i++ {
			m := fmt.Sprintf("marker-wave-%03d", i)
			name := fmt.Sprintf("wave-%03d.md", i)
			// Written aside and renamed in, as a careful writer does: with
			// settle 0s a half-written file could otherwise be claimed.
			tmp := filepath.Join(w.inboxes[i%2], "."+name+".tmp")
			mustWrite(t, tmp, docHandoff("TOOLS.md", "- "+m))
			if err := os.Rename(tmp, filepath.Join(w.inboxes[i%2], name)); err != nil {
				t.Error(err)
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	for i := 0; i < 16; i++ {
		markers["TOOLS.md"] = append(markers["TOOLS.md"], fmt.Sprintf("marker-wave-%03d", i))
		results[fmt.Sprintf("wave-%03d.md", i)] = "routed"
	}
	codes := make(chan string, n)
	for i := 0; i < n; i++ {
		time.Sleep(80 * time.Millisecond)
		go func() {
			c, out := runBinary(t, "sync", "--manifest", w.manifest)
			codes <- fmt.Sprintf("%d\x00%s", c, out)
		}()
	}
	zero = 0
	for i := 0; i < n; i++ {
		code, out, _ := strings.Cut(<-codes, "\x00")
		switch code {
		case "0":
			zero++
		case "75":
		default:
			t.Errorf("staggered run exited %s, want 0 or 75:\n%s", code, out)
		}
	}
	<-arrivals
	t.Logf("staggered runs: %d of %d exited 0", zero, n)
	ccReceiptsOnce(t, w.ws)
	if code, out := w.sync(); code != 0 {
		t.Fatalf("final run exited %d:\n%s", code, out)
	}
	w.checkConverged(markers, results)
	ccReceiptsOnce(t, w.ws)
}

// ccLockFree reports whether the workspace lock can be taken now.
func ccLockFree(t *testing.T, ws string) bool {
	t.Helper()
	fl := flock.New(filepath.Join(ws, ".handoff/lock"))
	ok, err := fl.TryLock()
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		fl.Unlock()
	}
	return ok
}

// TestConcurrencyStaleLockAfterKill: a run killed by SIGKILL in the middle
// of applying (at a failpoint, holding the lock) leaves its pid in the lock
// file but not the lock: the kernel drops a flock with its holder. The
// next run must not exit 75; it finishes the interrupted plan and
// converges.
func TestConcurrencyStaleLockAfterKill(t *testing.T) {
	for _, fp := range []string{"plan.recorded", "commit.written", "receipt.written"} {
		t.Run(fp, func(t *testing.T) {
			w := newWorld(t)
			markers := w.mixed()
			code, out := w.sync(failpoint.Env + "=" + fp)
			if code != -9 {
				t.Fatalf("run with %s exited %d, want killed by SIGKILL:\n%s", fp, code, out)
			}
			pid := lockPID(filepath.Join(w.ws, ".handoff/lock"))
			if pid == "" {
				t.Fatal("the killed run left no pid in the lock file; the test needs a stale lock file")
			}
			if !ccLockFree(t, w.ws) {
				t.Fatalf("the lock is still held after its holder (pid %s) died", pid)
			}
			code, out = w.sync()
			if code != 0 {
				t.Fatalf("run after a killed holder (stale pid %s) exited %d:\n%s", pid, code, out)
			}
			w.checkConverged(markers, mixedResults)
			ccReceiptsOnce(t, w.ws)
		})
	}
}

// TestConcurrencyKilledWhileWorkerRuns: a run holding the lock is SIGKILLed
// from outside while a pull worker of its is still busy (a host that
// accepts TCP and never speaks). Neither the worker nor anything else may
// keep the workspace locked: a new run takes the lock at once and
// converges.
func TestConcurrencyKilledWhileWorkerRuns(t *testing.T) {
	w := newWorld(t)
	markers := w.mixed()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // hold it open, say nothing
			mu.Unlock()
		}
	}()
	_, key := sshdtest.NewEd25519(t)
	idFile := filepath.Join(w.dir, "id_ed25519")
	sshdtest.WritePrivateKey(t, idFile, key, "")
	b, _ := os.ReadFile(w.manifest)
	mustWrite(t, w.manifest, string(b)+fmt.Sprintf(`  - name: silent
    transport: ssh
    timeout: 60s
    ssh: {host: 127.0.0.1, port: %d, connect_timeout: 50s, known_hosts: %s, identity_file: %s}
    inboxes: [/nonexistent/.claude/memory-handoffs]
`, ln.Addr().(*net.TCPAddr).Port, filepath.Join(w.dir, "known_hosts"), idFile))

	first := exec.Command(binary(), "sync", "--manifest", w.manifest)
	var firstOut bytes.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	// Wait until the first run holds the lock and has a worker child.
	deadline := time.Now().Add(10 * time.Second)
	var worker int
	for worker == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("first run never held the lock with a worker running:\n%s", firstOut.String())
		}
		time.Sleep(20 * time.Millisecond)
		if lockPID(filepath.Join(w.ws, ".handoff/lock")) != strconv.Itoa(first.Process.Pid) {
			continue
		}
		worker = ccChild(first.Process.Pid)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	start := time.Now()
	code, out := w.run(nil, "sync", "--manifest", w.manifest, "--host", "canonical")
	if code != 0 {
		t.Fatalf("run after the holder was killed exited %d (worker %d alive: %v):\n%s", code, worker, syscall.Kill(worker, 0) == nil, out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the new run took %v: it waited on something the killed run left", d)
	}
	w.checkConverged(markers, mixedResults)
	// The worker must not outlive its parent for long (Pdeathsig).
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(worker, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("worker %d outlived its killed parent", worker)
			syscall.Kill(worker, syscall.SIGKILL)
			break
		}
	}
}

// ccChild returns the pid of a child of pid, or 0.
func ccChild(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	// Children of other threads.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, p := range tasks {
		b, _ := os.ReadFile(p)
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	return 0
}

// ccTwoHosts makes a world with two local hosts, alpha and beta, each
// with one declared inbox.
func ccTwoHosts(t *testing.T) *world {
	t.Helper()
	w := newWorld(t)
	w.inboxes = []string{filepath.Join(w.dir, "alpha/repo/.claude/memory-handoffs"), filepath.Join(w.dir, "beta/repo/.codex/memory-handoffs")}
	for _, in := range w.inboxes {
		mustMkdir(t, in)
	}
	mustWrite(t, w.manifest, fmt.Sprintf(`version: 1
workspace: %s
defaults: {settle: 0s}
hosts:
  - name: alpha
    transport: local
    inboxes: [%s]
  - name: beta
    transport: local
    inboxes: [%s]
`, w.ws, w.inboxes[0], w.inboxes[1]))
	return w
}

// TestConcurrencySameNameTwoHosts: x.md with different bytes on two hosts,
// and later a new x.md in the same inbox: the two hosts' are ingested each
// with its own result (one name on two hosts is no revision), the rewrite
// is a revision, and their archive names differ by their sha12.
func TestConcurrencySameNameTwoHosts(t *testing.T) {
	w := ccTwoHosts(t)
	xa := cardHandoff("create-card", "from-alpha.md", "A")
	xb := docHandoff("TOOLS.md", "- marker-from-beta")
	mustWrite(t, filepath.Join(w.inboxes[0], "x.md"), xa)
	mustWrite(t, filepath.Join(w.inboxes[1], "x.md"), xb)
	code, out := w.run(nil, "sync", "--json", "--manifest", w.manifest)
	if code != 0 {
		t.Fatalf("sync exited %d:\n%s", code, out)
	}
	r, err := receipts.Decode([]byte(out))
	if err != nil {
		t.Fatalf("receipt: %v\n%s", err, out)
	}
	byHost := map[string]receipts.Handoff{}
	for _, h := range r.Handoffs {
		if h.Name != "x.md" {
			t.Errorf("unexpected handoff %s", h.Name)
		}
		byHost[h.Host] = h
	}
	a, b := byHost["alpha"], byHost["beta"]
	if a.Result != "promoted" || a.SHA256 != sum(xa) || b.Result != "routed" || b.SHA256 != sum(xb) {
		t.Fatalf("alpha %s/%s, beta %s/%s; want each x.md ingested on its own", a.Result, a.SHA256, b.Result, b.SHA256)
	}
	if a.ArchivedAs != processedName("x.md", xa) || b.ArchivedAs != processedName("x.md", xb) || a.ArchivedAs == b.ArchivedAs {
		t.Fatalf("archived as %q and %q, want names that differ by sha12", a.ArchivedAs, b.ArchivedAs)
	}
	for i, c := range []string{xa, xb} {
		got, err := os.ReadFile(filepath.Join(w.inboxes[i], processedName("x.md", c)))
		if err != nil || string(got) != c {
			t.Errorf("%s: archive does not hold the bytes stored: %v", w.inboxes[i], err)
		}
	}
	// The same name again in alpha's inbox, new bytes: a revision of the
	// first (docs/design.md, "Revisions"), stored and archived beside it,
	// which stays untouched; the first changed the workspace, so the
	// revision waits in review instead of being applied as well.
	xa2 := docHandoff("TOOLS.md", "- marker-alpha-again")
	mustWrite(t, filepath.Join(w.inboxes[0], "x.md"), xa2)
	if code, out := w.sync(); code != 0 {
		t.Fatalf("second sync exited %d:\n%s", code, out)
	}
	for _, c := range []string{xa, xa2} {
		got, err := os.ReadFile(filepath.Join(w.inboxes[0], processedName("x.md", c)))
		if err != nil || string(got) != c {
			t.Errorf("archive %s: %v", processedName("x.md", c), err)
		}
	}
	ccSettled(t, w, map[string][]string{"TOOLS.md": {"marker-from-beta"}}, 3)
	if b, _ := os.ReadFile(filepath.Join(w.ws, "TOOLS.md")); strings.Contains(string(b), "marker-alpha-again") {
		t.Errorf("the revision was applied:\n%s", b)
	}
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var applied, revised int
	db.QueryRow(`SELECT count(*) FILTER (WHERE result IN ('promoted', 'routed')), count(*) FILTER (WHERE result = 'review' AND reason = 'revised' AND host = 'alpha')
		FROM sources WHERE name = 'x.md'`).Scan(&applied, &revised)
	if applied != 2 || revised != 1 {
		t.Fatalf("%d applied x.md sources and %d revised; want the two hosts' first versions applied, alpha's rewrite in review", applied, revised)
	}
}

// TestConcurrencySameContentTwoNames: identical bytes under two names, in
// one inbox and across two hosts: one is applied, every other copy is a
// duplicate, and the text lands once.
func TestConcurrencySameContentTwoNames(t *testing.T) {
	w := ccTwoHosts(t)
	h := docHandoff("TOOLS.md", "- marker-same")
	mustWrite(t, filepath.Join(w.inboxes[0], "a.md"), h)
	mustWrite(t, filepath.Join(w.inboxes[0], "b.md"), h)
	mustWrite(t, filepath.Join(w.inboxes[1], "c.md"), h)
	code, out := w.run(nil, "sync", "--json", "--manifest", w.manifest)
	if code != 0 {
		t.Fatalf("sync exited %d:\n%s", code, out)
	}
	r, err := receipts.Decode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, x := range r.Handoffs {
		count[x.Result]++
		want := processedName(x.Name, h)
		if x.ArchivedAs != want {
			t.Errorf("%s archived as %q, want %q", x.Name, x.ArchivedAs, want)
		}
	}
	if count["routed"] != 1 || count["duplicate"] != 2 || len(r.Handoffs) != 3 {
		t.Fatalf("results %v, want 1 routed and 2 duplicate", count)
	}
	if r.Counts.Pulled != 3 || r.Counts.Duplicate != 2 {
		t.Errorf("counts %+v", r.Counts)
	}
	ccSettled(t, w, map[string][]string{"TOOLS.md": {"marker-same"}}, 3)
}

// ccSettled is checkConverged for fixtures where names repeat: every
// source has a result, no inbox holds a handoff, no plan is open, every
// marker appears exactly once, no temporary file is left.
func ccSettled(t *testing.T, w *world, markers map[string][]string, sources int) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, pending, open int
	db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE result = '') FROM sources`).Scan(&n, &pending)
	db.QueryRow(`SELECT count(*) FROM plans WHERE state = 'planned'`).Scan(&open)
	if n != sources || pending != 0 || open != 0 {
		t.Errorf("ledger: %d sources (want %d), %d without a result, %d open plans", n, sources, pending, open)
	}
	for file, ms := range markers {
		b, _ := os.ReadFile(filepath.Join(w.ws, file))
		for _, m := range ms {
			if c := strings.Count(string(b), m); c != 1 {
				t.Errorf("%s holds %s %d times, want once:\n%s", file, m, c, b)
			}
		}
	}
	for _, in := range w.inboxes {
		left, _ := filepath.Glob(filepath.Join(in, "*.md"))
		if len(left) > 0 {
			t.Errorf("not archived: %v", left)
		}
	}
	filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".handoff-tmp.") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// TestConcurrencyEditorDuringApply: another process appends to TOOLS.md
// while handoff is between reading it and renaming the new content over
// it. The timing is made certain: inotify reports the backup's temporary
// file (written after the read, before the rename), the run is frozen with
// SIGSTOP, the editor appends, the run is resumed. Invariant: an edit
// made by someone else is never lost.
func TestConcurrencyEditorDuringApply(t *testing.T) {
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "TOOLS.md"), "# Tools\n")
	mustMkdir(t, filepath.Join(w.ws, ".handoff/backups"))
	const k = 3
	for i := 0; i < k; i++ {
		mustWrite(t, filepath.Join(w.inboxes[0], fmt.Sprintf("e%d.md", i)), docHandoff("TOOLS.md", fmt.Sprintf("- handoff-text-%d", i)))
	}
	ifd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ifd)
	if _, err := syscall.InotifyAddWatch(ifd, filepath.Join(w.ws, ".handoff/backups"), syscall.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(), "sync", "--manifest", w.manifest)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var edits []string
	buf := make([]byte, 64<<10)
	deadline := time.After(30 * time.Second)
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("sync did not finish:\n%s", out.String())
		default:
		}
		n, err := syscall.Read(ifd, buf)
		if err != nil || n <= 0 {
			time.Sleep(20 * time.Microsecond)
			continue
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			if !strings.HasPrefix(name, ".handoff-tmp.") || !strings.HasSuffix(name, "TOOLS.md") {
				continue
			}
			syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP)
			ccWaitStopped(cmd.Process.Pid)
			line := fmt.Sprintf("- editor-line-%d", len(edits))
			f, err := os.OpenFile(filepath.Join(w.ws, "TOOLS.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				if _, err := f.WriteString(line + "\n"); err == nil {
					edits = append(edits, line)
				}
				f.Close()
			}
			syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		}
	}
	if waitErr != nil {
		t.Fatalf("sync: %v\n%s", waitErr, out.String())
	}
	final, _ := os.ReadFile(filepath.Join(w.ws, "TOOLS.md"))
	// This editor strikes at every write attempt, so a handoff may find
	// TOOLS.md moved again after its one re-plan: it then goes to review
	// (hash-conflict) with a draft, as SPEC says. Never twice.
	drafts, _ := filepath.Glob(filepath.Join(w.ws, ".handoff/review/*.md"))
	for i := 0; i < k; i++ {
		c := strings.Count(string(final), fmt.Sprintf("- handoff-text-%d", i))
		switch {
		case c > 1:
			t.Errorf("handoff-text-%d applied %d times", i, c)
		case c == 0 && !slices.ContainsFunc(drafts, func(d string) bool { return strings.HasPrefix(filepath.Base(d), fmt.Sprintf("e%d.", i)) }):
			t.Errorf("handoff-text-%d neither applied nor in the review inbox (drafts %v)", i, drafts)
		}
	}
	if len(edits) == 0 {
		t.Fatal("the editor never got to write: the backup of TOOLS.md was never seen")
	}
	var lost []string
	for _, l := range edits {
		if !strings.Contains(string(final), l+"\n") {
			lost = append(lost, l)
		}
	}
	t.Logf("%d edits made while the run was frozen between read and rename; %d lost", len(edits), len(lost))
	if len(lost) > 0 {
		msg := fmt.Sprintf("edits made by another process between handoff's read of TOOLS.md and its rename are lost: %v; TOOLS.md now:\n%s", lost, final)
		t.Fatal(msg)
	}
}

// ccWaitStopped waits (briefly) until pid is in the stopped state.
func ccWaitStopped(pid int) {
	for i := 0; i < 1000; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "T" {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}
