package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/testkit/hostile"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// mirrorWorld is a laptop reached over real OpenSSH whose mirror is at
// an absolute path on it.
type mirrorWorld struct {
	*world
	home, dir, inbox string
	env              []string
}

func newMirrorWorld(t *testing.T) *mirrorWorld {
	t.Helper()
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	w := newWorld(t)
	mw := &mirrorWorld{world: w, home: filepath.Join(w.dir, "home"), dir: filepath.Join(w.dir, "laptop-mirror"),
		inbox: filepath.Join(w.dir, "laptop/app/.claude/memory-handoffs")}
	mustMkdir(t, mw.home)
	mustMkdir(t, mw.inbox)
	writeManifest(t, w.manifest, w.ws, hostYAML("laptop", sshBlock(srv, ""), []string{mw.inbox}, nil,
		fmt.Sprintf("mirror: {path: %s}", mw.dir)))
	mw.env = childEnv(mw.home)
	return mw
}

func (mw *mirrorWorld) syncOK(t *testing.T, env ...string) mirror.Result {
	t.Helper()
	r := runHandoff(t, append(slices.Clone(mw.env), env...), "sync", "--manifest", mw.manifest, "--json")
	if r.code != 0 {
		t.Fatalf("sync: %v", r)
	}
	h := receiptHost(t, decodeReceipt(t, r), "laptop")
	if h.Mirror == nil || h.Mirror.Outcome != mirror.OutcomeOK {
		t.Fatalf("mirror %+v", h.Mirror)
	}
	return mirror.Result{Outcome: h.Mirror.Outcome, Sent: h.Mirror.Sent, Removed: h.Mirror.Removed, Generation: h.Mirror.Generation}
}

// sumsOK runs sha256sum -c in the mirror and checks that the mirror holds
// exactly the workspace's cards, with no temporary file.
func (mw *mirrorWorld) sumsOK(t *testing.T) {
	t.Helper()
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = mw.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c on the laptop: %v\n%s", err, out)
	}
	ws, mirrored := hashTree(t, filepath.Join(mw.ws, "memory/cards")), hashTree(t, filepath.Join(mw.dir, "memory/cards"))
	for k := range ws {
		if strings.HasPrefix(k, ".handoff-") {
			delete(ws, k)
		}
	}
	if !maps.Equal(ws, mirrored) {
		t.Fatalf("mirror cards %v; workspace %v", mirrored, ws)
	}
	var info mirror.Info
	data, _ := os.ReadFile(filepath.Join(mw.dir, "MIRROR.json"))
	if err := json.Unmarshal(data, &info); err != nil || !info.Complete {
		t.Fatalf("MIRROR.json %s: %v", data, err)
	}
}

const mirrorCard = "---\ntopic: t\ncategory: c\ntags: []\n---\n"

// TestMirrorOverOpenSSH is the loop of issue 14 over real OpenSSH: a sync
// promotes card X; the laptop's mirror holds X and sha256sum -c passes
// there; an update-card carrying the mirror's hash of X is promoted by the
// next sync; a second update still carrying the old hash waits as
// hash-conflict. An idle run sends nothing.
func TestMirrorOverOpenSSH(t *testing.T) {
	mw := newMirrorWorld(t)
	mustWrite(t, filepath.Join(mw.inbox, "a.md"), cardHandoff("create-card", "x.md", mirrorCard+"first"))
	res := mw.syncOK(t)
	if res.Generation != 1 || !slices.Contains(res.Sent, "memory/cards/x.md") {
		t.Fatalf("first publish %+v", res)
	}
	mw.sumsOK(t)
	mirrored, err := os.ReadFile(filepath.Join(mw.dir, "memory/cards/x.md"))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Lstat(filepath.Join(mw.dir, "memory/cards/x.md"))
	if fi.Mode().Perm() != 0o444 {
		t.Errorf("mirrored card mode %v; want 0444", fi.Mode())
	}
	old := sum(string(mirrored))

	mustWrite(t, filepath.Join(mw.inbox, "b.md"), cardHandoff("update-card", "x.md", mirrorCard+"second", "Expected card SHA256", old))
	res = mw.syncOK(t)
	got, _ := os.ReadFile(filepath.Join(mw.ws, "memory/cards/x.md"))
	if !strings.Contains(string(got), "second") || res.Generation != 2 {
		t.Fatalf("update with the mirror's hash: card %q, publish %+v", got, res)
	}
	mw.sumsOK(t)

	mustWrite(t, filepath.Join(mw.inbox, "c.md"), cardHandoff("update-card", "x.md", mirrorCard+"stale", "Expected card SHA256", old))
	r := runHandoff(t, mw.env, "sync", "--manifest", mw.manifest, "--json")
	rc := decodeReceipt(t, r)
	found := false
	for _, h := range rc.Handoffs {
		found = found || h.Name == "c.md" && h.Reason == "hash-conflict"
	}
	if !found {
		t.Errorf("stale update not held as hash-conflict: %+v", rc.Handoffs)
	}
	if m := receiptHost(t, rc, "laptop").Mirror; len(m.Sent)+len(m.Removed) != 0 {
		t.Errorf("nothing changed, yet the mirror sent %q removed %q", m.Sent, m.Removed)
	}
}

