package claim_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/internal/testkit/testenv"
	"github.com/handoff-sync/handoff/transport"
)

// now is the fixed clock every test pull runs at; old is an mtime well past
// the settle time.
var (
	now = time.Date(2026, 4, 20, 15, 37, 0, 0, time.UTC)
	old = now.Add(-time.Hour)
)

const (
	mib    = 1 << 20
	settle = 10 * time.Second
	runID  = "20260420T153700Z-test"
)

// parses is the stand-in for the ingester's parser: a handoff starts with
// the "# Memory Handoff" line.
func parses(data []byte) bool { return bytes.HasPrefix(data, []byte("# Memory Handoff\n")) }

// fixture returns the bytes of a file in testdata/.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tempRoot is t.TempDir with every symlink resolved, so that paths the code
// reports compare equal to the ones the test builds.
func tempRoot(t *testing.T) string { return testenv.RealTempDir(t) }

// build creates entries below root. Each spec is a slash-separated path
// relative to root:
//
//	"a/b/"        a directory
//	"a/x.md"      a file holding a valid handoff, an hour old
//	"a/l -> t"    a symlink a/l whose target is t, verbatim
//	"a/p |fifo"   a FIFO named a/p
func build(t *testing.T, root string, specs ...string) {
	t.Helper()
	for _, s := range specs {
		switch {
		case strings.HasSuffix(s, "/"):
			mkdirAll(t, filepath.Join(root, s))
		case strings.Contains(s, " -> "):
			name, target, _ := strings.Cut(s, " -> ")
			p := filepath.Join(root, name)
			mkdirAll(t, filepath.Dir(p))
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(s, " |fifo"):
			p := filepath.Join(root, strings.TrimSuffix(s, " |fifo"))
			mkdirAll(t, filepath.Dir(p))
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			writeFile(t, filepath.Join(root, s), []byte("# Memory Handoff\n\n## Type\nworkflow\n\n## Title\n"+filepath.Base(s)+"\n"), old)
		}
	}
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to p (creating its directory) and sets its mtime.
func writeFile(t *testing.T, p string, data []byte, mtime time.Time) {
	t.Helper()
	mkdirAll(t, filepath.Dir(p))
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// snapshot describes every entry below root (never following a symlink),
// so that a test can prove a tree was left exactly as it was.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		case fi.IsDir():
			out[rel] = "dir"
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file:" + sha(data) + ":" + fi.ModTime().UTC().Format(time.RFC3339Nano)
		default:
			out[rel] = "other:" + fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertSameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	testenv.SameTree(t, what, before, after)
}

// fakeRecorder is an in-memory ledger. It keeps every call in one event log
// that guardFS appends its renames to, so tests can check the order.
type fakeRecorder struct {
	mu         sync.Mutex
	sources    map[string]claim.Source
	archived   map[string]bool
	events     []string
	failRecord error // returned by StoreSources when set
}

var _ claim.Recorder = (*fakeRecorder)(nil)

func newRecorder() *fakeRecorder {
	return &fakeRecorder{sources: map[string]claim.Source{}, archived: map[string]bool{}}
}

func srcKey(inbox, name, sha string) string { return inbox + "\x00" + name + "\x00" + sha }

// StoreSources records srcs; their contents are in the test's spool
// already (storingRecorder puts them there first). A source without its
// content fails the test: the pull must hand every source's bytes.
func (r *fakeRecorder) StoreSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failRecord != nil {
		return 0, r.failRecord
	}
	n := 0
	for _, s := range srcs {
		if data, ok := contents[s.SHA256]; contents != nil && (!ok || spool.Hash(data) != s.SHA256) {
			return 0, fmt.Errorf("invariant violated (no source recorded without its bytes): %s came without its content", s.Name)
		}
		r.events = append(r.events, "record "+s.Name)
		k := srcKey(s.Inbox, s.Name, s.SHA256)
		if _, ok := r.sources[k]; !ok {
			r.sources[k] = s
			n++
		}
	}
	return n, nil
}

func (r *fakeRecorder) MarkArchived(ctx context.Context, srcs []claim.Source) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range srcs {
		r.events = append(r.events, "archived "+s.Name)
		r.archived[srcKey(s.Inbox, s.Name, s.SHA256)] = true
	}
	return nil
}

