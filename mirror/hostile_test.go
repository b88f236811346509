package mirror

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/hostile"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

const vhome = "/home/w"

func dialVFS(t *testing.T, v *hostile.VFS) *sshfs.FS {
	t.Helper()
	srv := hostile.Start(t, t.TempDir(), v)
	f, err := sshfs.Dial(context.Background(), sshfs.Config{Alias: "hostile", HostName: srv.Host, Port: srv.Port, User: srv.User,
		IdentityFiles: []string{srv.IdentityFile}, KnownHostsFiles: []string{srv.KnownHosts}, ConnectTimeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func vfsPublish(t *testing.T, f *sshfs.FS, st *State) (Result, *State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Publish(ctx, f, st, Options{Host: "hostile", Dir: "~/mirror", Files: files("memory/cards/a.md", "card a\n", "TOOLS.md", "tools\n"),
		Canonical: "c", RunID: "r", Now: time.Now()})
}

// outsideMirror lists the VFS's paths outside the mirror directory.
func outsideMirror(v *hostile.VFS) []string {
	var out []string
	for _, p := range v.Paths() {
		if p != vhome+"/mirror" && !strings.HasPrefix(p, vhome+"/mirror/") {
			out = append(out, p)
		}
	}
	return out
}

// TestPublishHostileNames: a host that lists a name with a slash, or one
// that would climb out, in the mirror stops the mirror. Invariant:
// nothing outside the mirror path changes, and nothing is written.
func TestPublishHostileNames(t *testing.T) {
	for _, name := range []string{"../../../etc/passwd", "x/y.md", "bad\x00.md", "esc\x1b[31m.md"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			v := hostile.NewVFS(vhome)
			v.Writable = true
			v.Add(vhome+"/victim", hostile.File("keep"))
			v.Add(vhome+"/mirror/memory/cards", hostile.Dir()).Extra = []os.FileInfo{hostile.Entry(name, 0o444, 7)}
			before := outsideMirror(v)
			r, _ := vfsPublish(t, dialVFS(t, v), nil)
			if r.Outcome != OutcomeError {
				t.Fatalf("outcome %s; want an error", r.Outcome)
			}
			if after := outsideMirror(v); !slices.Equal(before, after) || string(v.Node(vhome+"/victim").Data) != "keep" {
				t.Errorf("outside the mirror: %q, then %q", before, after)
			}
			for _, req := range v.Requests() {
				if strings.HasPrefix(req, "Write ") || strings.HasPrefix(req, "Rename ") || strings.HasPrefix(req, "Remove ") {
					t.Errorf("a refused mirror still did %s", req)
				}
			}
		})
	}
}

// TestPublishLyingSizes: a host that lists every file at a size other
// than it holds gets the files again each run, and is never read from.
// Invariant: nothing read from the host but listings; nothing written
// outside the mirror path.
func TestPublishLyingSizes(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	f := dialVFS(t, v)
	r, st := vfsPublish(t, f, nil)
	mustOK(t, r)
	for _, p := range v.Paths() {
		if n := v.Node(p); n.Mode.IsRegular() {
			n.Size = 1 << 40 // what LSTAT and READDIR now say
		}
	}
	r, _ = vfsPublish(t, f, st)
	mustOK(t, r)
	if !slices.Contains(r.Sent, "memory/cards/a.md") {
		t.Errorf("a file the host lies about was not sent again: %q", r.Sent)
	}
	for _, req := range v.Requests() {
		if strings.HasPrefix(req, "Open ") {
			t.Errorf("the publisher read from the host: %s", req)
		}
	}
	if got := string(v.Node(vhome + "/mirror/memory/cards/a.md").Data); got != "card a\n" {
		t.Errorf("a.md holds %q", got)
	}
	if out := outsideMirror(v); !slices.Equal(out, []string{"/", "/home", vhome}) {
		t.Errorf("paths outside the mirror: %q", out)
	}
}

// TestPublishEndlessListing: a directory that lists without end fails the
// mirror at the listing bound, promptly. Invariant: the canonical host
// reads no more than the bound; nothing is written.
func TestPublishEndlessListing(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	v.Add(vhome+"/mirror/memory/cards", hostile.Dir()).List = func(dst []os.FileInfo, off int64) (int, error) {
		for i := range dst {
			dst[i] = hostile.Entry(fmt.Sprintf("c%09d.md", off+int64(i)), 0o444, 10)
		}
		return len(dst), nil
	}
	r, _ := vfsPublish(t, dialVFS(t, v), nil)
	if r.Outcome != OutcomeError {
		t.Fatalf("outcome %s; want an error", r.Outcome)
	}
	for _, req := range v.Requests() {
		if strings.HasPrefix(req, "Write ") {
			t.Errorf("wrote after an endless listing: %s", req)
		}
	}
}

// TestPublishStalledHost: a host that stops answering mid-publish (its
// rename never returns) cannot hold the publisher past its deadline.
// Invariant: the publish ends with an error once its context does, long
// before the server would have answered.
func TestPublishStalledHost(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	release := make(chan struct{})
	defer close(release)
	v.Rename = func(from, to string) (bool, error) {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
		return true, os.ErrPermission
	}
	f := dialVFS(t, v)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		r, _ := Publish(ctx, f, nil, Options{Host: "stalled", Dir: "~/mirror", Files: files("TOOLS.md", "x\n"), Now: time.Now()})
		done <- r
	}()
	select {
	case r := <-done:
		if r.Outcome != OutcomeError {
			t.Fatalf("outcome %s; want an error", r.Outcome)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the publish was still waiting on a stalled host 30 s after its 0.5 s deadline")
	}
}

// mutationsOutside returns the changes the server made outside the
// mirror directory, as its mutation log records them (symlinks it
// followed resolved).
func mutationsOutside(v *hostile.VFS, mirror string) []string {
	var out []string
	inside := func(p string) bool { return p == mirror || strings.HasPrefix(p, mirror+"/") }
	for _, m := range v.Mutations() {
		_, rest, _ := strings.Cut(m, " ")
		from, to, isRename := strings.Cut(rest, " -> ")
		if !inside(from) || isRename && !inside(to) {
			out = append(out, m)
		}
	}
	return out
}

// outsideData is every regular file outside the mirror with its bytes.
func outsideData(v *hostile.VFS, mirror string) map[string]string {
	out := map[string]string{}
	for _, p := range outsideMirrorOf(v, mirror) {
		if n := v.Node(p); n.Mode.IsRegular() {
			out[p] = string(n.Data)
		}
	}
	return out
}

func outsideMirrorOf(v *hostile.VFS, mirror string) []string {
	var out []string
	for _, p := range v.Paths() {
		if p != mirror && !strings.HasPrefix(p, mirror+"/") {
			out = append(out, p)
		}
	}
	return out
}

// checkConfined asserts that the server changed nothing outside mirror
// and that every file outside it still holds what before recorded.
func checkConfined(t *testing.T, v *hostile.VFS, mirror string, before map[string]string) {
	t.Helper()
	if m := mutationsOutside(v, mirror); len(m) != 0 {
		t.Errorf("changed outside the mirror: %q", m)
	}
	if after := outsideData(v, mirror); !maps.Equal(before, after) {
		t.Errorf("outside the mirror: %q, then %q", before, after)
	}
}

func publishTo(t *testing.T, f *sshfs.FS, dir string, st *State, fs []File) (Result, *State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Publish(ctx, f, st, Options{Host: "hostile", Dir: dir, Files: fs, Canonical: "c", WorkspaceID: "ws-1", RunID: "r", Now: time.Now()})
}

// TestPublishSymlinkedParentNoMirrorYet: ~/.openclaw is a symlink to
// ~/elsewhere, the mirror ~/.openclaw/mirror does not exist yet, and the
// server's LSTAT follows symlinks and its REALPATH answers a missing path
// without looking. The path is proved from its deepest existing
// ancestor, whose REALPATH is ~/elsewhere. Invariant: nothing written,
// renamed or removed anywhere, on the server's mutation log.
func TestPublishSymlinkedParentNoMirrorYet(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable, v.FollowSymlinks, v.RealPathLexical = true, true, true
	v.Add(vhome+"/elsewhere", hostile.Dir())
	v.Add(vhome+"/.openclaw", hostile.Symlink(vhome+"/elsewhere"))
	r, _ := publishTo(t, dialVFS(t, v), "~/.openclaw/mirror", nil, files("TOOLS.md", "tools\n"))
	if r.Outcome != OutcomeError || !strings.Contains(r.Error, "symlink") {
		t.Errorf("outcome %s (%s); want an error naming the symlink", r.Outcome, r.Error)
	}
	if m := v.Mutations(); len(m) != 0 {
		t.Errorf("the server changed %q", m)
	}
}

// TestPublishDroppedWrites: the server acknowledges every WRITE and
// stores nothing; the handle's FSTAT says so. Invariant: no file that
// does not hold its bytes is renamed into the mirror, MIRROR.json is not
// written, and the result is an error.
func TestPublishDroppedWrites(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable, v.DropWrites = true, true
	r, _ := publishTo(t, dialVFS(t, v), "~/mirror", nil, files("memory/cards/a.md", "card a\n", "TOOLS.md", "tools\n"))
	if r.Outcome != OutcomeError || !strings.Contains(r.Error, "did not store") {
		t.Errorf("outcome %s (%s); want an error saying the host did not store it", r.Outcome, r.Error)
	}
	for _, m := range v.Mutations() {
		if strings.HasPrefix(m, "Rename ") {
			t.Errorf("a file was renamed into place: %s", m)
		}
	}
	for _, p := range v.Paths() {
		if n := v.Node(p); n.Mode.IsRegular() {
			t.Errorf("%s is left on the host (%d bytes)", p, n.Size)
		}
	}
	if len(r.Sent) != 0 || r.Generation != 0 {
		t.Errorf("result says sent %q, generation %d; nothing was", r.Sent, r.Generation)
	}
}

// TestPublishServerFollowsEverywhere: the server's LSTAT, READDIR,
// RENAME and REMOVE all follow symlinks, so a symlinked TOOLS.md looks
// like a regular file to everything but REALPATH. Invariant: nothing
// outside the mirror is written, renamed or removed (mutation log), and
// every file outside keeps its bytes; the mirror fails naming the entry.
func TestPublishServerFollowsEverywhere(t *testing.T) {
	setup := func() *hostile.VFS {
		v := hostile.NewVFS(vhome)
		v.Writable, v.FollowSymlinks, v.FollowInListings, v.FollowRenameTarget = true, true, true, true
		v.Add(vhome+"/outside/TOOLS.md", hostile.File("the victim's tools\n"))
		v.Add(vhome+"/outside/stale-victim.md", hostile.File("the victim's card\n"))
		return v
	}
	fs := files("memory/cards/a.md", "card a\n", "TOOLS.md", "tools\n")
	t.Run("symlinked document", func(t *testing.T) {
		v := setup()
		v.Add(vhome+"/mirror/TOOLS.md", hostile.Symlink(vhome+"/outside/TOOLS.md"))
		before := outsideData(v, vhome+"/mirror")
		r, _ := publishTo(t, dialVFS(t, v), "~/mirror", nil, fs)
		if r.Outcome != OutcomeError || !strings.Contains(r.Error, "TOOLS.md") {
			t.Errorf("outcome %s (%s); want an error naming TOOLS.md", r.Outcome, r.Error)
		}
		checkConfined(t, v, vhome+"/mirror", before)
	})
	t.Run("symlinked stray card", func(t *testing.T) {
		v := setup()
		f := dialVFS(t, v)
		r, st := publishTo(t, f, "~/mirror", nil, fs)
		mustOK(t, r)
		v.Add(vhome+"/mirror/memory/cards/stale-victim.md", hostile.Symlink(vhome+"/outside/stale-victim.md"))
		before := outsideData(v, vhome+"/mirror")
		r, _ = publishTo(t, f, "~/mirror", st, fs)
		if r.Outcome != OutcomeError || !strings.Contains(r.Error, "stale-victim.md") {
			t.Errorf("outcome %s (%s); want an error naming stale-victim.md", r.Outcome, r.Error)
		}
		checkConfined(t, v, vhome+"/mirror", before)
	})
}

// TestPublishDirSwappedAfterLookup: at the first mutating request inside
// the mirror, the server swaps the mirror directory for a symlink to
// ~/outside. The temporary file lands outside (no SFTP client can stop
// that), but its real place is checked before its rename. Invariant:
// nothing outside the mirror is renamed over or removed but the
// publisher's own temporary file, every file outside keeps its bytes,
// none is left behind, and the mirror fails.
func TestPublishDirSwappedAfterLookup(t *testing.T) {
	v := hostile.NewVFS(vhome)
	v.Writable = true
	v.Add(vhome+"/mirror", hostile.Dir())
	v.Add(vhome+"/outside/TOOLS.md", hostile.File("the victim's tools\n"))
	v.Add(vhome+"/outside/MIRROR.json", hostile.File("the victim's json\n"))
	v.SwapDir, v.SwapTarget = vhome+"/mirror", vhome+"/outside"
	before := outsideData(v, vhome+"/mirror")
	r, _ := publishTo(t, dialVFS(t, v), "~/mirror", nil, files("TOOLS.md", "tools\n"))
	if r.Outcome != OutcomeError {
		t.Errorf("outcome %s; want an error", r.Outcome)
	}
	for _, m := range mutationsOutside(v, vhome+"/mirror") {
		_, p, _ := strings.Cut(m, " ")
		if !strings.HasPrefix(path.Base(p), tmpPrefix) {
			t.Errorf("changed outside the mirror: %s", m)
		}
	}
	if after := outsideData(v, vhome+"/mirror"); !maps.Equal(before, after) {
		t.Errorf("outside the mirror: %q, then %q", before, after)
	}
}

// TestPublishHomeIsRoot: a login whose home is "/" (an SFTP-only chroot)
// gets its mirror at /.openclaw/mirror, which is inside that home.
// Invariant: nothing is made outside the mirror's path.
func TestPublishHomeIsRoot(t *testing.T) {
	v := hostile.NewVFS("/")
	v.Writable = true
	r, _ := publishTo(t, dialVFS(t, v), "~/.openclaw/mirror", nil, files("TOOLS.md", "tools\n"))
	mustOK(t, r)
	if got := string(v.Node("/.openclaw/mirror/TOOLS.md").Data); got != "tools\n" {
		t.Errorf("TOOLS.md holds %q", got)
	}
	for _, m := range mutationsOutside(v, "/.openclaw/mirror") {
		if m != "Mkdir /.openclaw" && m != "Setstat /.openclaw" {
			t.Errorf("changed outside the mirror's path: %s", m)
		}
	}
}