// TestMirrorCrashAtEveryFailpoint kills the publisher (the laptop's pull
// worker) at each mirror failpoint, then runs again. Invariants: while
// crashed, every file of the mirror holds its old or its new bytes; ingest
// is unaffected (the run is partial, the card applied); the next run
// completes the mirror (sha256sum -c passes, no temporary file, the cards
// are the workspace's).
func TestMirrorCrashAtEveryFailpoint(t *testing.T) {
	for _, fp := range failpoint.MirrorNames {
		t.Run(fp, func(t *testing.T) {
			mw := newMirrorWorld(t)
			for _, n := range []string{"a", "b", "c"} {
				mustWrite(t, filepath.Join(mw.inbox, n+".md"), cardHandoff("create-card", n+".md", mirrorCard+"v1 of "+n))
			}
			mw.syncOK(t)
			mw.sumsOK(t)
			oldTree := hashTree(t, mw.dir)
			// The next run changes a, adds d, and (by hand on the canonical
			// host) c is gone.
			a, _ := os.ReadFile(filepath.Join(mw.dir, "memory/cards/a.md"))
			mustWrite(t, filepath.Join(mw.inbox, "a2.md"), cardHandoff("update-card", "a.md", mirrorCard+"v2 of a", "Expected card SHA256", sum(string(a))))
			mustWrite(t, filepath.Join(mw.inbox, "d.md"), cardHandoff("create-card", "d.md", mirrorCard+"v1 of d"))
			if err := os.Remove(filepath.Join(mw.ws, "memory/cards/c.md")); err != nil {
				t.Fatal(err)
			}
			r := runHandoff(t, append(slices.Clone(mw.env), failpoint.Env+"="+fp), "sync", "--manifest", mw.manifest, "--json")
			rc := decodeReceipt(t, r)
			m := receiptHost(t, rc, "laptop").Mirror
			if r.code != 1 || m == nil || m.Outcome != mirror.OutcomeError {
				t.Fatalf("failpoint %s not reached: %v\nmirror %+v", fp, r, m)
			}
			if got, _ := os.ReadFile(filepath.Join(mw.ws, "memory/cards/a.md")); !strings.Contains(string(got), "v2 of a") {
				t.Fatalf("ingest was affected by the mirror's crash: a.md = %q", got)
			}
			// Old or new bytes, file by file.
			newTree := map[string]string{}
			for k, v := range hashTree(t, filepath.Join(mw.ws, "memory/cards")) {
				newTree["memory/cards/"+k] = v
			}
			for k, v := range hashTree(t, mw.dir) {
				base := filepath.Base(k)
				if strings.HasPrefix(base, ".handoff-") || !strings.HasPrefix(k, "memory/cards/") {
					continue
				}
				if v != oldTree[k] && v != newTree[k] {
					t.Errorf("%s holds neither its old nor its new bytes after a crash at %s", k, fp)
				}
			}
			mw.syncOK(t)
			mw.sumsOK(t)
			for k := range hashTree(t, mw.dir) {
				if strings.Contains(k, ".handoff-") {
					t.Errorf("temporary file %s left after the next run", k)
				}
			}
		})
	}
}