func (r *fakeRecorder) Unarchived(ctx context.Context, host string) ([]claim.Source, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []claim.Source
	for k, s := range r.sources {
		if s.Host == host && !r.archived[k] {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Inbox != out[j].Inbox {
			return out[i].Inbox < out[j].Inbox
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// recordedNames are the names recorded, in the order they were.
func (r *fakeRecorder) recordedNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, ev := range r.events {
		if name, ok := strings.CutPrefix(ev, "record "); ok {
			names = append(names, name)
		}
	}
	return names
}

func (r *fakeRecorder) event(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *fakeRecorder) source(inbox, name, sha string) (claim.Source, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sources[srcKey(inbox, name, sha)]
	return s, ok
}

func (r *fakeRecorder) isArchived(inbox, name, sha string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.archived[srcKey(inbox, name, sha)]
}

func (r *fakeRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sources)
}

// assertOrder checks that name was recorded, then renamed, then marked
// archived, in that order.
func (r *fakeRecorder) assertOrder(t *testing.T, name string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := func(e string) int {
		for i, ev := range r.events {
			if ev == e {
				return i
			}
		}
		return -1
	}
	rec, ren, arch := idx("record "+name), idx("rename "+name), idx("archived "+name)
	if rec < 0 || ren < 0 || arch < 0 || !(rec < ren && ren < arch) {
		t.Errorf("events for %s out of order (want record < rename < archived): %q", name, r.events)
	}
}

// guardFS is the local transport with the pipeline's invariants checked at
// the moment they matter:
//
//   - no remote copy archived before local storage: a Rename into
//     processed/ or malformed/ of a file that could have been claimed
//     (regular, within the size limit) is an error unless its bytes are
//     already in the spool and its source is recorded;
//   - nothing written outside the inbox: every Rename, Mkdir and Remove must
//     name a path below within;
//
// and it logs every ReadFile so tests can prove a file was never read.
type guardFS struct {
	transport.Local
	t      *testing.T
	spool  spool.Store
	rec    *fakeRecorder
	within string
	max    int64

	// beforeRead runs before ReadFile delegates; beforeRename after the
	// invariant check and before Rename delegates.
	beforeRead   func(name string)
	beforeRename func(oldname, newname string)
	// readFail, when set, may fail a read the way a host that answers
	// but refuses one file does.
	readFail func(name string) error

	mu    sync.Mutex
	reads []string
}

var _ transport.FS = (*guardFS)(nil)

func (g *guardFS) checkWithin(op, name string) {
	if name != g.within && !strings.HasPrefix(name, g.within+"/") {
		g.t.Errorf("invariant violated (nothing written outside the inbox): %s %q is outside %q", op, name, g.within)
	}
}

func (g *guardFS) ReadFile(ctx context.Context, name string, limit int64) ([]byte, transport.FileInfo, error) {
	g.mu.Lock()
	g.reads = append(g.reads, name)
	g.mu.Unlock()
	if g.beforeRead != nil {
		g.beforeRead(name)
	}
	if g.readFail != nil {
		if err := g.readFail(name); err != nil {
			return nil, transport.FileInfo{}, err
		}
	}
	return g.Local.ReadFile(ctx, name, limit)
}

func (g *guardFS) Rename(ctx context.Context, oldname, newname string) error {
	g.checkWithin("rename from", oldname)
	g.checkWithin("rename to", newname)
	dir := filepath.Base(filepath.Dir(newname))
	archiving := dir == claim.ProcessedDir || dir == claim.MalformedDir
	if fi, err := os.Lstat(oldname); err == nil && archiving && fi.Mode().IsRegular() && fi.Size() <= g.max {
		data, err := os.ReadFile(oldname)
		if err != nil {
			g.t.Errorf("guard: %v", err)
		} else {
			h := sha(data)
			if ok, err := g.spool.Has(h); err != nil || !ok {
				g.t.Errorf("invariant violated (no remote copy archived before local storage): %q renamed to %q while the spool lacks %s (err %v)", oldname, newname, h[:12], err)
			}
			if _, ok := g.rec.source(filepath.Dir(oldname), filepath.Base(oldname), h); !ok {
				g.t.Errorf("invariant violated (no remote copy archived before local storage): %q renamed to %q before its source was recorded", oldname, newname)
			}
		}
	}
	g.rec.event("rename " + filepath.Base(oldname))
	if g.beforeRename != nil {
		g.beforeRename(oldname, newname)
	}
	return g.Local.Rename(ctx, oldname, newname)
}

func (g *guardFS) Mkdir(ctx context.Context, name string) error {
	g.checkWithin("mkdir", name)
	return g.Local.Mkdir(ctx, name)
}

func (g *guardFS) Remove(ctx context.Context, name string) error {
	g.checkWithin("remove", name)
	return g.Local.Remove(ctx, name)
}

// wasRead reports whether ReadFile was called on name.
func (g *guardFS) wasRead(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.reads {
		if r == name {
			return true
		}
	}
	return false
}

func (g *guardFS) readCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reads)
}

func openSpool(t *testing.T) *spool.Dir {
	t.Helper()
	s, err := spool.Open(filepath.Join(tempRoot(t), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// baseConfig is a host config with the manifest defaults and the fixed clock.
func baseConfig() claim.Config {
	return claim.Config{
		Host:        "laptop",
		Transport:   "local",
		Harnesses:   []string{".claude", ".codex"},
		MaxFileSize: mib,
		Settle:      settle,
		Now:         func() time.Time { return now },
	}
}

// pull runs claim.Pull in a goroutine and fails the test if it has not
// returned within 10 s: a pull must never hang, whatever the host holds.
func pull(t *testing.T, fsys transport.FS, cfg claim.Config, sp spool.Store, rec claim.Recorder) claim.HostReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan claim.HostReport, 1)
	go func() { done <- claim.Pull(ctx, fsys, cfg, storingRecorder{sp, rec}, runID, parses) }()
	select {
	case rep := <-done:
		return rep
	case <-time.After(10 * time.Second):
		t.Fatal("invariant violated (never hang): Pull did not return within 10s")
		return claim.HostReport{}
	}
}

// storingRecorder puts a batch's contents into a test's spool, then records
// them with the recorder below: the ledger's one commit, in two steps
// that a test can look between.
type storingRecorder struct {
	sp spool.Store
	claim.Recorder
}

func (s storingRecorder) StoreSources(ctx context.Context, runID string, srcs []claim.Source, contents map[string][]byte) (int, error) {
	if err := s.sp.Put(contents); err != nil {
		return 0, err
	}
	return s.Recorder.StoreSources(ctx, runID, srcs, contents)
}

func discover(t *testing.T, fsys transport.FS, cfg claim.Config) []*claim.Inbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := claim.Discover(ctx, fsys, cfg)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return got
}

func names(fis []transport.FileInfo) []string {
	out := []string{}
	for _, fi := range fis {
		out = append(out, fi.Name)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func equalStrings(a, b []string) bool {
	a, b = sorted(a), sorted(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
