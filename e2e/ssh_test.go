package e2e

// End-to-end tests against real OpenSSH servers
// (internal/testkit/sshdtest). Each server serves the real file system, so
// a "remote" host's tree is a local temporary directory that the binary
// reaches over SFTP by absolute path.
// The child's HOME is a fresh directory, so no ~/.ssh/config, ssh-agent or
// known_hosts of the person running the tests takes part.

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/receipts"
)

// ---------------------------------------------------------------------------
// Helpers.

// sshRun is one finished handoff process.
type sshRun struct {
	code           int // -9 when killed by a signal
	stdout, stderr string
	elapsed        time.Duration
}

func (r sshRun) String() string {
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// childEnv is the test's environment with HOME replaced by home, no
// ssh-agent, no XDG config and no armed failpoint, then extra.
func childEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "SSH_AUTH_SOCK", "XDG_CONFIG_HOME", failpoint.Env:
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	return append(env, extra...)
}

// runHandoff runs the built binary with env and args and waits for it.
func runHandoff(t *testing.T, env []string, args ...string) sshRun {
	t.Helper()
	cmd := exec.Command(binary(), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := sshRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if r.code == -1 {
			r.code = -9
		}
	default:
		t.Fatalf("run handoff: %v", err)
	}
	return r
}

// decodeReceipt strictly decodes a receipt printed by --json.
func decodeReceipt(t *testing.T, r sshRun) *receipts.Receipt {
	t.Helper()
	rc, err := receipts.Decode([]byte(r.stdout))
	if err != nil {
		t.Fatalf("--json output is not a receipt: %v\n%s", err, r)
	}
	return rc
}