// TestMirrorPartialHostOverSSH is the report over SSH: the login
// may read one inbox but not rename in it (chown root: on it), and the
// host still gets its mirror, with the card another of its inboxes sent.
// The host is partial, not failed; the unwritable inbox is in state error
// with the hint, stderr names it, and the run exits 1. Invariants: the
// unarchivable handoff is stored and applied, never lost, and stays in its
// inbox; the mirror holds the workspace's card byte for byte.
func TestMirrorPartialHostOverSSH(t *testing.T) {
	const (
		vhome  = "/srv/laptop"
		app    = vhome + "/app/.claude/memory-handoffs"
		locked = vhome + "/lib/.claude/memory-handoffs"
		dir    = vhome + "/mirror"
	)
	root, home, ws, manifestPath := syncDirs(t)
	v := hostile.NewVFS(vhome)
	v.Writable = true // the login may write its own directories: the mirror, app's inbox
	v.Rename = func(from, to string) (bool, error) {
		if strings.HasPrefix(from, locked+"/") {
			return true, syscall.EACCES // SSH_FX_PERMISSION_DENIED, as OpenSSH answers
		}
		return false, nil
	}
	a := cardHandoff("create-card", "x.md", mirrorCard+"from app")
	b := docHandoff("TOOLS.md", "- from lib")
	v.Add(app+"/a.md", hostile.File(a))
	v.Add(locked+"/b.md", hostile.File(b))
	srv := hostile.Start(t, filepath.Join(root, "keys"), v)
	sshYAML := fmt.Sprintf("{host: %s, port: %d, user: %s, identity_file: %s, known_hosts: %s}",
		srv.Host, srv.Port, srv.User, srv.IdentityFile, srv.KnownHosts)
	writeManifest(t, manifestPath, ws, hostYAML("laptop", sshYAML, []string{app, locked}, nil, "mirror: {path: "+dir+"}"))

	r := runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath)
	rc := latestReceipt(t, ws)
	h := receiptHost(t, rc, "laptop")
	if r.code != 1 || rc.Outcome != receipts.OutcomePartial || h.Outcome != receipts.HostPartial {
		t.Fatalf("exit %d, run %s, host %s (%s); want 1, partial, partial\n%v", r.code, rc.Outcome, h.Outcome, h.Error, r)
	}
	hint := "hint: " + claim.ArchiveDeniedHint(locked)
	for _, in := range h.Inboxes {
		switch in.Path {
		case app:
			if in.State != "ok" {
				t.Errorf("the writable inbox: %+v, want ok", in)
			}
		case locked:
			if in.State != receipts.InboxError || !strings.HasSuffix(in.Error, "\n"+hint) {
				t.Errorf("the unwritable inbox: %+v, want state error ending with %q", in, hint)
			}
		}
	}
	if !strings.Contains(r.stderr, "handoff: host laptop: 1 file(s) stored but not archived") || !strings.Contains(r.stderr, hint) {
		t.Errorf("stderr does not name the host's failure and its hint:\n%s", r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "TOOLS.md")); !strings.Contains(string(got), "from lib") {
		t.Errorf("the unarchivable handoff was not applied: TOOLS.md %q", got)
	}
	if v.Node(locked+"/b.md") == nil {
		t.Error("b.md left the unwritable inbox")
	}
	if v.Node(app+"/"+processedName("a.md", a)) == nil {
		t.Error("a.md was not archived in the writable inbox")
	}
	m := h.Mirror
	if m == nil || m.Outcome != mirror.OutcomeOK || !slices.Contains(m.Sent, "memory/cards/x.md") {
		t.Fatalf("mirror %+v; want it published with the card", m)
	}
	card, err := os.ReadFile(filepath.Join(ws, "memory/cards/x.md"))
	if n := v.Node(dir + "/memory/cards/x.md"); err != nil || n == nil || string(n.Data) != string(card) {
		t.Errorf("the host's mirror does not hold the workspace's card (%v)", err)
	}
}

// interruptedMirror is a local host's mirror whose publish a SIGINT
// stopped: the run, its receipt, and the host's tree before and after.
type interruptedMirror struct {
	w                *world
	dir              string
	env              []string
	stderr           string
	first, rc        *receipts.Receipt
	m                *receipts.Mirror
	oldTree, newTree map[string]string
	wantCards        map[string]string // the workspace's cards, by their path in the mirror
}

