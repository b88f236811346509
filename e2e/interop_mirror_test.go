package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
)

// TestInteropMirror publishes a mirror to each interop server: the first
// run sends every card and sha256sum -c passes on the host; an update
// sends only that card; an idle run sends nothing. Servers without
// posix-rename@openssh.com or fsync@openssh.com take the fallback paths
// (docs/mirror.md). Invariant: nothing outside the mirror path and the
// inboxes changes on the host.
func TestInteropMirror(t *testing.T) {
	for _, sv := range interopServers {
		t.Run(sv.name, func(t *testing.T) {
			t.Parallel()
			srv := sv.start(t, sshdtest.Options{})
			t.Run("publish", func(t *testing.T) { interopPublish(t, sv, srv) })
			for _, c := range plantedCases {
				t.Run("planted/"+c.name, func(t *testing.T) { interopPlanted(t, srv, c) })
			}
			if srv.Root() != "/" {
				t.Run("home-is-root", func(t *testing.T) { interopHomeIsRoot(t, srv) })
			}
		})
	}
}

// interopPublish is TestInteropMirror's honest run on one server.
func interopPublish(t *testing.T, sv struct {
	name  string
	start func(testing.TB, sshdtest.Options) *sshdtest.Server
}, srv *sshdtest.Server) {
	{
		{
			base := remoteTree(t, srv)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			mustMkdir(t, home)
			ws := filepath.Join(dir, "ws")
			manifestPath := filepath.Join(dir, "writers.yaml")
			inbox := filepath.Join(base, "repo/.claude/memory-handoffs")
			mirrorDir := filepath.Join(base, "mirror")
			mustMkdir(t, inbox)
			mustWrite(t, filepath.Join(base, "keep.txt"), "outside the mirror")
			for i := range 5 {
				mustWrite(t, filepath.Join(inbox, fmt.Sprintf("c%d.md", i)), cardHandoff("create-card", fmt.Sprintf("card-%d.md", i), fmt.Sprintf("card %d on %s", i, sv.name)))
			}
			writeManifest(t, manifestPath, ws, hostYAML("writer", sshBlock(srv, ""), []string{srv.ClientPath(inbox)}, nil,
				fmt.Sprintf("mirror: {path: %s}", srv.ClientPath(mirrorDir))))
			env := childEnv(home)
			publish := func() *mirror.Result {
				t.Helper()
				r := runHandoff(t, env, "sync", "--manifest", manifestPath, "--json")
				m := receiptHost(t, decodeReceipt(t, r), "writer").Mirror
				if r.code != 0 || m == nil || m.Outcome != mirror.OutcomeOK {
					t.Fatalf("sync: %s\nmirror %+v", shortRun(r), m)
				}
				cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
				cmd.Dir = mirrorDir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("sha256sum -c on %s: %v\n%s", sv.name, err, out)
				}
				return &mirror.Result{Sent: m.Sent, Removed: m.Removed, Generation: m.Generation}
			}
			if m := publish(); len(m.Sent) != 8 || m.Generation != 1 { // 5 cards, HANDOFF.md, SHA256SUMS, MIRROR.json
				t.Errorf("first publish sent %q (gen %d)", m.Sent, m.Generation)
			}
			card, err := os.ReadFile(filepath.Join(mirrorDir, "memory/cards/card-0.md"))
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(inbox, "u.md"), cardHandoff("update-card", "card-0.md", "updated on "+sv.name, "Expected card SHA256", sum(string(card))))
			if m := publish(); !slices.Equal(m.Sent, []string{"memory/cards/card-0.md", "SHA256SUMS", "MIRROR.json"}) || m.Generation != 2 {
				t.Errorf("update publish sent %q (gen %d)", m.Sent, m.Generation)
			}
			if got, _ := os.ReadFile(filepath.Join(mirrorDir, "memory/cards/card-0.md")); !strings.Contains(string(got), "updated on") {
				t.Errorf("card-0.md on the host: %q", got)
			}
			if m := publish(); len(m.Sent)+len(m.Removed) != 0 {
				t.Errorf("idle publish sent %q removed %q", m.Sent, m.Removed)
			}
			for k := range hashTree(t, base) {
				if !strings.HasPrefix(k, "mirror") && !strings.HasPrefix(k, "repo") && k != "keep.txt" && k != "." {
					t.Errorf("the publish wrote %s outside the mirror", k)
				}
				if strings.Contains(k, ".handoff-") {
					t.Errorf("temporary file %s left", k)
				}
			}
		}
	}
}

// plantedCase is a mirror path with a symlink planted on or in it, as a
// hostile or careless account could leave it. Links are relative, so
// that they point to the same place inside a chroot and outside it.
type plantedCase struct {
	name   string
	mirror string                          // the mirror's path below the tree
	plant  func(t *testing.T, base string) // makes the links (and what they point to)
}

var plantedCases = []plantedCase{
	{"document", "mirror", func(t *testing.T, base string) {
		mustMkdir(t, filepath.Join(base, "mirror"))
		mustSymlink(t, "../outside/TOOLS.md", filepath.Join(base, "mirror/TOOLS.md"))
	}},
	{"stray-card", "mirror", func(t *testing.T, base string) {
		mustMkdir(t, filepath.Join(base, "mirror/memory/cards"))
		mustSymlink(t, "../../../outside/stale-victim.md", filepath.Join(base, "mirror/memory/cards/stale-victim.md"))
	}},
	{"mirror-dir", "mirror", func(t *testing.T, base string) {
		mustMkdir(t, filepath.Join(base, "outside/mdir"))
		mustSymlink(t, "outside/mdir", filepath.Join(base, "mirror"))
	}},
	{"parent-no-mirror-yet", ".openclaw/mirror", func(t *testing.T, base string) {
		mustMkdir(t, filepath.Join(base, "elsewhere"))
		mustSymlink(t, "elsewhere", filepath.Join(base, ".openclaw"))
	}},
}

