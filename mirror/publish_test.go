package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/transport"
)

// localHome is a Local transport whose home is a test directory.
type localHome struct {
	transport.Local
	home string
}

func (l localHome) Home(context.Context) (string, error) { return l.home, nil }

func files(kv ...string) []File {
	var out []File
	for i := 0; i < len(kv); i += 2 {
		out = append(out, NewFile(kv[i], []byte(kv[i+1])))
	}
	return out
}

func publish(t *testing.T, fsys transport.FS, st *State, fs []File, dry bool) (Result, *State) {
	t.Helper()
	return Publish(context.Background(), fsys, st, Options{Host: "laptop", Dir: "~/mirror", Files: fs,
		Canonical: "canon", RunID: "run-1", Now: time.Unix(1700000000, 0), DryRun: dry})
}

func mustOK(t *testing.T, r Result) {
	t.Helper()
	if r.Outcome != OutcomeOK {
		t.Fatalf("outcome %s: %s", r.Outcome, r.Error)
	}
}

// TestPublishLocal: the first publish sends everything and sha256sum -c
// passes; a second sends nothing; a change sends only that file; a file
// gone from canonical memory is removed; a hand edit is restored.
func TestPublishLocal(t *testing.T) {
	home := t.TempDir()
	fsys := localHome{home: home}
	dir := filepath.Join(home, "mirror")
	v1 := files("memory/cards/a.md", "card a\n", "memory/cards/b.md", "card b\n", "TOOLS.md", "tools\n", "HANDOFF.md", "guide\n")

	r, st := publish(t, fsys, nil, v1, false)
	mustOK(t, r)
	if want := []string{"HANDOFF.md", "TOOLS.md", "memory/cards/a.md", "memory/cards/b.md", "SHA256SUMS", "MIRROR.json"}; !slices.Equal(r.Sent, want) {
		t.Errorf("first publish sent %q; want %q", r.Sent, want)
	}
	if r.Generation != 1 || st.Generation != 1 {
		t.Errorf("generation %d/%d; want 1", r.Generation, st.Generation)
	}
	sha256sumCheck(t, dir)
	for _, f := range v1 {
		fi, err := os.Lstat(filepath.Join(dir, f.Path))
		if err != nil || fi.Mode().Perm() != 0o444 {
			t.Errorf("%s: %v, mode %v; want 0444", f.Path, err, fi.Mode())
		}
	}
	var info Info
	data, _ := os.ReadFile(filepath.Join(dir, InfoFile))
	if err := json.Unmarshal(data, &info); err != nil || !info.Complete || info.Generation != 1 || info.Files != 4 || info.Canonical != "canon" {
		t.Errorf("MIRROR.json = %s (%v)", data, err)
	}

	r, st = publish(t, fsys, st, v1, false)
	mustOK(t, r)
	if len(r.Sent)+len(r.Removed) != 0 || r.Generation != 1 {
		t.Errorf("unchanged publish sent %q removed %q gen %d; want nothing", r.Sent, r.Removed, r.Generation)
	}

	v2 := files("memory/cards/a.md", "card a, updated\n", "TOOLS.md", "tools\n", "HANDOFF.md", "guide\n")
	r, st = publish(t, fsys, st, v2, false)
	mustOK(t, r)
	if want := []string{"memory/cards/a.md", "SHA256SUMS", "MIRROR.json"}; !slices.Equal(r.Sent, want) || !slices.Equal(r.Removed, []string{"memory/cards/b.md"}) {
		t.Errorf("sent %q removed %q; want %q and b.md", r.Sent, r.Removed, want)
	}
	if _, err := os.Lstat(filepath.Join(dir, "memory/cards/b.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("b.md still there: %v", err)
	}
	sha256sumCheck(t, dir)

	// A hand edit (size changes) and a hand removal are restored.
	a := filepath.Join(dir, "memory/cards/a.md")
	os.Chmod(a, 0o644)
	os.WriteFile(a, []byte("edited by hand\n"), 0o644)
	os.Remove(filepath.Join(dir, "TOOLS.md"))
	r, _ = publish(t, fsys, st, v2, false)
	mustOK(t, r)
	if want := []string{"TOOLS.md", "memory/cards/a.md", "MIRROR.json"}; !slices.Equal(r.Sent, want) || r.Generation != 3 {
		t.Errorf("restore sent %q gen %d; want %q, 3", r.Sent, r.Generation, want)
	}
	sha256sumCheck(t, dir)
}

// TestPublishDryRun: a dry run lists what it would send and writes
// nothing (invariant: nothing written on the host).
func TestPublishDryRun(t *testing.T) {
	home := t.TempDir()
	before := testenv.TreeHash(t, home)
	r, st := publish(t, localHome{home: home}, nil, files("memory/cards/a.md", "a\n"), true)
	mustOK(t, r)
	if !slices.Equal(r.Sent, []string{"memory/cards/a.md", "SHA256SUMS", "MIRROR.json"}) || st.Generation != 0 {
		t.Errorf("dry run: sent %q, state gen %d", r.Sent, st.Generation)
	}
	if after := testenv.TreeHash(t, home); after != before {
		t.Error("a dry run changed the host")
	}
}

// TestPublishRefuses: each way a host's tree can be wrong stops the
// mirror with an error, and nothing outside the mirror directory changes
// (nor, where the problem is the path, inside it).
func TestPublishRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, home string)
		want  string
	}{
		{"symlinked mirror", func(t *testing.T, home string) {
			os.Mkdir(filepath.Join(home, "elsewhere"), 0o700)
			os.Symlink(filepath.Join(home, "elsewhere"), filepath.Join(home, "mirror"))
		}, "is a symlink"},
		{"symlinked cards dir", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror/memory"), 0o700)
			os.Mkdir(filepath.Join(home, "elsewhere"), 0o700)
			os.Symlink(filepath.Join(home, "elsewhere"), filepath.Join(home, "mirror/memory/cards"))
		}, "symlink"},
		{"symlinked card", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror/memory/cards"), 0o700)
			os.WriteFile(filepath.Join(home, "victim"), []byte("keep"), 0o600)
			os.Symlink(filepath.Join(home, "victim"), filepath.Join(home, "mirror/memory/cards/a.md"))
		}, "symlink"},
		{"fifo where a card goes", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror/memory/cards"), 0o700)
			syscall.Mkfifo(filepath.Join(home, "mirror/memory/cards/a.md"), 0o600)
		}, "named pipe"},
		{"directory where a card goes", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror/memory/cards/a.md"), 0o700)
		}, "is a directory where the mirror keeps a file"},
		{"file where a directory goes", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror"), 0o700)
			os.WriteFile(filepath.Join(home, "mirror/memory"), nil, 0o600)
		}, "a file where the mirror keeps a directory"},
		{"odd name", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "mirror/memory/cards"), 0o700)
			os.WriteFile(filepath.Join(home, "mirror/memory/cards/x\x1b[2J.md"), nil, 0o600)
		}, "a name no file has"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			tc.setup(t, home)
			before := testenv.TreeHash(t, home)
			r, _ := publish(t, localHome{home: home}, nil, files("memory/cards/a.md", "a\n"), false)
			if r.Outcome != OutcomeError || !strings.Contains(r.Error, tc.want) {
				t.Fatalf("outcome %s %q; want an error saying %q", r.Outcome, r.Error, tc.want)
			}
			if after := testenv.TreeHash(t, home); after != before {
				t.Error("a refused mirror changed the host")
			}
		})
	}
	// The home itself, and above it.
	for _, dir := range []string{"~", "~/..", "/"} {
		home := t.TempDir()
		r, _ := Publish(context.Background(), localHome{home: home}, nil, Options{Host: "h", Dir: dir, Files: files("TOOLS.md", "x")})
		if r.Outcome != OutcomeError || !strings.Contains(r.Error, "home directory or above") {
			t.Errorf("dir %q: %s %q", dir, r.Outcome, r.Error)
		}
	}
}