// interruptPublish publishes three cards, then runs a sync whose publish
// sends a new a and a d and removes c, pauses its worker at
// mirror.removed and sends the run SIGINT there, as ^C on a terminal does:
// to the run, not its workers, which have process groups of their own.
func interruptPublish(t *testing.T, fp string) *interruptedMirror {
	t.Helper()
	w := newWorld(t)
	x := &interruptedMirror{w: w, dir: filepath.Join(w.dir, "mirror")}
	home := filepath.Join(w.dir, "home")
	mustMkdir(t, home)
	inbox := w.inboxes[0]
	writeManifest(t, w.manifest, w.ws, hostYAML("canonical", "", []string{inbox}, nil, "mirror: {path: "+x.dir+"}"))
	x.env = childEnv(home)
	for _, n := range []string{"a", "b", "c"} {
		mustWrite(t, filepath.Join(inbox, n+".md"), cardHandoff("create-card", n+".md", mirrorCard+"v1 of "+n))
	}
	if r := runHandoff(t, x.env, "sync", "--manifest", w.manifest); r.code != 0 {
		t.Fatalf("first sync: %v", r)
	}
	x.first = latestReceipt(t, w.ws)
	x.oldTree = hashTree(t, x.dir)
	a, _ := os.ReadFile(filepath.Join(x.dir, "memory/cards/a.md"))
	mustWrite(t, filepath.Join(inbox, "a2.md"), cardHandoff("update-card", "a.md", mirrorCard+"v2 of a", "Expected card SHA256", sum(string(a))))
	mustWrite(t, filepath.Join(inbox, "d.md"), cardHandoff("create-card", "d.md", mirrorCard+"v1 of d"))
	if err := os.Remove(filepath.Join(w.ws, "memory/cards/c.md")); err != nil {
		t.Fatal(err)
	}

	stderr, err := interruptedSync(t, x.env, w.manifest, fp)
	x.stderr = stderr
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("interrupted sync: %v, want exit 1\n%s", err, x.stderr)
	}
	x.rc = latestReceipt(t, w.ws)
	if x.rc.RunID == x.first.RunID {
		t.Fatal("the interrupted run wrote no receipt")
	}
	x.m = receiptHost(t, x.rc, "canonical").Mirror
	if x.m == nil {
		t.Fatal("the interrupted run's receipt has no mirror")
	}
	x.newTree = hashTree(t, x.dir)
	x.wantCards = map[string]string{}
	for k, v := range hashTree(t, filepath.Join(w.ws, "memory/cards")) {
		x.wantCards["memory/cards/"+k] = v
	}
	return x
}

// TestMirrorInterruptedPublish: a publish stopped by SIGINT is reported
// as what it is. Invariant: the receipt never contradicts the host: the
// files it lists as sent hold their new bytes, the ones it lists as
// removed are gone, every other file is as it was, and its generation is
// the one MIRROR.json names. The error says the run was interrupted and
// that the next sync finishes the job, stderr says so (not "ledger:
// context canceled"), and doctor does not send the person to the
// Refusals.
func TestMirrorInterruptedPublish(t *testing.T) {
	for _, fp := range mirrorPausePoints {
		t.Run(fp, func(t *testing.T) { checkInterruptedPublish(t, interruptPublish(t, fp)) })
	}
}

// mirrorPausePoints are the publish's failpoints, in the order it passes
// them: the receipt must agree with the host wherever a run is stopped.
var mirrorPausePoints = []string{"mirror.opened", "mirror.tmp-written", "mirror.replaced", "mirror.sums-written", "mirror.removed"}

