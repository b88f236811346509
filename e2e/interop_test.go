package e2e

// Interoperability (issue 12): the same sync against SFTP servers other
// than plain OpenSSH, all on 127.0.0.1 (internal/testkit/sshdtest): Green
// End's gesftpserver behind OpenSSH, ProFTPD's mod_sftp, Dropbear with
// OpenSSH's sftp-server, OpenSSH chrooted with ForceCommand internal-sftp,
// and AsyncSSH. Plain OpenSSH runs the same scenario as the baseline.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/receipts"
)

// interopServers are the servers TestInteropSync runs against, by name.
var interopServers = []struct {
	name  string
	start func(testing.TB, sshdtest.Options) *sshdtest.Server
}{
	{"openssh", sshdtest.StartOpenSSH},
	{"gesftpserver", sshdtest.StartGreenEnd},
	{"proftpd", sshdtest.StartProFTPD},
	{"dropbear", sshdtest.StartDropbear},
	{"openssh-chroot", sshdtest.StartOpenSSHChroot},
	{"asyncssh", sshdtest.StartAsyncSSH},
}

// oneMiB is the default max_file_size: a file of this size is read, one
// byte more is rejected.
const oneMiB = 1 << 20

// remoteTree is a directory for a host's files that srv serves: under its
// Root (the chroot) or anywhere. It is removed when the test ends.
func remoteTree(t *testing.T, srv *sshdtest.Server) string {
	t.Helper()
	if srv.Root() == "/" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(srv.Root(), "tree-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// padded is a create-card handoff for card name of exactly size bytes.
func padded(name string, size int) string {
	base := cardHandoff("create-card", name, "padded\n")
	n := size - len(base)
	return cardHandoff("create-card", name, "padded\n"+strings.Repeat("pad line\n", n/9+1)[:n])
}

// gitAdd makes repo a git repository whose index tracks rel (no commit).
func gitAdd(t *testing.T, repo, rel string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", rel}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// wantFile is one file of a scenario and what must become of it.
type wantFile struct {
	inbox   string // local path
	name    string
	content string
	result  string // "" for a git-tracked file: never listed, never moved
	reason  string
	as      string // archived_as
}

// TestInteropSync runs one sync scenario against every server.
//
// The writer host has three repositories under a discovery root (two with
// .claude/memory-handoffs, one with .codex/memory-handoffs), each holding
// a card handoff, a handoff its git index tracks, a malformed file, a
// handoff of exactly 1 MiB and one of 1 MiB + 1 byte; and a declared inbox
// holding 250 handoffs.
//
// Invariants, on every server: the run exits 0 with outcome ok; every
// inbox is ok and the tracked file is counted; every handoff that is not
// tracked is archived under processed/<stem>.<sha12>.md (malformed ones
// under malformed/<stem>.<sha12>.md) with exactly the bytes written, and
// the receipt says so; the file over max_file_size is never read and is
// moved, bytes intact, to malformed/<name>; the tracked file stays in
// place, untouched and unlisted; the counts add up; a second run prints
// NO_UPDATES, exits 0 and changes nothing on the host.
func TestInteropSync(t *testing.T) {
	for _, sv := range interopServers {
		t.Run(sv.name, func(t *testing.T) {
			t.Parallel()
			srv := sv.start(t, sshdtest.Options{})
			base := remoteTree(t, srv)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			mustMkdir(t, home)
			ws := filepath.Join(dir, "ws")
			manifestPath := filepath.Join(dir, "writers.yaml")

			var files []wantFile
			add := func(inbox, name, content, result, reason, as string) {
				mustWrite(t, filepath.Join(inbox, name), content)
				files = append(files, wantFile{inbox, name, content, result, reason, as})
			}
			repos := filepath.Join(base, "repos")
			var inboxes []string
			for i, harness := range []string{".claude", ".codex", ".claude"} {
				repo := filepath.Join(repos, fmt.Sprintf("r%d", i))
				inbox := filepath.Join(repo, harness, "memory-handoffs")
				inboxes = append(inboxes, inbox)
				id := fmt.Sprintf("%s-r%d", sv.name, i)
				card := cardHandoff("create-card", id+".md", "card of "+id)
				add(inbox, "card.md", card, "promoted", "", processedName("card.md", card))
				tracked := cardHandoff("create-card", id+"-tracked.md", "tracked, never pulled")
				add(inbox, "tracked.md", tracked, "", "", "")
				gitAdd(t, repo, filepath.Join(harness, "memory-handoffs", "tracked.md"))
				bad := "not a handoff: " + id + "\n"
				add(inbox, "bad.md", bad, "malformed", "parse-error", malformedName("bad.md", bad))
				exact := padded(id+"-exact.md", oneMiB)
				add(inbox, "exact.md", exact, "promoted", "", processedName("exact.md", exact))
				over := padded(id+"-over.md", oneMiB+1)
				add(inbox, "over.md", over, "rejected", "oversize", "malformed/over.md")
			}
			declared := filepath.Join(base, "notes/.claude/memory-handoffs")
			inboxes = append(inboxes, declared)
			for i := range 250 {
				name := fmt.Sprintf("bulk-%03d.md", i)
				c := docHandoff("rules/interop.md", fmt.Sprintf("- marker-bulk-%s-%03d", sv.name, i))
				add(declared, name, c, "routed", "", processedName(name, c))
			}
			for _, f := range files {
				if want := map[string]int{"exact.md": oneMiB, "over.md": oneMiB + 1}[f.name]; want != 0 && len(f.content) != want {
					t.Fatalf("%s is %d bytes, want %d", f.name, len(f.content), want)
				}
			}
			writeManifest(t, manifestPath, ws, hostYAML("writer", sshBlock(srv, ""),
				[]string{srv.ClientPath(declared)}, []string{srv.ClientPath(repos)}))

			env := childEnv(home)
			r := runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
			if r.code != 0 {
				t.Errorf("sync: %s", shortRun(r))
			}
			rc := decodeReceipt(t, r)
			if rc.Outcome != receipts.OutcomeOK || rc.Status != receipts.StatusIngested {
				t.Errorf("outcome %q status %q, want ok/ingested", rc.Outcome, rc.Status)
			}
			h := receiptHost(t, rc, "writer")
			if h.Outcome != "ok" || h.Error != "" {
				t.Errorf("host: outcome %q error %q", h.Outcome, h.Error)
			}
			states := map[string]receipts.Inbox{}
			for _, in := range h.Inboxes {
				states[in.Path] = in
			}
			if len(states) != len(inboxes) {
				t.Errorf("receipt lists inboxes %+v, want %d", h.Inboxes, len(inboxes))
			}
			for _, in := range inboxes {
				got, ok := states[srv.ClientPath(in)]
				wantTracked := 1
				if in == declared {
					wantTracked = 0
				}
				if !ok || got.State != "ok" || got.Tracked != wantTracked {
					t.Errorf("inbox %s: %+v, want state ok, %d tracked", srv.ClientPath(in), got, wantTracked)
				}
			}

			got := indexHandoffs(t, rc)
			listed := 0
			// One line per file gone wrong, the first 10 of them: when the
			// host fails, every file does.
			fileErrs := 0
			fileErr := func(format string, args ...any) {
				t.Helper()
				if fileErrs++; fileErrs <= 10 {
					t.Errorf(format, args...)
				}
			}
			for _, f := range files {
				k := handoffKey("writer", srv.ClientPath(f.inbox), f.name)
				e, ok := got[k]
				if f.result == "" {
					// Tracked: listed nowhere, in place, not archived.
					if ok {
						fileErr("%s: tracked file in the receipt: %+v", k, e)
					}
					if b, err := os.ReadFile(filepath.Join(f.inbox, f.name)); err != nil || string(b) != f.content {
						fileErr("%s: tracked file moved or changed (%v)", k, err)
					}
					for _, sub := range []string{"processed", "malformed"} {
						if m, _ := filepath.Glob(filepath.Join(f.inbox, sub, "tracked*")); len(m) > 0 {
							fileErr("%s: tracked file archived: %v", k, m)
						}
					}
					continue
				}
				listed++
				if !ok {
					fileErr("receipt lacks %s", k)
					continue
				}
				if e.Result != f.result || e.Reason != f.reason || e.ArchivedAs != f.as {
					fileErr("%s: result %q reason %q archived_as %q, want %q %q %q", k, e.Result, e.Reason, e.ArchivedAs, f.result, f.reason, f.as)
				}
				if f.result == "rejected" {
					if e.SHA256 != "" {
						fileErr("%s: rejected but hashed: it must never be read", k)
					}
				} else if e.SHA256 != sum(f.content) || e.Size != int64(len(f.content)) {
					fileErr("%s: sha256 %s size %d, want %s %d", k, e.SHA256, e.Size, sum(f.content), len(f.content))
				}
				if _, err := os.Lstat(filepath.Join(f.inbox, f.name)); !errors.Is(err, fs.ErrNotExist) {
					fileErr("%s still in its inbox (%v)", k, err)
				}
				if b, err := os.ReadFile(filepath.Join(f.inbox, f.as)); err != nil || string(b) != f.content {
					fileErr("%s: %s missing or not the bytes written (%d bytes, %v)", k, f.as, len(b), err)
				}
			}
			if fileErrs > 10 {
				t.Errorf("… and %d more problems with single files", fileErrs-10)
			}
			if len(got) != listed {
				t.Errorf("receipt lists %d handoffs, want %d", len(got), listed)
			}
			want := receipts.Counts{Pulled: 3*3 + 250, Promoted: 6, Routed: 250, Malformed: 3, Rejected: 3}
			if rc.Counts != want {
				t.Errorf("counts %+v, want %+v", rc.Counts, want)
			}
			if c := countIn(t, filepath.Join(ws, "rules/interop.md"), "marker-bulk-"); c != 250 {
				t.Errorf("rules/interop.md holds %d bulk markers, want 250", c)
			}

			before := hashTree(t, base)
			r2 := runHandoff(t, env, "sync", "--manifest", manifestPath)
			if r2.code != 0 || !slices.Contains(strings.Split(r2.stdout, "\n"), "NO_UPDATES") {
				t.Errorf("second sync: want exit 0 and NO_UPDATES: %s", r2)
			}
			assertTreeUnchanged(t, "the host on the second run", before, hashTree(t, base))
			t.Logf("%s: first sync %v, second %v", sv.name, r.elapsed.Round(time.Millisecond), r2.elapsed.Round(time.Millisecond))
		})
	}
}

// fileID is a file's bytes and inode, to tell "untouched" from "replaced
// by a copy".
type fileID struct {
	sum   string
	inode uint64
}

func identify(t *testing.T, p string) fileID {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fileID{sum(string(b)), fi.Sys().(*syscall.Stat_t).Ino}
}

// TestInteropSymlinks points symlinks out of inboxes on a server that
// follows them (ProFTPD: its LSTAT reports a symlink's target, its RENAME
// moves the target; see sshdtest.TestProFTPDFollowsSymlinks) and, as the
// baseline, on plain OpenSSH, which does not.
//
// The host has a declared inbox holding y.md (a symlink to a handoff in a
// directory outside every inbox), x.md (a symlink to /etc/passwd) and one
// regular handoff; a discovered repository whose .claude/memory-handoffs
// is a symlink to a directory holding a handoff; and a declared inbox
// whose processed/ is a symlink to a directory elsewhere.
//
// Invariants, on both servers: nothing outside an inbox is read, renamed
// or removed: the outside file keeps its bytes and no name appears or
// goes beside it, /etc/passwd keeps its bytes and inode, the directories
// the symlinks point at are unchanged, and none of their bytes reach the
// spool or the workspace; the symlinked inbox is reported with state
// "symlink" and stays a symlink; the symlinked entries are rejected with
// reason "symlink" and never read; the regular handoff beside them is
// archived as usual. On ProFTPD moreover the symlinks stay where they are
// (a rename would move their targets: archived_as ""), and the host
// reports the quirk "follows-symlinks" (hosts[].quirks); on OpenSSH a
// symlinked entry is either left in place or moved, as itself, to
// malformed/<name>, and no quirk is reported.
func TestInteropSymlinks(t *testing.T) {
	for _, sv := range []struct {
		name    string
		start   func(testing.TB, sshdtest.Options) *sshdtest.Server
		follows bool
	}{
		{"proftpd", sshdtest.StartProFTPD, true},
		{"openssh", sshdtest.StartOpenSSH, false},
	} {
		t.Run(sv.name, func(t *testing.T) {
			t.Parallel()
			srv := sv.start(t, sshdtest.Options{})
			base := t.TempDir()
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			mustMkdir(t, home)
			ws := filepath.Join(dir, "ws")
			manifestPath := filepath.Join(dir, "writers.yaml")

			outsideDir := t.TempDir()
			outside := filepath.Join(outsideDir, "outside.txt")
			outsideContent := docHandoff("TOOLS.md", "- marker-outside-"+sv.name)
			mustWrite(t, outside, outsideContent)
			linkTarget := filepath.Join(t.TempDir(), "inbox")
			hidden := docHandoff("TOOLS.md", "- marker-linked-inbox-"+sv.name)
			mustWrite(t, filepath.Join(linkTarget, "h.md"), hidden)
			procTarget := t.TempDir()
			mustWrite(t, filepath.Join(procTarget, "keep.md"), "kept\n")
			const passwd = "/etc/passwd"
			passwdBefore := identify(t, passwd)
			passwdBytes, _ := os.ReadFile(passwd)

			inbox := filepath.Join(base, "notes/.claude/memory-handoffs")
			good := cardHandoff("create-card", "good-"+sv.name+".md", "regular")
			mustWrite(t, filepath.Join(inbox, "good.md"), good)
			links := map[string]string{"y.md": outside, "x.md": passwd}
			for n, target := range links {
				if err := os.Symlink(target, filepath.Join(inbox, n)); err != nil {
					t.Fatal(err)
				}
			}
			procInbox := filepath.Join(base, "proc/.claude/memory-handoffs")
			pending := docHandoff("rules/p.md", "- marker-p-"+sv.name)
			mustWrite(t, filepath.Join(procInbox, "p.md"), pending)
			if err := os.Symlink(procTarget, filepath.Join(procInbox, "processed")); err != nil {
				t.Fatal(err)
			}
			repos := filepath.Join(base, "repos")
			linkedInbox := filepath.Join(repos, "linked/.claude/memory-handoffs")
			mustMkdir(t, filepath.Dir(linkedInbox))
			if err := os.Symlink(linkTarget, linkedInbox); err != nil {
				t.Fatal(err)
			}
			writeManifest(t, manifestPath, ws, hostYAML("writer", sshBlock(srv, ""), []string{inbox, procInbox}, []string{repos}))

			snap := map[string]map[string]string{}
			for _, d := range []string{outsideDir, filepath.Dir(linkTarget), procTarget} {
				snap[d] = hashTree(t, d)
			}

			r := runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--json")
			t.Logf("%s: exit %d after %v", sv.name, r.code, r.elapsed.Round(time.Millisecond))
			if r.code != 0 && r.code != 1 {
				t.Fatalf("sync: %s", r)
			}
			rc := decodeReceipt(t, r)

			// Nothing outside an inbox read, renamed or removed.
			for d, before := range snap {
				assertTreeUnchanged(t, "outside "+d, before, hashTree(t, d))
			}
			if got := identify(t, passwd); got != passwdBefore {
				t.Errorf("/etc/passwd changed: %+v, was %+v", got, passwdBefore)
			}
			have := stored(t, ws)
			for _, c := range []string{outsideContent, hidden, string(passwdBytes)} {
				if _, ok := have[sum(c)]; ok {
					t.Errorf("the store holds a file from outside the inboxes (%.40q…)", c)
				}
			}
			for _, m := range []string{"marker-outside-", "marker-linked-inbox-"} {
				if c := countIn(t, filepath.Join(ws, "TOOLS.md"), m); c != 0 {
					t.Errorf("TOOLS.md holds %s: a file outside the inboxes was applied", m)
				}
			}

			h := receiptHost(t, rc, "writer")
			t.Logf("host: outcome %q error %q quirks %v", h.Outcome, h.Error, receiptHost(t, rc, "writer").Quirks)
			var linkedState string
			for _, in := range h.Inboxes {
				t.Logf("inbox %s: state %q error %q", in.Path, in.State, in.Error)
				if in.Path == linkedInbox {
					linkedState = in.State
				}
			}
			if linkedState != "symlink" {
				t.Errorf("symlinked inbox %s: state %q, want symlink", linkedInbox, linkedState)
			}
			if target, err := os.Readlink(linkedInbox); err != nil || target != linkTarget {
				t.Errorf("symlinked inbox no longer a symlink to %s: %q %v", linkTarget, target, err)
			}

			got := indexHandoffs(t, rc)
			for _, e := range rc.Handoffs {
				t.Logf("handoff %s/%s: result %q reason %q archived_as %q", e.Inbox, e.Name, e.Result, e.Reason, e.ArchivedAs)
			}
			for n, target := range links {
				k := handoffKey("writer", inbox, n)
				e, ok := got[k]
				if !ok || e.Result != "rejected" || e.Reason != "symlink" || e.SHA256 != "" {
					t.Errorf("%s: %+v, want rejected for symlink, unread", k, e)
				}
				inPlace := filepath.Join(inbox, n)
				if sv.follows || e.ArchivedAs == "" {
					if e.ArchivedAs != "" {
						t.Errorf("%s: archived_as %q on a server whose RENAME follows symlinks, want \"\"", k, e.ArchivedAs)
					}
				} else {
					if e.ArchivedAs != "malformed/"+n {
						t.Errorf("%s: archived_as %q, want \"\" or malformed/%s", k, e.ArchivedAs, n)
					}
					inPlace = filepath.Join(inbox, e.ArchivedAs)
				}
				if got, err := os.Readlink(inPlace); err != nil || got != target {
					t.Errorf("%s: want the symlink to %s at %s, got %q %v", k, target, inPlace, got, err)
				}
			}
			if e := got[handoffKey("writer", inbox, "good.md")]; e.Result != "promoted" || e.ArchivedAs != processedName("good.md", good) {
				t.Errorf("good.md: %+v, want promoted and archived", e)
			} else if b, err := os.ReadFile(filepath.Join(inbox, e.ArchivedAs)); err != nil || string(b) != good {
				t.Errorf("good.md's archive: %v", err)
			}
			// processed/ is a symlink: p.md cannot be archived there and
			// stays in its inbox.
			if b, err := os.ReadFile(filepath.Join(procInbox, "p.md")); err != nil || string(b) != pending {
				t.Errorf("p.md (processed/ is a symlink) left its inbox: %v", err)
			}
			if target, err := os.Readlink(filepath.Join(procInbox, "processed")); err != nil || target != procTarget {
				t.Errorf("processed/ symlink changed: %q %v", target, err)
			}

			quirks := receiptHost(t, rc, "writer").Quirks
			if sv.follows != slices.Contains(quirks, "follows-symlinks") {
				t.Errorf("host quirks %v: want follows-symlinks %v", quirks, sv.follows)
			}
		})
	}
}

// TestInteropGreenEndHandles pulls 500 handoffs through gesftpserver,
// which holds at most sshdtest.GreenEndMaxHandles open handles per
// session and misbehaves beyond (its 129th handle is invalid and it
// corrupts its heap): a declared inbox with 300 and a discovery root with
// 200 repositories of one handoff each, in one sync.
//
// Invariants: the run exits 0 with outcome ok; all 500 handoffs are
// archived under processed/<stem>.<sha12>.md with their bytes; the handle
// counter saw the traffic (at least one OPEN per handoff), and at no time
// did any session hold more than GreenEndMaxHandles handles.
func TestInteropGreenEndHandles(t *testing.T) {
	srv := sshdtest.StartGreenEnd(t, sshdtest.Options{})
	base := t.TempDir()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	mustMkdir(t, home)
	ws := filepath.Join(dir, "ws")
	manifestPath := filepath.Join(dir, "writers.yaml")

	type src struct{ inbox, name, content string }
	var srcs []src
	declared := filepath.Join(base, "notes/.claude/memory-handoffs")
	for i := range 300 {
		n := fmt.Sprintf("inbox-%03d.md", i)
		srcs = append(srcs, src{declared, n, docHandoff("rules/handles.md", fmt.Sprintf("- marker-inbox-%03d", i))})
	}
	repos := filepath.Join(base, "repos")
	for i := range 200 {
		in := filepath.Join(repos, fmt.Sprintf("repo-%03d/.claude/memory-handoffs", i))
		srcs = append(srcs, src{in, "h.md", docHandoff("rules/handles.md", fmt.Sprintf("- marker-repo-%03d", i))})
	}
	for _, s := range srcs {
		mustWrite(t, filepath.Join(s.inbox, s.name), s.content)
	}
	writeManifest(t, manifestPath, ws, hostYAML("ge", sshBlock(srv, ""), []string{declared}, []string{repos}))

	r := runHandoff(t, childEnv(home), "sync", "--manifest", manifestPath, "--json")
	hs := srv.Handles(t)
	t.Logf("sync: exit %d after %v; handles: %+v", r.code, r.elapsed.Round(time.Millisecond), hs)
	if hs.Peak > sshdtest.GreenEndMaxHandles {
		t.Errorf("a gesftpserver session held %d handles at once, over its limit of %d", hs.Peak, sshdtest.GreenEndMaxHandles)
	}
	if r.code != 0 {
		t.Fatalf("sync: %s", shortRun(r))
	}
	rc := decodeReceipt(t, r)
	if rc.Outcome != receipts.OutcomeOK || rc.Counts.Pulled != len(srcs) || rc.Counts.Routed != len(srcs) {
		t.Errorf("outcome %q counts %+v, want ok and %d pulled and routed", rc.Outcome, rc.Counts, len(srcs))
	}
	missing := 0
	for _, s := range srcs {
		b, err := os.ReadFile(filepath.Join(s.inbox, processedName(s.name, s.content)))
		if err != nil || !bytes.Equal(b, []byte(s.content)) {
			if missing < 5 {
				t.Errorf("%s/%s not archived with its bytes: %v", s.inbox, s.name, err)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d handoffs not archived", missing, len(srcs))
	}
	if hs.Opens < len(srcs) {
		t.Errorf("the handle counter saw %d opens for %d handoffs: it is not counting", hs.Opens, len(srcs))
	}
}

// shortRun is r with its stderr cut to its last 40 lines.
func shortRun(r sshRun) string {
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) > 40 {
		lines = append([]string{fmt.Sprintf("[%d lines cut]", len(lines)-40)}, lines[len(lines)-40:]...)
	}
	out := r.stdout
	if len(out) > 4000 {
		out = out[:4000] + "…"
	}
	return fmt.Sprintf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), out, strings.Join(lines, "\n"))
}