// TestPublishCleansLeftovers: temporary files a crashed publish left are
// removed by the next, and the mirror completes (invariant: a crash never
// leaves a file of the mirror with other than its old or new bytes).
func TestPublishCleansLeftovers(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "mirror")
	fsys := localHome{home: home}
	v1 := files("memory/cards/a.md", "a\n")
	r, st := publish(t, fsys, nil, v1, false)
	mustOK(t, r)
	leftover := filepath.Join(dir, "memory/cards", tmpPrefix+"0123")
	os.WriteFile(leftover, []byte("half"), 0o444)
	r, _ = publish(t, fsys, st, v1, false)
	mustOK(t, r)
	if _, err := os.Lstat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("leftover still there: %v", err)
	}
	sha256sumCheck(t, dir)
}

// sha256sumCheck runs sha256sum -c SHA256SUMS in dir, and checks that
// every listed hash is the file's.
func sha256sumCheck(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "--strict", "-c", SumsFile)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c: %v\n%s", err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		b, err := os.ReadFile(filepath.Join(dir, name))
		h := sha256.Sum256(b)
		if err != nil || hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: %v, hash differs from SHA256SUMS", name, err)
		}
	}
}

// noReplace is a host whose server cannot replace atomically (no
// posix-rename@openssh.com) and whose rename refuses an existing name.
type noReplace struct{ localHome }