func checkInterruptedPublish(t *testing.T, x *interruptedMirror) {
	for _, want := range []string{"handoff: host canonical: mirror: interrupted: ", "the next sync finishes the job", "handoff: interrupted: "} {
		if !strings.Contains(x.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, x.stderr)
		}
	}
	if strings.Contains(x.stderr, "handoff: ledger:") {
		t.Errorf("stderr blames the ledger:\n%s", x.stderr)
	}
	// The receipt, the terminal and doctor say the same (issue 48, item
	// 6): the run was interrupted, its outcome failed, and it is said once.
	if !x.rc.Interrupted || x.rc.Outcome != receipts.OutcomeFailed || !strings.HasPrefix(x.rc.Error, "interrupted: ") {
		t.Errorf("receipt: interrupted %v, outcome %s, error %q; want interrupted, failed", x.rc.Interrupted, x.rc.Outcome, x.rc.Error)
	}
	if n := strings.Count(x.stderr, "handoff: interrupted: "); n != 1 {
		t.Errorf("stderr says interrupted %d times:\n%s", n, x.stderr)
	}
	m := x.m
	if m.Outcome != mirror.OutcomeError || !m.Interrupted || !strings.HasPrefix(m.Error, "interrupted: ") || !strings.Contains(m.Error, "the next sync finishes the job") {
		t.Fatalf("mirror in the receipt %+v; want an interrupted error", m)
	}
	var info mirror.Info
	data, err := os.ReadFile(filepath.Join(x.dir, "MIRROR.json"))
	if err == nil {
		err = json.Unmarshal(data, &info)
	}
	if err != nil {
		t.Fatalf("MIRROR.json: %v", err)
	}
	// MIRROR.json listed as sent is this run's, still incomplete; one not
	// listed is the last finished publish's.
	sentInfo := slices.Contains(m.Sent, "MIRROR.json")
	if info.Complete == sentInfo || info.Generation != m.Generation || (info.RunID == x.rc.RunID) != sentInfo {
		t.Errorf("MIRROR.json says run %s generation %d complete %v; the receipt: run %s generation %d, sent %q",
			info.RunID, info.Generation, info.Complete, x.rc.RunID, m.Generation, m.Sent)
	}
	for k, v := range x.newTree {
		switch {
		case strings.Contains(k, ".handoff-") || k == "MIRROR.json":
		case slices.Contains(m.Sent, k):
			if strings.HasPrefix(k, "memory/cards/") && v != x.wantCards[k] {
				t.Errorf("%s is listed as sent, yet does not hold the workspace's bytes", k)
			}
		case v != x.oldTree[k]:
			t.Errorf("%s changed on the host, yet the receipt does not list it as sent", k)
		}
	}
	for _, k := range m.Removed {
		if _, ok := x.newTree[k]; ok {
			t.Errorf("%s is listed as removed, yet is on the host", k)
		}
	}
	for k := range x.oldTree {
		if _, ok := x.newTree[k]; !ok && !slices.Contains(m.Removed, k) {
			t.Errorf("%s is gone from the host, yet the receipt does not list it as removed", k)
		}
	}
	if slices.Contains(m.Sent, "SHA256SUMS") {
		sums := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		sums.Dir = x.dir
		if out, err := sums.CombinedOutput(); err != nil {
			t.Errorf("SHA256SUMS is listed as sent, yet does not match the mirror: %v\n%s", err, out)
		}
	}

	dr := runHandoff(t, x.env, "doctor", "--manifest", x.w.manifest)
	if !strings.Contains(dr.stdout, "the last run was interrupted while publishing the mirror at "+x.dir) || strings.Contains(dr.stdout, "Refusals") {
		t.Errorf("doctor after an interrupted publish:\n%s", dr.stdout)
	}
	if !strings.Contains(dr.stdout, "last run "+x.rc.RunID+" was interrupted ") {
		t.Errorf("doctor does not say the last run was interrupted:\n%s", dr.stdout)
	}
}

// TestMirrorInterruptedPublishNextSync: the sync after an interrupted
// publish completes the mirror. Invariant: the next run finishes the job
// (MIRROR.json complete, sha256sum -c passes, the workspace's cards) and
// the generation never goes back.
func TestMirrorInterruptedPublishNextSync(t *testing.T) {
	for _, fp := range mirrorPausePoints {
		t.Run(fp, func(t *testing.T) {
			x := interruptPublish(t, fp)
			r := runHandoff(t, x.env, "sync", "--manifest", x.w.manifest, "--json")
			next := receiptHost(t, decodeReceipt(t, r), "canonical").Mirror
			if r.code != 0 || next == nil || next.Outcome != mirror.OutcomeOK {
				t.Fatalf("the sync after the interrupted one: %v", r)
			}
			(&mirrorWorld{world: x.w, dir: x.dir}).sumsOK(t)
			var info mirror.Info
			data, err := os.ReadFile(filepath.Join(x.dir, "MIRROR.json"))
			if err == nil {
				err = json.Unmarshal(data, &info)
			}
			if err != nil || !info.Complete || info.Generation != next.Generation {
				t.Errorf("MIRROR.json after the next sync: %s (%v); want complete, generation %d", data, err, next.Generation)
			}
			if next.Generation < x.m.Generation || next.Generation < 2 {
				t.Errorf("generation went from %d to %d; it never goes back, and this content is at least the second", x.m.Generation, next.Generation)
			}
		})
	}
}

// contHost is one writer host of TestContinuityOverOpenSSH: its tree
// under the test's directory, its clones and its mirror.
type contHost struct {
	name, root, mirror string
}

// newContHost is the host name with its tree at root/name and its
// mirror at root/name/mirror.
func newContHost(root, name string) contHost {
	return contHost{name: name, root: filepath.Join(root, name), mirror: filepath.Join(root, name, "mirror")}
}

func (h contHost) path(rel string) string { return filepath.Join(h.root, rel) }