// interopPlanted publishes to a mirror path with a symlink planted on
// or in it. Invariant: every file outside the mirror directory is byte-
// and inode-identical after the run, nothing new appears outside it, and
// the receipt shows either an exact mirror (sha256sum -c passes) or a
// mirror error for the host.
func interopPlanted(t *testing.T, srv *sshdtest.Server, c plantedCase) {
	x := newMirrorCase(t, srv)
	base := x.base
	mustWrite(t, filepath.Join(base, "outside/TOOLS.md"), "the account's own tools\n")
	mustWrite(t, filepath.Join(base, "outside/stale-victim.md"), "the account's own card\n")
	mustWrite(t, filepath.Join(x.inbox, "d.md"), docHandoff("TOOLS.md", "- a tool"))
	c.plant(t, base)
	before := inodeTree(t, base, "repo")
	mirrorDir := filepath.Join(base, c.mirror)
	r, m := x.sync(srv.ClientPath(mirrorDir))
	switch {
	case m == nil:
		t.Fatalf("no mirror in the receipt: %s", shortRun(r))
	case m.Outcome == mirror.OutcomeOK:
		cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		cmd.Dir = mirrorDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mirror ok, but sha256sum -c: %v\n%s", err, out)
		}
	case m.Outcome == mirror.OutcomeError:
		if !strings.Contains(m.Error, "symlink") {
			t.Errorf("mirror error %q does not say symlink", m.Error)
		}
	default:
		t.Errorf("mirror outcome %q", m.Outcome)
	}
	after := inodeTree(t, base, "repo")
	for k, v := range before {
		if strings.HasPrefix(k, c.mirror+"/") {
			continue // inside the mirror: the publish's to change
		}
		if after[k] != v {
			t.Errorf("%s outside the mirror changed: %s, then %s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok && k != c.mirror && !strings.HasPrefix(k, c.mirror+"/") {
			t.Errorf("%s appeared outside the mirror", k)
		}
	}
}

// mirrorCase is one writer host's tree on srv, with an inbox holding a
// card handoff, and a canonical host's home and workspace.
type mirrorCase struct {
	t                        *testing.T
	srv                      *sshdtest.Server
	base, home, ws, manifest string
	inbox                    string
}

func newMirrorCase(t *testing.T, srv *sshdtest.Server) *mirrorCase {
	dir := t.TempDir()
	x := &mirrorCase{t: t, srv: srv, base: remoteTree(t, srv), home: filepath.Join(dir, "home"),
		ws: filepath.Join(dir, "ws"), manifest: filepath.Join(dir, "writers.yaml")}
	x.inbox = filepath.Join(x.base, "repo/.claude/memory-handoffs")
	mustMkdir(t, x.home)
	mustMkdir(t, x.inbox)
	mustWrite(t, filepath.Join(x.inbox, "c.md"), cardHandoff("create-card", "card.md", "a card"))
	return x
}

// sync runs one sync with the host's mirror at mirrorPath (as the
// client names it) and returns the run and the host's mirror result.
func (x *mirrorCase) sync(mirrorPath string) (sshRun, *receipts.Mirror) {
	x.t.Helper()
	writeManifest(x.t, x.manifest, x.ws, hostYAML("writer", sshBlock(x.srv, ""), []string{x.srv.ClientPath(x.inbox)}, nil,
		fmt.Sprintf("mirror: {path: %s}", mirrorPath)))
	r := runHandoff(x.t, childEnv(x.home), "sync", "--manifest", x.manifest, "--json")
	return r, receiptHost(x.t, decodeReceipt(x.t, r), "writer").Mirror
}

// inodeTree describes every entry below root, except the subtree skip
// and anything below a symlink, by relative path: its type, inode,
// size and, for a regular file, its SHA-256; a symlink by its target.
func inodeTree(t *testing.T, root, skip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == skip {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		ino := fi.Sys().(*syscall.Stat_t).Ino
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = fmt.Sprintf("symlink %d -> %s", ino, target)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %d %d %s", ino, fi.Size(), sum(string(data)))
		default:
			out[rel] = fmt.Sprintf("%v %d", fi.Mode().Type(), ino)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// interopHomeIsRoot publishes to ~/.openclaw/mirror on a chrooted server
// whose sessions start at "/", with no ~/.openclaw yet: "/.openclaw" is
// inside that home, so it is made and the mirror is published.
// Invariant: nothing but the mirror's path appears in the chroot.
func interopHomeIsRoot(t *testing.T, srv *sshdtest.Server) {
	x := newMirrorCase(t, srv)
	base := x.base
	before := inodeTree(t, srv.Root(), filepath.Base(base))
	r, m := x.sync("~/.openclaw/mirror")
	if m == nil || m.Outcome != mirror.OutcomeOK || m.Dir != "/.openclaw/mirror" {
		t.Fatalf("mirror %+v: %s", m, shortRun(r))
	}
	mirrorDir := filepath.Join(srv.Root(), ".openclaw/mirror")
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = mirrorDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join(srv.Root(), ".openclaw")) })
	for k, v := range inodeTree(t, srv.Root(), filepath.Base(base)) {
		if k != ".openclaw" && !strings.HasPrefix(k, ".openclaw/") && before[k] != v {
			t.Errorf("%s changed or appeared in the chroot: %s", k, v)
		}
	}
}