func (noReplace) Replace(context.Context, string, string) error { return transport.ErrUnsupported }

// TestPublishWithoutPosixRename: without posix-rename, a changed file is
// swapped in by moving the old one aside; the mirror ends exact, with no
// file left aside.
func TestPublishWithoutPosixRename(t *testing.T) {
	home := t.TempDir()
	fsys := noReplace{localHome{home: home}}
	dir := filepath.Join(home, "mirror")
	r, st := publish(t, fsys, nil, files("memory/cards/a.md", "v1\n"), false)
	mustOK(t, r)
	r, _ = publish(t, fsys, st, files("memory/cards/a.md", "v2\n"), false)
	mustOK(t, r)
	if got, _ := os.ReadFile(filepath.Join(dir, "memory/cards/a.md")); string(got) != "v2\n" {
		t.Errorf("a.md = %q; want v2", got)
	}
	sha256sumCheck(t, dir)
	for k := range testenv.Tree(t, dir) {
		if strings.Contains(k, ".handoff-") {
			t.Errorf("left behind: %s", k)
		}
	}
}

// TestPublishOneWorkspacePerMirror: a mirror whose MIRROR.json names
// another workspace is not written; --adopt-mirror takes it over with
// the generation carried on. A mirror this workspace never published to
// keeps the files it does not know. Invariant: a mirror refused is
// byte-identical afterwards; a generation never goes backwards.
func TestPublishOneWorkspacePerMirror(t *testing.T) {
	home := t.TempDir()
	fsys := localHome{home: home}
	dir := filepath.Join(home, "mirror")
	pub := func(ws string, st *State, adopt bool, fs []File) (Result, *State) {
		return Publish(context.Background(), fsys, st, Options{Host: "laptop", Dir: "~/mirror", Files: fs,
			Canonical: "canon", WorkspaceID: ws, Adopt: adopt, RunID: "run", Now: time.Unix(1700000000, 0)})
	}
	r, _ := pub("ws-a", nil, false, files("memory/cards/a.md", "card a\n"))
	mustOK(t, r)
	r, _ = pub("ws-a", nil, false, files("memory/cards/a.md", "card a2\n")) // state lost: generation from the host
	mustOK(t, r)
	if r.Generation != 2 {
		t.Errorf("generation %d after a publish with no state; want 2 (the host's 1, plus one)", r.Generation)
	}
	before := testenv.Tree(t, dir)
	r, _ = pub("ws-b", nil, false, files("memory/cards/b.md", "card b\n"))
	if r.Outcome != OutcomeError || !strings.Contains(r.Error, "ws-a") || !strings.Contains(r.Error, "ws-b") || !strings.Contains(r.Error, "--adopt-mirror laptop") {
		t.Errorf("another workspace's publish: %s %q; want an error naming both ids and the way to adopt", r.Outcome, r.Error)
	}
	if after := testenv.Tree(t, dir); !maps.Equal(before, after) {
		t.Errorf("a refused mirror changed:\n%v\n%v", before, after)
	}
	r, _ = pub("ws-b", nil, true, files("memory/cards/b.md", "card b\n"))
	mustOK(t, r)
	var info Info
	data, _ := os.ReadFile(filepath.Join(dir, InfoFile))
	if err := json.Unmarshal(data, &info); err != nil || info.WorkspaceID != "ws-b" || info.Generation != 3 {
		t.Errorf("adopted MIRROR.json = %s (%v); want ws-b, generation 3", data, err)
	}
	if !slices.Equal(r.Removed, []string{"memory/cards/a.md"}) {
		t.Errorf("adopting removed %q; want the old workspace's card", r.Removed)
	}

	// A mirror directory with files and no MIRROR.json: nothing removed.
	dir2 := filepath.Join(home, "other")
	if err := os.MkdirAll(filepath.Join(dir2, "memory/cards"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "memory/cards/theirs.md"), []byte("theirs\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	r, _ = Publish(context.Background(), fsys, nil, Options{Host: "laptop", Dir: "~/other", Files: files("memory/cards/a.md", "a\n"),
		WorkspaceID: "ws-c", RunID: "run", Now: time.Now()})
	mustOK(t, r)
	if len(r.Removed) != 0 {
		t.Errorf("removed %q from a mirror this workspace never published to", r.Removed)
	}
	if _, err := os.Stat(filepath.Join(dir2, "memory/cards/theirs.md")); err != nil {
		t.Errorf("theirs.md: %v", err)
	}
}