// syncDirs makes a test's root directory and names, under it, a HOME
// (made too), a workspace and a manifest for the syncs the test runs.
func syncDirs(t *testing.T) (root, home, ws, manifest string) {
	t.Helper()
	root = t.TempDir()
	home = filepath.Join(root, "home")
	mustMkdir(t, home)
	return root, home, filepath.Join(root, "ws"), filepath.Join(root, "writers.yaml")
}

// treeText is every path under dir and every regular file's bytes, for
// a test that asserts a word is nowhere in a host's tree.
func treeText(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + "\n")
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

// interruptedSync runs sync with the failpoint fp set to pause, sends it
// SIGINT once it is paused there, and returns its stderr (--verbose,
// JSON lines) and how it exited. The test fails if the run never pauses
// within 60 s or does not end within 20 s of the signal.
func interruptedSync(t *testing.T, env []string, manifest, fp string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary(), "sync", "--manifest", manifest, "-v", "--log-format", "json")
	cmd.Env = append(slices.Clone(env), failpoint.Env+"="+fp+":pause")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(fp, "@")
	paused, read := make(chan struct{}), make(chan struct{})
	var lines []string
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if !once && strings.Contains(sc.Text(), "failpoint: paused at "+name) {
				once = true
				close(paused)
			}
		}
	}()
	select {
	case <-paused:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-read
		cmd.Wait()
		t.Fatalf("sync never paused at %s:\n%s", fp, strings.Join(lines, "\n"))
	}
	cmd.Process.Signal(os.Interrupt)
	exited := make(chan error, 1)
	go func() {
		<-read
		exited <- cmd.Wait()
	}()
	select {
	case err = <-exited:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("sync did not end within 20s of SIGINT")
	}
	return strings.Join(lines, "\n"), err
}

// needGit fails the test without git when the e2e tools are required, and
// skips it otherwise.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatalf("git is needed to make the clones: %v", err)
		}
		t.Skipf("git not installed: %v", err)
	}
}