func latestReceipt(t *testing.T, ws string) *receipts.Receipt {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ws, ".handoff/receipts/latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := receipts.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// sshBlock is the manifest's ssh: block for srv, with extra flow-map
// entries appended (e.g. "connect_timeout: 2s").
func sshBlock(srv *sshdtest.Server, knownHosts string, extra ...string) string {
	if knownHosts == "" {
		knownHosts = srv.KnownHosts
	}
	fields := []string{
		"host: " + srv.Host, fmt.Sprintf("port: %d", srv.Port), "user: " + srv.User,
		"identity_file: " + srv.IdentityFile, "known_hosts: " + knownHosts,
	}
	return "{" + strings.Join(append(fields, extra...), ", ") + "}"
}

// hostYAML is one entry of a manifest's hosts list. sshYAML is empty for a
// local host; settings holds further "key: value" lines.
func hostYAML(name, sshYAML string, inboxes []string, roots []string, settings ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - name: %s\n", name)
	if sshYAML == "" {
		b.WriteString("    transport: local\n")
	} else {
		b.WriteString("    transport: ssh\n")
		fmt.Fprintf(&b, "    ssh: %s\n", sshYAML)
	}
	if len(inboxes) > 0 {
		fmt.Fprintf(&b, "    inboxes: [%s]\n", strings.Join(inboxes, ", "))
	}
	if len(roots) > 0 {
		var rs []string
		for _, r := range roots {
			rs = append(rs, fmt.Sprintf("{root: %s, max_depth: 2}", r))
		}
		fmt.Fprintf(&b, "    discover: [%s]\n", strings.Join(rs, ", "))
	}
	for _, s := range settings {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}

// writeManifest writes a manifest of hosts syncing into ws, and makes ws a
// workspace (handoff init).
func writeManifest(t *testing.T, path, ws string, hosts ...string) {
	t.Helper()
	mustWrite(t, path, fmt.Sprintf("version: 1\nworkspace: %s\ndefaults: {settle: 0s}\nhosts:\n%s", ws, strings.Join(hosts, "")))
	initWorkspace(t, ws)
}

// hashTree maps every path under root (relative) to its type and content:
// the bytes' SHA-256 for files, the target for symlinks. Two equal maps
// mean the tree was not touched.
func hashTree(t *testing.T, root string) map[string]string { return testenv.Tree(t, root) }

func assertTreeUnchanged(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	testenv.SameTree(t, what, before, after)
}

func sha12(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:12]
}

// processedName is where SPEC step 4 archives a handoff that parses.
func processedName(name, content string) string {
	return "processed/" + strings.TrimSuffix(name, ".md") + "." + sha12(content) + ".md"
}

// malformedName is where SPEC step 4 archives a handoff that does not parse.
func malformedName(name, content string) string {
	return "malformed/" + strings.TrimSuffix(name, ".md") + "." + sha12(content) + ".md"
}

func handoffKey(host, inbox, name string) string { return host + "|" + inbox + "|" + name }

// indexHandoffs maps host|inbox|name to the receipt entry, failing on an
// entry listed twice.
func indexHandoffs(t *testing.T, rc *receipts.Receipt) map[string]receipts.Handoff {
	t.Helper()
	got := map[string]receipts.Handoff{}
	for _, h := range rc.Handoffs {
		k := handoffKey(h.Host, h.Inbox, h.Name)
		if _, dup := got[k]; dup {
			t.Errorf("receipt lists %s twice", k)
		}
		got[k] = h
	}
	return got
}

func receiptHost(t *testing.T, rc *receipts.Receipt, name string) receipts.Host {
	t.Helper()
	for _, h := range rc.Hosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("receipt has no host %s: %+v", name, rc.Hosts)
	return receipts.Host{}
}

func countIn(t *testing.T, file, marker string) int {
	t.Helper()
	b, _ := os.ReadFile(file)
	return strings.Count(string(b), marker)
}

// ---------------------------------------------------------------------------
// Test 1.

// sshTree is one host's file tree: a declared inbox outside any discovery
// root, and a discovery root holding one repository with an inbox.
type sshTree struct {
	host      string
	root      string
	inbox     string                       // declared
	repos     string                       // discovery root
	repo      string                       // the repository
	repoInbox string                       // discovered
	files     map[string]map[string]string // inbox -> name -> content
	outside   string                       // the file the symlinks point at
}

func newSSHTree(t *testing.T, host string) *sshTree {
	t.Helper()
	root := t.TempDir()
	tr := &sshTree{
		host: host, root: root,
		inbox:   filepath.Join(root, "notes/.claude/memory-handoffs"),
		repos:   filepath.Join(root, "repos"),
		repo:    filepath.Join(root, "repos/app"),
		outside: filepath.Join(root, "outside-target.md"),
		files:   map[string]map[string]string{},
	}
	tr.repoInbox = filepath.Join(tr.repo, ".codex/memory-handoffs")
	mustMkdir(t, tr.inbox)
	mustMkdir(t, tr.repoInbox)
	// A valid handoff that would be routed if a symlink to it were followed.
	mustWrite(t, tr.outside, docHandoff("TOOLS.md", "- marker-followed-symlink-"+host))
	return tr
}

// sshMixedNames are the files fill writes into every inbox, with the result
// each must get ("dup" is routed on exactly one host, duplicate on the rest).
var sshMixedNames = map[string]string{
	"card.md": "promoted", "doc.md": "routed", "rev.md": "review", "bad.md": "malformed",
	"dup.md": "dup", "link.md": "rejected", "big.md": "rejected",
}

// fill writes one handoff of every outcome into inbox. kind tells the
// declared inbox ("inbox") from the discovered one ("repo").
func (tr *sshTree) fill(t *testing.T, inbox, kind string) {
	t.Helper()
	id := tr.host + "-" + kind
	files := map[string]string{
		"card.md": cardHandoff("create-card", id+".md", "body "+id),
		"doc.md":  docHandoff("TOOLS.md", "- marker-"+id),
		"rev.md":  docHandoff("../outside.md", "- review "+id),
		"bad.md":  "not a handoff: " + id + "\n",
		// The same bytes on every host.
		"dup.md": docHandoff("rules/dup.md", "- marker-dup-"+kind),
		// Over the 4KiB max_file_size, otherwise valid.
		"big.md": docHandoff("TOOLS.md", "- marker-big-"+id+" "+strings.Repeat("x", 5000)),
	}
	for name, content := range files {
		mustWrite(t, filepath.Join(inbox, name), content)
	}
	if err := os.Symlink(tr.outside, filepath.Join(inbox, "link.md")); err != nil {
		t.Fatal(err)
	}
	tr.files[inbox] = files
}

// gitTrack makes the repository a git repository whose index tracks one
// handoff-looking file in its inbox, committed; it returns its path and bytes.
func (tr *sshTree) gitTrack(t *testing.T) (string, string) {
	t.Helper()
	p := filepath.Join(tr.repoInbox, "tracked.md")
	content := docHandoff("TOOLS.md", "- marker-tracked-"+tr.host)
	mustWrite(t, p, content)
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", ".codex/memory-handoffs/tracked.md"},
		{"-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "track a handoff"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = tr.repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return p, content
}

// TestSSHThreeHostsAndLocal pulls three OpenSSH hosts (a plain account, a
// ForceCommand internal-sftp account, an authorized_keys restrict account)
// and the local host in one run, each with a declared and a discovered
// inbox holding one handoff of every outcome.
//
// Invariants: the run exits 0 with outcome ok and status ingested; every
// file appears once in the receipt with its host, result and archive name;
// each remote copy is renamed exactly as SPEC step 4 says (processed/ or
// malformed/<stem>.<sha12>.md with the same bytes; rejected files unread
// into malformed/<name>; symlinks stay symlinks and are never followed);
// bytes shared by several hosts are applied once; a git-tracked file is
// counted, never pulled, never moved; a second run has nothing to do.
func TestSSHThreeHostsAndLocal(t *testing.T) {
	servers := map[string]*sshdtest.Server{
		"a": sshdtest.StartOpenSSH(t, sshdtest.Options{}),
		"b": sshdtest.StartOpenSSH(t, sshdtest.Options{SFTPOnly: true}),
		"c": sshdtest.StartOpenSSH(t, sshdtest.Options{Restrict: true}),
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	mustMkdir(t, home)
	ws := filepath.Join(dir, "ws")
	manifestPath := filepath.Join(dir, "writers.yaml")

	names := []string{"a", "b", "c", "local"}
	trees := map[string]*sshTree{}
	var hosts []string
	for _, n := range names {
		tr := newSSHTree(t, n)
		trees[n] = tr
		tr.fill(t, tr.inbox, "inbox")
		tr.fill(t, tr.repoInbox, "repo")
		var block string
		if srv := servers[n]; srv != nil {
			block = sshBlock(srv, "")
		}
		hosts = append(hosts, hostYAML(n, block, []string{tr.inbox}, []string{tr.repos}, "max_file_size: 4KiB"))
	}
	// The SFTP-only host's repository tracks one file in its inbox.
	trackedPath, trackedContent := trees["b"].gitTrack(t)
	writeManifest(t, manifestPath, ws, hosts...)
	mustWrite(t, filepath.Join(ws, "TOOLS.md"), "# Tools\n")

	outsideBefore := map[string]string{}
	for n, tr := range trees {
		outsideBefore[n] = hashTree(t, tr.outside)["."]
	}

	env := childEnv(home)
	r := runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
	if r.code != 0 {
		t.Fatalf("sync: %s", r)
	}
	rc := decodeReceipt(t, r)
	if rc.Outcome != receipts.OutcomeOK || rc.Status != receipts.StatusIngested || rc.Mode != receipts.ModeApply {
		t.Errorf("outcome %q status %q mode %q, want ok/ingested/apply", rc.Outcome, rc.Status, rc.Mode)
	}

	// Hosts: all four ok; every inbox ok; only b's repository tracks a file.
	if len(rc.Hosts) != 4 {
		t.Errorf("receipt lists %d hosts, want 4", len(rc.Hosts))
	}
	for _, n := range names {
		h := receiptHost(t, rc, n)
		wantTransport := "ssh"
		if n == "local" {
			wantTransport = "local"
		}
		if h.Outcome != "ok" || h.Error != "" || h.Transport != wantTransport {
			t.Errorf("host %s: outcome %q transport %q error %q", n, h.Outcome, h.Transport, h.Error)
		}
		tr := trees[n]
		seen := map[string]bool{}
		for _, in := range h.Inboxes {
			seen[in.Path] = true
			wantTracked := 0
			if n == "b" && in.Path == tr.repoInbox {
				wantTracked = 1
			}
			if in.State != "ok" || in.Tracked != wantTracked {
				t.Errorf("host %s inbox %s: state %q tracked %d, want ok and %d", n, in.Path, in.State, in.Tracked, wantTracked)
			}
		}
		if !seen[tr.inbox] || !seen[tr.repoInbox] || len(h.Inboxes) != 2 {
			t.Errorf("host %s inboxes %+v, want exactly %s and %s", n, h.Inboxes, tr.inbox, tr.repoInbox)
		}
	}

	// Handoffs: each file once, with its host, result and archive name; the
	// copy on disk is where archived_as says, with the bytes that were read.
	got := indexHandoffs(t, rc)
	if want := len(names) * 2 * len(sshMixedNames); len(got) != want {
		t.Errorf("receipt lists %d handoffs, want %d", len(got), want)
	}
	dupRouted := map[string][]string{} // kind -> hosts that applied dup.md
	for _, n := range names {
		tr := trees[n]
		for kind, inbox := range map[string]string{"inbox": tr.inbox, "repo": tr.repoInbox} {
			for name, want := range sshMixedNames {
				k := handoffKey(n, inbox, name)
				h, ok := got[k]
				if !ok {
					t.Errorf("receipt lacks %s", k)
					continue
				}
				content := tr.files[inbox][name]
				var wantAs string
				switch want {
				case "rejected":
					wantAs = "malformed/" + name
				case "malformed":
					wantAs = malformedName(name, content)
				default:
					wantAs = processedName(name, content)
				}
				switch {
				case want == "dup" && h.Result == "routed":
					dupRouted[kind] = append(dupRouted[kind], n)
				case want == "dup" && h.Result == "duplicate":
				case want == "dup":
					t.Errorf("%s: result %q, want routed on one host and duplicate on the others", k, h.Result)
				case h.Result != want:
					t.Errorf("%s: result %q (reason %q), want %q", k, h.Result, h.Reason, want)
				}
				if h.ArchivedAs != wantAs {
					t.Errorf("%s: archived_as %q, want %q", k, h.ArchivedAs, wantAs)
				}
				switch name {
				case "rev.md":
					if h.Reason != "unsafe-target" {
						t.Errorf("%s: reason %q, want unsafe-target", k, h.Reason)
					}
				case "link.md":
					if h.Reason != "symlink" {
						t.Errorf("%s: reason %q, want symlink", k, h.Reason)
					}
				case "big.md":
					if h.Reason != "oversize" {
						t.Errorf("%s: reason %q, want oversize", k, h.Reason)
					}
				case "card.md":
					if h.Target != "memory/cards/"+n+"-"+kind+".md" || h.Action != "create-card" {
						t.Errorf("%s: target %q action %q", k, h.Target, h.Action)
					}
				}
				if want == "rejected" && h.SHA256 != "" {
					t.Errorf("%s: rejected but hashed (%s): it must never be read", k, h.SHA256)
				}
				if want != "rejected" && (h.SHA256 != sum(content) || h.Size != int64(len(content))) {
					t.Errorf("%s: sha256 %s size %d, want %s %d", k, h.SHA256, h.Size, sum(content), len(content))
				}

				// On disk: the source name is gone, the archive holds it.
				if _, err := os.Lstat(filepath.Join(inbox, name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s/%s still in its inbox (%v)", inbox, name, err)
				}
				arch := filepath.Join(inbox, wantAs)
				if name == "link.md" {
					fi, err := os.Lstat(arch)
					if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
						t.Errorf("%s: want the symlink itself moved there (%v)", arch, err)
					} else if target, _ := os.Readlink(arch); target != tr.outside {
						t.Errorf("%s points at %q, want %q", arch, target, tr.outside)
					}
					continue
				}
				if b, err := os.ReadFile(arch); err != nil || string(b) != content {
					t.Errorf("%s: archived copy missing or changed (%v)", arch, err)
				}
			}
		}
		if after := hashTree(t, tr.outside)["."]; after != outsideBefore[n] {
			t.Errorf("host %s: the symlink target changed", n)
		}
	}
	for _, kind := range []string{"inbox", "repo"} {
		if len(dupRouted[kind]) != 1 {
			t.Errorf("dup.md (%s) applied on hosts %v, want exactly one", kind, dupRouted[kind])
		}
	}
	want := receipts.Counts{Pulled: 40, Promoted: 8, Routed: 10, Review: 8, Malformed: 8, Duplicate: 6, Rejected: 16}
	if rc.Counts != want {
		t.Errorf("counts %+v, want %+v", rc.Counts, want)
	}

	// The workspace: each card once, each marker once, review drafts kept,
	// nothing from a symlink, an oversize file or a tracked file.
	for _, n := range names {
		for _, kind := range []string{"inbox", "repo"} {
			id := n + "-" + kind
			if _, err := os.Stat(filepath.Join(ws, "memory/cards", id+".md")); err != nil {
				t.Errorf("card %s.md not promoted: %v", id, err)
			}
			if c := countIn(t, filepath.Join(ws, "TOOLS.md"), "marker-"+id+"\n"); c != 1 {
				t.Errorf("TOOLS.md holds marker-%s %d times, want 1", id, c)
			}
			rev := trees[n].files[map[string]string{"inbox": trees[n].inbox, "repo": trees[n].repoInbox}[kind]]["rev.md"]
			if b, err := os.ReadFile(filepath.Join(ws, ".handoff/review", "rev."+sha12(rev)+".md")); err != nil || string(b) != rev {
				t.Errorf("review draft for %s missing or changed: %v", id, err)
			}
		}
		for _, m := range []string{"marker-followed-symlink-" + n, "marker-big-" + n + "-", "marker-tracked-" + n} {
			if c := countIn(t, filepath.Join(ws, "TOOLS.md"), m); c != 0 {
				t.Errorf("TOOLS.md holds %s: a file that must never be read was applied", m)
			}
		}
	}
	for _, m := range []string{"marker-dup-inbox", "marker-dup-repo"} {
		if c := countIn(t, filepath.Join(ws, "rules/dup.md"), m); c != 1 {
			t.Errorf("rules/dup.md holds %s %d times, want 1", m, c)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "outside.md")); err == nil {
		t.Errorf("a file was written outside the workspace")
	}

	// The tracked file: same path, same bytes, no archived copy.
	checkTracked := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(trackedPath); err != nil || string(b) != trackedContent {
			t.Errorf("%s: tracked file moved or changed (%v)", when, err)
		}
		for _, sub := range []string{"processed", "malformed"} {
			m, _ := filepath.Glob(filepath.Join(trees["b"].repoInbox, sub, "tracked*"))
			if len(m) > 0 {
				t.Errorf("%s: tracked file was archived: %v", when, m)
			}
		}
		for _, h := range rc.Handoffs {
			if h.Name == "tracked.md" {
				t.Errorf("%s: tracked file listed in the receipt: %+v", when, h)
			}
		}
	}
	checkTracked("first run")

	// A second run finds nothing new.
	trees2 := map[string]map[string]string{}
	for n, tr := range trees {
		trees2[n] = hashTree(t, tr.root)
	}
	r2 := runHandoff(t, env, "sync", "--manifest", manifestPath)
	if r2.code != 0 || !slices.Contains(strings.Split(r2.stdout, "\n"), "NO_UPDATES") {
		t.Fatalf("second sync: want exit 0 and NO_UPDATES: %s", r2)
	}
	rc2 := latestReceipt(t, ws)
	if rc2.RunID == rc.RunID || rc2.Status != receipts.StatusEmpty || rc2.Outcome != receipts.OutcomeOK {
		t.Errorf("second receipt %s: status %q outcome %q, want empty/ok", rc2.RunID, rc2.Status, rc2.Outcome)
	}
	rc = rc2
	checkTracked("second run")
	for n, tr := range trees {
		assertTreeUnchanged(t, "host "+n+" on the second run", trees2[n], hashTree(t, tr.root))
	}
	t.Logf("first sync %v, second %v", r.elapsed.Round(time.Millisecond), r2.elapsed.Round(time.Millisecond))
}

// ---------------------------------------------------------------------------
// Test 2.

// TestSSHProxyJumpAlias reaches an OpenSSH target named only by an
// ~/.ssh/config alias whose ProxyJump is another alias, an embedded SSH
// server that allows forwarding.
//
// Invariants: ssh_config's HostName, Port, User, IdentityFile,
// UserKnownHostsFile and ProxyJump apply to a manifest that says only
// `host: target`; the connection goes through the jump host (its accept
// count rises); the handoff is ingested and archived on the target.
func TestSSHProxyJumpAlias(t *testing.T) {
	target := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	jump := sshdtest.StartEmbedded(t, sshdtest.Options{Forwarding: true})
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	manifestPath := filepath.Join(dir, "writers.yaml")
	inbox := filepath.Join(dir, "remote/notes/.claude/memory-handoffs")
	content := cardHandoff("create-card", "jumped.md", "came through the jump host")
	mustWrite(t, filepath.Join(inbox, "jumped.md"), content)

	cfg := fmt.Sprintf(`Host target
    HostName 127.0.0.1
    Port %d
    User %s
    IdentityFile %s
    UserKnownHostsFile %s
    ProxyJump jump

Host jump
    HostName 127.0.0.1
    Port %d
    User %s
    IdentityFile %s
    UserKnownHostsFile %s
`, target.Port, target.User, target.IdentityFile, target.KnownHosts,
		jump.Port, jump.User, jump.IdentityFile, jump.KnownHosts)
	mustMkdir(t, filepath.Join(home, ".ssh"))
	if err := os.WriteFile(filepath.Join(home, ".ssh/config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifestPath, ws, hostYAML("far", "{host: target}", []string{inbox}, nil))

	before := jump.Accepted()
	r := runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--json")
	if r.code != 0 {
		t.Fatalf("sync through the jump host: %s", r)
	}
	rc := decodeReceipt(t, r)
	if rc.Outcome != receipts.OutcomeOK || rc.Status != receipts.StatusIngested {
		t.Errorf("outcome %q status %q", rc.Outcome, rc.Status)
	}
	if n := jump.Accepted() - before; n < 1 {
		t.Errorf("the jump host accepted %d connections: ProxyJump was not used", n)
	}
	got := indexHandoffs(t, rc)
	h, ok := got[handoffKey("far", inbox, "jumped.md")]
	if !ok || len(got) != 1 || h.Result != "promoted" || h.ArchivedAs != processedName("jumped.md", content) {
		t.Fatalf("receipt handoffs %+v, want jumped.md promoted and archived", rc.Handoffs)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory/cards/jumped.md")); err != nil {
		t.Errorf("card not promoted: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(inbox, h.ArchivedAs)); err != nil || string(b) != content {
		t.Errorf("archived copy: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Test 3.

// TestSSHHostFailuresArePartial runs a good OpenSSH host next to one broken
// host at a time: a changed host key, a refused port, and a server that
// accepts TCP and never speaks.
//
// Invariants: a broken host never stops the good one (its handoffs are
// ingested and archived); the run's outcome is partial and it exits 1; the
// broken host's error is recorded (for a changed key, with the fingerprint
// the server presented) and its inbox is untouched; a silent server cannot
// make the run hang (connect_timeout and the host timeout bound it).
func TestSSHHostFailuresArePartial(t *testing.T) {
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{})

	// A known_hosts that trusts some other ed25519 key for srv's address:
	// exactly what a reinstalled (or impersonated) server looks like.
	other, _ := sshdtest.NewEd25519(t)
	changedKH := sshdtest.WriteKnownHosts(t, srv.KnownHostsLine(other.PublicKey()))
	presented := ssh.FingerprintSHA256(srv.HostKeys[0]) // ed25519, the only type known_hosts names

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	// A server that accepts and never says a word.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	silentPort := silent.Addr().(*net.TCPAddr).Port

	plain := func(port int, extra ...string) string {
		fields := []string{"host: 127.0.0.1", fmt.Sprintf("port: %d", port), "user: " + srv.User,
			"identity_file: " + srv.IdentityFile, "known_hosts: " + srv.KnownHosts}
		return "{" + strings.Join(append(fields, extra...), ", ") + "}"
	}
	cases := []struct {
		name     string
		ssh      string
		settings []string
		wantErr  []string
	}{
		{name: "changed-host-key", ssh: sshBlock(srv, changedKH), wantErr: []string{presented, "changed"}},
		{name: "refused", ssh: plain(refusedPort), wantErr: []string{"refused"}},
		{name: "silent", ssh: plain(silentPort, "connect_timeout: 2s"), settings: []string{"timeout: 5s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			mustMkdir(t, home)
			ws := filepath.Join(dir, "ws")
			manifestPath := filepath.Join(dir, "writers.yaml")
			goodInbox := filepath.Join(dir, "good/notes/.claude/memory-handoffs")
			badInbox := filepath.Join(dir, "bad/notes/.claude/memory-handoffs")
			good := map[string]string{
				"card.md": cardHandoff("create-card", "good-"+tc.name+".md", "ok"),
				"doc.md":  docHandoff("TOOLS.md", "- marker-good-"+tc.name),
			}
			for n, c := range good {
				mustWrite(t, filepath.Join(goodInbox, n), c)
			}
			mustWrite(t, filepath.Join(badInbox, "card.md"), cardHandoff("create-card", "bad-"+tc.name+".md", "never"))
			mustWrite(t, filepath.Join(badInbox, "doc.md"), docHandoff("TOOLS.md", "- marker-bad-"+tc.name))
			writeManifest(t, manifestPath, ws,
				hostYAML("good", sshBlock(srv, ""), []string{goodInbox}, nil),
				hostYAML("bad", tc.ssh, []string{badInbox}, nil, tc.settings...))
			badBefore := hashTree(t, filepath.Dir(filepath.Dir(badInbox)))

			r := runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--json")
			if r.elapsed > 30*time.Second {
				t.Errorf("sync took %v; a broken host must not hold the run up", r.elapsed)
			}
			if r.code != 1 {
				t.Fatalf("want exit 1 (partial): %s", r)
			}
			rc := decodeReceipt(t, r)
			if rc.Outcome != receipts.OutcomePartial || rc.Status != receipts.StatusIngested {
				t.Errorf("outcome %q status %q, want partial/ingested", rc.Outcome, rc.Status)
			}
			bad := receiptHost(t, rc, "bad")
			if bad.Outcome != "error" || bad.Error == "" {
				t.Errorf("bad host: outcome %q error %q, want an error", bad.Outcome, bad.Error)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(bad.Error, w) {
					t.Errorf("bad host's error %q lacks %q", bad.Error, w)
				}
			}
			t.Logf("%s: %v; error: %s", tc.name, r.elapsed.Round(time.Millisecond), bad.Error)
			if g := receiptHost(t, rc, "good"); g.Outcome != "ok" {
				t.Errorf("good host: outcome %q error %q", g.Outcome, g.Error)
			}
			got := indexHandoffs(t, rc)
			if len(got) != 2 {
				t.Errorf("receipt lists %d handoffs, want the good host's 2: %+v", len(got), rc.Handoffs)
			}
			for n, c := range good {
				h := got[handoffKey("good", goodInbox, n)]
				want := map[string]string{"card.md": "promoted", "doc.md": "routed"}[n]
				if h.Result != want || h.ArchivedAs != processedName(n, c) {
					t.Errorf("good %s: %+v, want %s archived as %s", n, h, want, processedName(n, c))
				}
				if b, err := os.ReadFile(filepath.Join(goodInbox, processedName(n, c))); err != nil || string(b) != c {
					t.Errorf("good %s not archived: %v", n, err)
				}
			}
			if c := countIn(t, filepath.Join(ws, "TOOLS.md"), "marker-good-"+tc.name); c != 1 {
				t.Errorf("good marker applied %d times", c)
			}
			assertTreeUnchanged(t, "bad host's tree", badBefore, hashTree(t, filepath.Dir(filepath.Dir(badInbox))))
		})
	}
}

// ---------------------------------------------------------------------------
// Test 4.

// sshWorld is newWorld's canonical fixture pulled over SSH instead: the
// same directories, served by srv.
func sshWorld(t *testing.T, srv *sshdtest.Server) (*world, string) {
	t.Helper()
	w := newWorld(t)
	home := filepath.Join(w.dir, "home")
	mustMkdir(t, home)
	writeManifest(t, w.manifest, w.ws, hostYAML("laptop", sshBlock(srv, ""), nil, []string{filepath.Join(w.dir, "repos")}))
	return w, home
}

// TestSSHWorkerKilledMidTransfer kills the pull worker of an SSH host right
// after it sent its first batch's bytes and sources to the run (failpoint
// store.sent: before it hears of the commit, before any archive), then runs
// again.
//
// Invariants: the crash fails the host (exit 1, the error names the
// worker); no remote file was moved or changed; whatever the run committed
// of the batch it committed whole: every source the ledger holds has its
// exact bytes in the store, and the store holds nothing partial (stored);
// the next clean run ingests every handoff exactly once and archives every
// source (checkConverged), the two runs together storing each once.
func TestSSHWorkerKilledMidTransfer(t *testing.T) {
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	w, home := sshWorld(t, srv)
	markers := w.mixed()
	repos := filepath.Join(w.dir, "repos")
	before := hashTree(t, repos)

	code, out := w.sync("HOME="+home, "SSH_AUTH_SOCK=", failpoint.Env+"=store.sent")
	if code != 1 || !crashed(code, out) || !strings.Contains(out, "host laptop: worker") {
		t.Fatalf("want exit 1 with the laptop's worker killed, got exit %d:\n%s", code, out)
	}
	assertTreeUnchanged(t, "remote inboxes after the crash", before, hashTree(t, repos))
	have := stored(t, w.ws)
	db, err := sql.Open("sqlite", filepath.Join(w.ws, ".handoff/ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT name, sha256 FROM sources`)
	if err != nil {
		t.Fatal(err)
	}
	sources := 0
	for rows.Next() {
		var name, sha string
		if err := rows.Scan(&name, &sha); err != nil {
			t.Fatal(err)
		}
		sources++
		if _, ok := have[sha]; !ok {
			t.Errorf("the ledger records %s but the store lacks its bytes", name)
		}
	}
	rows.Close()
	db.Close()
	if sources > len(mixedResults) {
		t.Errorf("ledger holds %d sources, more than the %d offered", sources, len(mixedResults))
	}
	first := latestReceipt(t, w.ws)

	if code, out := w.sync("HOME="+home, "SSH_AUTH_SOCK="); code != 0 {
		t.Fatalf("clean run exited %d:\n%s", code, out)
	}
	w.checkConverged(markers, mixedResults)
	rc := latestReceipt(t, w.ws)
	if rc.Outcome != receipts.OutcomeOK || first.Counts.Pulled+rc.Counts.Pulled != len(mixedResults) {
		t.Errorf("clean run: outcome %q, pulled %d after the killed run's %d, want ok and %d in all", rc.Outcome, rc.Counts.Pulled, first.Counts.Pulled, len(mixedResults))
	}
	for _, h := range rc.Handoffs {
		if h.Host != "laptop" || mixedResults[h.Name] != h.Result {
			t.Errorf("handoff %s from %s: result %s, want %s", h.Name, h.Host, h.Result, mixedResults[h.Name])
		}
	}
}

// ---------------------------------------------------------------------------
// Test 5.

// TestSSHHostFlagTouchesOnlyThatHost runs `sync --host b` twice while host
// a has handoffs waiting: first killed after the first plan is recorded (so
// b's handoffs are stored and archived but not ingested: a backlog), then
// to completion with one more handoff on b.
//
// Invariants: --host b never connects to a's files (a's tree is byte for
// byte unchanged and a is not in the receipt); the second run ingests the
// backlog left by the killed run as well as its own pull, each exactly
// once; an unknown --host is a usage error (exit 2) naming the valid hosts.
func TestSSHHostFlagTouchesOnlyThatHost(t *testing.T) {
	srvA := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	srvB := sshdtest.StartOpenSSH(t, sshdtest.Options{SFTPOnly: true})
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	mustMkdir(t, home)
	ws := filepath.Join(dir, "ws")
	manifestPath := filepath.Join(dir, "writers.yaml")
	inboxA := filepath.Join(dir, "a/notes/.claude/memory-handoffs")
	inboxB := filepath.Join(dir, "b/notes/.claude/memory-handoffs")
	mustMkdir(t, inboxA)
	mustMkdir(t, inboxB)
	mustWrite(t, filepath.Join(inboxA, "a1.md"), cardHandoff("create-card", "from-a.md", "a"))
	mustWrite(t, filepath.Join(inboxA, "a2.md"), docHandoff("TOOLS.md", "- marker-A2"))
	backlog := map[string]string{
		"b1.md": cardHandoff("create-card", "from-b.md", "b"),
		"b2.md": docHandoff("TOOLS.md", "- marker-B2"),
		"b3.md": docHandoff("rules/b.md", "- marker-B3"),
	}
	for n, c := range backlog {
		mustWrite(t, filepath.Join(inboxB, n), c)
	}
	writeManifest(t, manifestPath, ws,
		hostYAML("a", sshBlock(srvA, ""), []string{inboxA}, nil),
		hostYAML("b", sshBlock(srvB, ""), []string{inboxB}, nil))
	treeA := filepath.Join(dir, "a")
	beforeA := hashTree(t, treeA)

	// Run 1: killed once the first plan is recorded. The ingester runs
	// while the host is still pulling, so the kill comes after at least
	// one of b's handoffs is stored, maybe before the rest are. Each is
	// either stored or still in its inbox (no handoff lost).
	r := runHandoff(t, childEnv(home, failpoint.Env+"=plan.recorded"), "sync", "--manifest", manifestPath, "--host", "b")
	if r.code != -9 {
		t.Fatalf("want the run killed at plan.recorded: %s", r)
	}
	assertTreeUnchanged(t, "host a after run 1", beforeA, hashTree(t, treeA))
	storedBefore := 0
	have := stored(t, ws)
	for n, c := range backlog {
		b, ok := have[sum(c)]
		switch {
		case ok && string(b) == c:
			storedBefore++
		case !ok:
			if _, err := os.Stat(filepath.Join(inboxB, n)); err != nil {
				t.Errorf("b's %s neither stored nor in its inbox: %v", n, err)
			}
		default:
			t.Errorf("b's %s in the store: %q", n, b)
		}
	}
	if storedBefore == 0 {
		t.Fatalf("the killed run stored nothing, yet recorded a plan")
	}
	if _, err := os.Stat(filepath.Join(ws, ".handoff/receipts/latest.json")); err == nil {
		t.Errorf("the killed run wrote a receipt")
	}
	if c := countIn(t, filepath.Join(ws, "TOOLS.md"), "marker-B2"); c != 0 {
		t.Errorf("the killed run already applied b2.md; no backlog to test")
	}

	// Run 2: one more handoff on b; the backlog and it are ingested.
	fresh := docHandoff("TOOLS.md", "- marker-B4")
	mustWrite(t, filepath.Join(inboxB, "b4.md"), fresh)
	r = runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--host", "b", "--json")
	if r.code != 0 {
		t.Fatalf("sync --host b: %s", r)
	}
	rc := decodeReceipt(t, r)
	if rc.Outcome != receipts.OutcomeOK || rc.Status != receipts.StatusIngested {
		t.Errorf("outcome %q status %q", rc.Outcome, rc.Status)
	}
	if len(rc.Hosts) != 1 || rc.Hosts[0].Name != "b" {
		t.Errorf("hosts %+v, want only b", rc.Hosts)
	}
	// b4.md is new; of the backlog, the killed run recorded at least the
	// one it planned (a file in the spool may still lack its ledger row).
	if rc.Counts.Pulled < 1 || rc.Counts.Pulled > len(backlog) {
		t.Errorf("pulled %d, want b4.md and at most the %d backlog files the killed run had not recorded", rc.Counts.Pulled, len(backlog)-1)
	}
	got := indexHandoffs(t, rc)
	want := map[string]string{"b1.md": "promoted", "b2.md": "routed", "b3.md": "routed", "b4.md": "routed"}
	if len(got) != len(want) {
		t.Errorf("receipt lists %d handoffs, want %d: %+v", len(got), len(want), rc.Handoffs)
	}
	all := maps.Clone(backlog)
	all["b4.md"] = fresh
	for n, res := range want {
		h, ok := got[handoffKey("b", inboxB, n)]
		if !ok || h.Result != res || h.ArchivedAs != processedName(n, all[n]) {
			t.Errorf("%s: %+v, want %s from host b archived as %s", n, h, res, processedName(n, all[n]))
		}
	}
	for file, ms := range map[string][]string{"TOOLS.md": {"marker-B2", "marker-B4"}, "rules/b.md": {"marker-B3"}} {
		for _, m := range ms {
			if c := countIn(t, filepath.Join(ws, file), m); c != 1 {
				t.Errorf("%s holds %s %d times, want 1", file, m, c)
			}
		}
	}
	if c := countIn(t, filepath.Join(ws, "TOOLS.md"), "marker-A2"); c != 0 {
		t.Errorf("host a's handoff was applied by --host b")
	}
	if _, err := os.Stat(filepath.Join(ws, "memory/cards/from-b.md")); err != nil {
		t.Errorf("backlog card not promoted: %v", err)
	}
	assertTreeUnchanged(t, "host a after run 2", beforeA, hashTree(t, treeA))

	// An unknown host is a usage error naming the valid ones.
	r = runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--host", "nope")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown host "nope"`) || !strings.Contains(r.stderr, "a, b") {
		t.Errorf("sync --host nope: want exit 2 naming a, b: %s", r)
	}
	assertTreeUnchanged(t, "host a after --host nope", beforeA, hashTree(t, treeA))
}