// gitClone makes dir a git repository whose origin is url, with real git.
func gitClone(t *testing.T, dir, url string) {
	t.Helper()
	mustMkdir(t, dir)
	for _, args := range [][]string{{"init", "-q", dir}, {"-C", dir, "remote", "add", "origin", url}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
}

// TestContinuityOverOpenSSH is issue 33's acceptance over real OpenSSH:
// two writer hosts hold clones of one repository (one origin, spelt two
// ways). An agent's handoff with open questions on the laptop is pulled;
// after the sync, handoff context in the server's clone prints it, with
// what became of it. A handoff of a repository under the laptop's private
// discover root, and one of a repository the manifest keeps private,
// appear on no other host's mirror (checked on each host's file tree);
// repos/ appears only on the hosts that ask for it; sha256sum -c passes
// on every mirrored host; an idle sync sends nothing.
func TestContinuityOverOpenSSH(t *testing.T) {
	srvA := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	srvB := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	needGit(t)
	root, home, ws, manifestPath := syncDirs(t)
	laptop := newContHost(root, "laptop")
	server := newContHost(root, "server")
	ci := newContHost(root, "ci")

	gitClone(t, laptop.path("code/shop"), "git@github.com:Acme/shop.git")
	gitClone(t, server.path("src/shop"), "https://github.com/Acme/shop")
	gitClone(t, ci.path("work/shop"), "ssh://git@github.com/Acme/shop.git")
	gitClone(t, laptop.path("clients/bank"), "git@github.com:bank/portal.git")
	gitClone(t, server.path("src/internal"), "git@gitlab.example.com:ops/internal.git")
	for _, in := range []string{laptop.path("code/shop/.claude/memory-handoffs"), server.path("src/shop/.codex/memory-handoffs"),
		laptop.path("clients/bank/.claude/memory-handoffs"), server.path("src/internal/.claude/memory-handoffs"), ci.path("work/shop/.claude/memory-handoffs")} {
		mustMkdir(t, in)
	}

	const question, step = "Does the checkout need the new tax table?", "Run the checkout e2e against staging"
	shop := handoff("Type", "decision", "Title", "Checkout moves to the queue", "Summary", "The checkout now posts to the job queue; retries are the worker's.",
		"Durable facts", "- the queue is at-least-once", "Recommended memory action", "no-card",
		"Target document", "TOOLS.md", "Suggested document content", "- checkout: the job queue",
		"Open questions", "- "+question, "Next steps", "- "+step)
	bank := handoff("Type", "decision", "Title", "BANK-PRIVATE-TITLE", "Summary", "BANK-PRIVATE-SUMMARY",
		"Recommended memory action", "no-card", "Target document", "TOOLS.md", "Suggested document content", "- bank tool",
		"Open questions", "- BANK-PRIVATE-QUESTION")
	internal := handoff("Type", "decision", "Title", "INTERNAL-PRIVATE-TITLE", "Summary", "INTERNAL-PRIVATE-SUMMARY",
		"Recommended memory action", "no-card", "Target document", "TOOLS.md", "Suggested document content", "- internal tool")
	mustWrite(t, laptop.path("code/shop/.claude/memory-handoffs/2026-12-01-1000-checkout.md"), shop)
	mustWrite(t, laptop.path("clients/bank/.claude/memory-handoffs/2026-12-01-1100-bank.md"), bank)
	mustWrite(t, server.path("src/internal/.claude/memory-handoffs/2026-12-01-1200-internal.md"), internal)
	for _, h := range []contHost{laptop, server, ci} {
		mustMkdir(t, h.root)
	}

	writeManifest(t, manifestPath, ws,
		hostYAML("laptop", sshBlock(srvA, ""), nil, nil,
			fmt.Sprintf("discover: [{root: %s, max_depth: 1}, {root: %s, max_depth: 1, private: true}]", laptop.path("code"), laptop.path("clients")),
			fmt.Sprintf("mirror: {path: %s, include: [cards, documents, repos]}", laptop.mirror)),
		hostYAML("server", sshBlock(srvB, ""), nil, []string{server.path("src")},
			fmt.Sprintf("mirror: {path: %s, include: [documents, repos]}", server.mirror)),
		hostYAML("ci", sshBlock(srvB, ""), nil, []string{ci.path("work")},
			fmt.Sprintf("mirror: {path: %s}", ci.mirror)))
	// The manifest keeps the server's internal repository private to it.
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, manifestPath, string(data)+"repos:\n  - origins: [https://gitlab.example.com/ops/internal]\n    private: true\n")
	env := childEnv(home)
	if r := runHandoff(t, env, "manifest", "check", manifestPath); r.code != 0 {
		t.Fatalf("manifest check: %v", r)
	}

	r := runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
	rc := decodeReceipt(t, r)
	// The three append to TOOLS.md. The first to arrive creates it; the
	// laptop's private bank note, coming after a public one, waits in
	// review (private-append) so that the shared TOOLS.md keeps
	// flowing. The server's internal note is private by its origin,
	// which the run learns only after its ingest: it is applied, and
	// withheld at publish.
	if r.code != 0 || rc.Counts.Pulled != 3 || rc.Counts.Routed+rc.Counts.Review != 3 || rc.Counts.Review > 1 {
		t.Fatalf("sync: %v\n%+v\n%+v", r, rc.Counts, rc.Handoffs)
	}
	for _, h := range rc.Handoffs {
		if h.Result == receipts.ResultReview && (h.Reason != ingest.ReasonPrivateAppend || !strings.Contains(h.Name, "bank")) {
			t.Errorf("%s waits in review (%s); only the private bank note may, as private-append", h.Name, h.Reason)
		}
	}
	for _, name := range []string{"laptop", "server", "ci"} {
		if m := receiptHost(t, rc, name).Mirror; m == nil || m.Outcome != mirror.OutcomeOK {
			t.Fatalf("%s: mirror %+v", name, m)
		}
	}
	for _, in := range receiptHost(t, rc, "laptop").Inboxes {
		if strings.Contains(in.Path, "code/shop") && (in.Repo == nil || in.Repo.Origin != "github.com/acme/shop" || in.Repo.Path != laptop.path("code/shop")) {
			t.Errorf("the laptop's shop inbox: repo %+v", in.Repo)
		}
	}

	// The server's agent starts a session in its clone, in a subdirectory.
	sub := server.path("src/shop/cmd/checkout")
	mustMkdir(t, sub)
	cmd := exec.Command(binary(), "context", "--mirror", server.mirror)
	cmd.Dir, cmd.Env = sub, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("handoff context on the server: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"# Recent handoffs: shop", "## Checkout moves to the queue", "from laptop (.claude) · decision",
		"- " + question, "- " + step, "> - the queue is at-least-once", "- became: routed: appended to TOOLS.md",
		"- hosts: laptop", "2026-12-01-1000-checkout.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("handoff context on the server lacks %q:\n%s", want, out)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("handoff context wrote to stderr: %s", stderr.String())
	}
	for _, bad := range []string{"BANK-PRIVATE", "INTERNAL-PRIVATE"} {
		if strings.Contains(out, bad) {
			t.Errorf("handoff context on the server shows %s", bad)
		}
	}

	// Privacy, on each host's file tree: nothing of the laptop's private
	// root reaches the server or ci, nothing of the server's private
	// repository reaches the laptop or ci; each host keeps its own.
	leaks := map[string][]string{
		// A private handoff's document append ("- bank tool" in TOOLS.md)
		// counts: private means everything it wrote (docs/manifest.md).
		"bank":     {"BANK-PRIVATE", "bank/portal", "clients/bank", "2026-12-01-1100-bank", "- bank tool"},
		"internal": {"INTERNAL-PRIVATE", "ops/internal", "src/internal", "2026-12-01-1200-internal", "- internal tool"},
	}
	for _, tc := range []struct {
		h        contHost
		own, not string
	}{{laptop, "bank", "internal"}, {server, "internal", "bank"}, {ci, "", "bank"}, {ci, "", "internal"}} {
		text := treeText(tc.h.mirror)
		for _, s := range leaks[tc.not] {
			if strings.Contains(text, s) {
				t.Errorf("%s's mirror holds %q of the %s repository, private to another host", tc.h.name, s, tc.not)
			}
		}
		if tc.own != "" && !strings.Contains(text, leaks[tc.own][0]) {
			t.Errorf("%s's mirror lacks its own private %s repository", tc.h.name, tc.own)
		}
	}

	// repos/ only where asked; sha256sum -c everywhere.
	for _, h := range []contHost{laptop, server, ci} {
		_, err := os.Lstat(filepath.Join(h.mirror, "repos"))
		if asks := h.name != "ci"; asks != (err == nil) {
			t.Errorf("%s: repos/ present %v; it asks for it: %v", h.name, err == nil, asks)
		}
		c := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		c.Dir = h.mirror
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c on %s: %v\n%s", h.name, err, out)
		}
		if guide, _ := os.ReadFile(filepath.Join(h.mirror, "HANDOFF.md")); strings.Contains(string(guide), "`handoff context`") != (h.name != "ci") {
			t.Errorf("%s: HANDOFF.md names handoff context: %v", h.name, !(h.name != "ci"))
		}
	}
	if idx, _ := os.ReadFile(filepath.Join(server.mirror, "repos/INDEX.md")); !strings.Contains(string(idx), "| github.com/acme/shop | [shop](shop/RECENT.md) | laptop |") {
		t.Errorf("the server's INDEX.md:\n%s", idx)
	}

	// The next sync: the server's agent answers and carries the thread on;
	// the laptop's context then shows both, together.
	answer := handoff("Type", "decision", "Title", "Tax table checked", "Summary", "The checkout needs the new tax table; added.",
		"Recommended memory action", "no-card", "Target document", "TOOLS.md", "Suggested document content", "- tax table: v2",
		"Continues", "2026-12-01-1000-checkout.md", "Next steps", "- tag the release")
	mustWrite(t, server.path("src/shop/.codex/memory-handoffs/2026-12-02-0900-tax.md"), answer)
	if r := runHandoff(t, env, "sync", "--manifest", manifestPath); r.code != 0 {
		t.Fatalf("second sync: %v", r)
	}
	cmd = exec.Command(binary(), "context", "--mirror", laptop.mirror)
	cmd.Dir, cmd.Env = laptop.path("code/shop"), env
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("handoff context on the laptop: %v", err)
	}
	for _, want := range []string{"## Thread: Tax table checked (2 handoffs, newest first)", "### Tax table checked", "from server (.codex)",
		"- continues: `2026-12-01-1000-checkout.md`", "### Checkout moves to the queue", "- hosts: laptop, server"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("handoff context on the laptop lacks %q:\n%s", want, got)
		}
	}
	for _, h := range []contHost{laptop, server, ci} {
		c := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		c.Dir = h.mirror
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c on %s after the second sync: %v\n%s", h.name, err, out)
		}
	}

	// Idle: nothing sent to any host.
	r = runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
	rc = decodeReceipt(t, r)
	for _, name := range []string{"laptop", "server", "ci"} {
		if m := receiptHost(t, rc, name).Mirror; m == nil || m.Outcome != mirror.OutcomeOK || len(m.Sent)+len(m.Removed) != 0 {
			t.Errorf("idle sync, %s: mirror %+v", name, m)
		}
	}
}
