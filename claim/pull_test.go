package claim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
)

// pullEnv is one host with one declared inbox, a spool and a ledger.
type pullEnv struct {
	root    string
	inbox   string // <root>/repo/.claude/memory-handoffs
	outside string // a directory a hostile inbox points into
	spoolAt string
	spool   *spool.Dir
	rec     *fakeRecorder
	fs      *guardFS
	cfg     claim.Config
}

func newPullEnv(t *testing.T) *pullEnv {
	t.Helper()
	root := tempRoot(t)
	e := &pullEnv{root: root, inbox: filepath.Join(root, "repo", ".claude", "memory-handoffs"), outside: filepath.Join(root, "outside")}
	mkdirAll(t, e.inbox)
	mkdirAll(t, e.outside)
	e.spoolAt = filepath.Join(tempRoot(t), "spool")
	sp, err := spool.Open(e.spoolAt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	e.spool = sp
	e.rec = newRecorder()
	e.fs = &guardFS{t: t, spool: e.spool, rec: e.rec, within: e.inbox, max: mib}
	e.cfg = baseConfig()
	e.cfg.Inboxes = []string{e.inbox}
	return e
}

func (e *pullEnv) path(rel string) string { return filepath.Join(e.inbox, rel) }

// put writes an inbox file an hour old.
func (e *pullEnv) put(t *testing.T, rel string, data []byte) {
	t.Helper()
	writeFile(t, e.path(rel), data, old)
}

func (e *pullEnv) source(name string, data []byte, dir string) claim.Source {
	h := sha(data)
	return claim.Source{
		Host: e.cfg.Host, Inbox: e.inbox, Name: name, SHA256: h, Size: int64(len(data)),
		ArchivedAs: path.Join(dir, claim.ArchiveName(name, h)), Parses: dir == claim.ProcessedDir,
	}
}

// assertStored checks the whole life of a stored handoff: its exact bytes
// in the spool, its source recorded, then renamed to dir/<stem>.<sha12>.md,
// then marked archived, in that order.
func (e *pullEnv) assertStored(t *testing.T, name string, data []byte, dir string) {
	t.Helper()
	h := sha(data)
	if got, err := e.spool.Get(h); err != nil || string(got) != string(data) {
		t.Errorf("%s: spool holds %d bytes (err %v), want the %d bytes read", name, len(got), err, len(data))
	}
	want := e.source(name, data, dir)
	if got, ok := e.rec.source(e.inbox, name, h); !ok {
		t.Errorf("%s: source not recorded", name)
	} else if got != want {
		t.Errorf("%s: recorded %+v, want %+v", name, got, want)
	}
	if _, err := os.Lstat(e.path(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still in the inbox (err %v)", name, err)
	}
	if got, err := os.ReadFile(e.path(want.ArchivedAs)); err != nil || string(got) != string(data) {
		t.Errorf("%s: %s holds %d bytes (err %v), want the original %d", name, want.ArchivedAs, len(got), err, len(data))
	}
	if !e.rec.isArchived(e.inbox, name, h) {
		t.Errorf("%s: not marked archived", name)
	}
	e.rec.assertOrder(t, name)
}

// assertInPlace checks that a file was left in the inbox with its bytes
// and that nothing of it was recorded.
func (e *pullEnv) assertInPlace(t *testing.T, name string, data []byte) {
	t.Helper()
	if got, err := os.ReadFile(e.path(name)); err != nil || string(got) != string(data) {
		t.Errorf("%s: not left in place with its bytes (err %v)", name, err)
	}
	if _, ok := e.rec.source(e.inbox, name, sha(data)); ok {
		t.Errorf("%s: recorded although it was not stored", name)
	}
}

// assertRejected checks that a rejected entry was moved to as without ever
// being read, and that nothing was stored.
func (e *pullEnv) assertRejected(t *testing.T, name, as string) {
	t.Helper()
	if _, err := os.Lstat(e.path(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still in the inbox (err %v)", name, err)
	}
	if _, err := os.Lstat(e.path(as)); err != nil {
		t.Errorf("%s not moved to %s: %v", name, as, err)
	}
	if e.fs.wasRead(e.path(name)) {
		t.Errorf("%s was read although it was rejected", name)
	}
	e.assertSpoolEmpty(t)
}

func (e *pullEnv) assertSpoolEmpty(t *testing.T) {
	t.Helper()
	if n := e.rec.count(); n != 0 {
		t.Errorf("%d sources recorded, want none", n)
	}
	ents, err := os.ReadDir(e.spoolAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("spool holds %d files, want none", len(ents))
	}
}

func (e *pullEnv) assertNoArchiveDirs(t *testing.T) {
	t.Helper()
	for _, d := range []string{claim.ProcessedDir, claim.MalformedDir} {
		if _, err := os.Lstat(e.path(d)); err == nil {
			t.Errorf("%s/ created although nothing was archived", d)
		}
	}
}

type wantItem struct{ name, result, reason, archivedAs string }

// failSpool is a spool whose disk is full.
type failSpool struct{ spool.Store }

func (failSpool) Put(map[string][]byte) error { return errors.New("spool: no space left on device") }

// TestPull runs one host's pull over a hostile or faulty inbox per case.
// Every case runs through guardFS, so every one of them also checks "no
// remote copy archived before local storage" and "nothing written outside
// the inbox" at each rename, and a 10 s bound on Pull ("never hang").
func TestPull(t *testing.T) {
	t.Parallel()
	handoff := fixture(t, "handoff.md")
	malformed := fixture(t, "malformed.md")
	exact := append([]byte("# Memory Handoff\n"), []byte(strings.Repeat("a", mib-len("# Memory Handoff\n")))...)
	over := append(append([]byte{}, exact...), 'b')

	tests := []struct {
		name      string
		setup     func(t *testing.T, e *pullEnv)
		failSpool bool // the spool's Put fails
		outcome   string
		stored    int
		items     []wantItem
		check     func(t *testing.T, e *pullEnv, rep claim.HostReport)
	}{
		{
			// Nothing read or written outside the inbox: a symlink is moved
			// as a link; its target is never opened.
			name: "symlinked handoff is rejected and moved unread",
			setup: func(t *testing.T, e *pullEnv) {
				writeFile(t, filepath.Join(e.outside, "secret.md"), handoff, old)
				if err := os.Symlink(filepath.Join(e.outside, "secret.md"), e.path("x.md")); err != nil {
					t.Fatal(err)
				}
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultRejected, claim.ReasonSymlink, "malformed/x.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "x.md", "malformed/x.md")
				if target, err := os.Readlink(e.path("malformed/x.md")); err != nil || target != filepath.Join(e.outside, "secret.md") {
					t.Errorf("malformed/x.md is not the original link: %q, %v", target, err)
				}
				if got, _ := os.ReadFile(filepath.Join(e.outside, "secret.md")); string(got) != string(handoff) {
					t.Error("link target changed")
				}
				if e.fs.wasRead(filepath.Join(e.outside, "secret.md")) {
					t.Error("link target was read")
				}
			},
		},
		{
			// Never hang: a FIFO has no writer; opening it would block.
			name: "FIFO is rejected without blocking",
			setup: func(t *testing.T, e *pullEnv) {
				build(t, e.inbox, "x.md |fifo")
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultRejected, claim.ReasonNotRegular, "malformed/x.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "x.md", "malformed/x.md")
				if fi, err := os.Lstat(e.path("malformed/x.md")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
					t.Errorf("malformed/x.md is not the FIFO: %v", err)
				}
			},
		},
		{
			// No handoff lost: a directory with a handoff name is moved whole.
			name: "directory named like a handoff is rejected",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "d.md/inner.md", handoff)
			},
			outcome: "ok",
			items:   []wantItem{{"d.md", claim.ResultRejected, claim.ReasonNotRegular, "malformed/d.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "d.md", "malformed/d.md")
				if got, err := os.ReadFile(e.path("malformed/d.md/inner.md")); err != nil || string(got) != string(handoff) {
					t.Errorf("directory content not kept: %v", err)
				}
			},
		},
		{
			name:    "exactly max_file_size is stored",
			setup:   func(t *testing.T, e *pullEnv) { e.put(t, "big.md", exact) },
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "big.md", exact, claim.ProcessedDir)
			},
		},
		{
			// Read without bound never: an oversize file is moved unread and
			// keeps every byte.
			name:    "one byte over max_file_size is rejected unread",
			setup:   func(t *testing.T, e *pullEnv) { e.put(t, "big.md", over) },
			outcome: "ok",
			items:   []wantItem{{"big.md", claim.ResultRejected, claim.ReasonOversize, "malformed/big.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "big.md", "malformed/big.md")
				if got, err := os.ReadFile(e.path("malformed/big.md")); err != nil || string(got) != string(over) {
					t.Errorf("malformed/big.md lost bytes: %d, %v", len(got), err)
				}
			},
		},
		{
			// No handoff lost: a file still being written is left for later.
			name: "younger than settle is deferred and left in place",
			setup: func(t *testing.T, e *pullEnv) {
				writeFile(t, e.path("young.md"), handoff, now.Add(-settle+time.Second))
			},
			outcome: "ok",
			items:   []wantItem{{"young.md", claim.ResultDeferred, claim.ReasonTooYoung, ""}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlace(t, "young.md", handoff)
				e.assertSpoolEmpty(t)
				e.assertNoArchiveDirs(t)
			},
		},
		{
			name: "exactly settle old is stored",
			setup: func(t *testing.T, e *pullEnv) {
				writeFile(t, e.path("ripe.md"), handoff, now.Add(-settle))
			},
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "ripe.md", handoff, claim.ProcessedDir)
			},
		},
		{
			// No handoff lost: a rejected file never replaces an earlier one.
			name: "rejected name taken in malformed/ gets <stem>.1.md",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "malformed/x.md", malformed)
				build(t, e.inbox, "x.md |fifo")
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultRejected, claim.ReasonNotRegular, "malformed/x.1.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "x.md", "malformed/x.1.md")
				if got, _ := os.ReadFile(e.path("malformed/x.md")); string(got) != string(malformed) {
					t.Error("malformed/x.md was replaced")
				}
			},
		},
		{
			name: "two rejected names taken gets <stem>.2.md",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "malformed/x.md", malformed)
				e.put(t, "malformed/x.1.md", handoff)
				build(t, e.inbox, "x.md |fifo")
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultRejected, claim.ReasonNotRegular, "malformed/x.2.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertRejected(t, "x.md", "malformed/x.2.md")
				if got, _ := os.ReadFile(e.path("malformed/x.1.md")); string(got) != string(handoff) {
					t.Error("malformed/x.1.md was replaced")
				}
			},
		},
		{
			name:    "parsing handoff goes to processed/<stem>.<sha12>.md",
			setup:   func(t *testing.T, e *pullEnv) { e.put(t, "2026-04-20-1537-x.md", handoff) },
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "2026-04-20-1537-x.md", handoff, claim.ProcessedDir)
				if _, err := os.Lstat(e.path("processed/2026-04-20-1537-x." + sha(handoff)[:12] + ".md")); err != nil {
					t.Errorf("archive name: %v", err)
				}
			},
		},
		{
			name:    "unparsable handoff goes to malformed/<stem>.<sha12>.md",
			setup:   func(t *testing.T, e *pullEnv) { e.put(t, "bad.md", malformed) },
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "bad.md", malformed, claim.MalformedDir)
			},
		},
		{
			// None applied twice, none lost: after a crash between store and
			// acknowledge, the next run finds the bytes stored and only
			// acknowledges.
			name: "crash between store and ack: the next run only acknowledges",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				if err := e.spool.Put(map[string][]byte{sha(handoff): handoff}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.rec.StoreSources(context.Background(), "earlier-run", []claim.Source{e.source("x.md", handoff, claim.ProcessedDir)}, nil); err != nil {
					t.Fatal(err)
				}
			},
			outcome: "ok", stored: 0,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "x.md", handoff, claim.ProcessedDir)
				if n := e.rec.count(); n != 1 {
					t.Errorf("%d sources recorded, want the one", n)
				}
			},
		},
		{
			// None lost, none duplicated: a rename interrupted after it
			// created the archive name leaves two copies; the next run drops
			// the inbox copy.
			name: "archive name already holding the same bytes: source removed",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				e.put(t, e.source("x.md", handoff, claim.ProcessedDir).ArchivedAs, handoff)
			},
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				if _, err := os.Lstat(e.path("x.md")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("x.md still in the inbox (err %v)", err)
				}
				if got, _ := os.ReadFile(e.path(e.source("x.md", handoff, claim.ProcessedDir).ArchivedAs)); string(got) != string(handoff) {
					t.Error("archive copy changed")
				}
				if !e.rec.isArchived(e.inbox, "x.md", sha(handoff)) {
					t.Error("not marked archived")
				}
			},
		},
		{
			// No handoff lost: a rename never replaces a file, and a clash
			// leaves the source where it is and says so.
			name: "archive name holding different bytes: source kept, host partial",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				e.put(t, e.source("x.md", handoff, claim.ProcessedDir).ArchivedAs, malformed)
			},
			outcome: "partial", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlaceStored(t, "x.md", handoff)
				if got, _ := os.ReadFile(e.path(e.source("x.md", handoff, claim.ProcessedDir).ArchivedAs)); string(got) != string(malformed) {
					t.Error("the file at the archive name was replaced")
				}
				if !strings.Contains(rep.Error, "x.md") {
					t.Errorf("error %q does not name the file", rep.Error)
				}
			},
		},
		{
			// Nothing written outside the inbox: processed/ pointing elsewhere
			// is never renamed through.
			name: "processed/ is a symlink: nothing renamed through it",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				if err := os.Symlink(e.outside, e.path(claim.ProcessedDir)); err != nil {
					t.Fatal(err)
				}
			},
			outcome: "partial", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlaceStored(t, "x.md", handoff)
				if ents, _ := os.ReadDir(e.outside); len(ents) != 0 {
					t.Errorf("%d entries written through the symlink", len(ents))
				}
			},
		},
		{
			// Nothing written outside the inbox, for rejected files too.
			name: "malformed/ is a symlink: a rejected file is not moved through it",
			setup: func(t *testing.T, e *pullEnv) {
				build(t, e.inbox, "x.md |fifo")
				if err := os.Symlink(e.outside, e.path(claim.MalformedDir)); err != nil {
					t.Fatal(err)
				}
			},
			items: []wantItem{{"x.md", claim.ResultRejected, claim.ReasonNotRegular, ""}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				if ents, _ := os.ReadDir(e.outside); len(ents) != 0 {
					t.Errorf("%d entries written through the symlink", len(ents))
				}
				if fi, err := os.Lstat(e.path("x.md")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
					t.Errorf("x.md not left in place: %v", err)
				}
				for _, it := range rep.Items {
					if it.Name == "x.md" && it.Error == "" {
						t.Error("rejected item does not say it could not be moved")
					}
				}
			},
		},
		{
			// No remote copy archived before local storage.
			name: "spool write fails: nothing archived",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
			},
			failSpool: true,
			outcome:   "error",
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlace(t, "x.md", handoff)
				e.assertNoArchiveDirs(t)
			},
		},
		{
			// No remote copy archived before its source is in the ledger.
			name: "ledger record fails: nothing archived",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				e.rec.failRecord = errors.New("ledger: database is locked")
			},
			outcome: "error",
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlace(t, "x.md", handoff)
				e.assertNoArchiveDirs(t)
			},
		},
		{
			// No handoff lost or torn: a file that changes while it is read
			// is not stored from a half-written state.
			name: "grows during the read: deferred as changing",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				e.fs.beforeRead = onceFor(e.path("x.md"), func() {
					f, err := os.OpenFile(e.path("x.md"), os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						t.Error(err)
						return
					}
					f.WriteString("\nmore\n")
					f.Close()
				})
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultDeferred, claim.ReasonChanging, ""}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlace(t, "x.md", append(append([]byte{}, handoff...), "\nmore\n"...))
				e.assertSpoolEmpty(t)
			},
		},
		{
			// Read without bound never: a file that grew past the limit after
			// it was listed is not read past the limit.
			name: "grows past max_file_size during the read: deferred",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				e.fs.beforeRead = onceFor(e.path("x.md"), func() {
					if err := os.WriteFile(e.path("x.md"), over, 0o644); err != nil {
						t.Error(err)
					}
				})
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultDeferred, claim.ReasonChanging, ""}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertInPlace(t, "x.md", over)
				e.assertSpoolEmpty(t)
			},
		},
		{
			// Nothing read outside the inbox: a name swapped for a symlink
			// between listing and reading is not followed.
			name: "swapped for a symlink after listing: rejected, target unread",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "x.md", handoff)
				writeFile(t, filepath.Join(e.outside, "secret.md"), []byte("# Memory Handoff\nsecret\n"), old)
				e.fs.beforeRead = onceFor(e.path("x.md"), func() {
					os.Remove(e.path("x.md"))
					if err := os.Symlink(filepath.Join(e.outside, "secret.md"), e.path("x.md")); err != nil {
						t.Error(err)
					}
				})
			},
			outcome: "ok",
			items:   []wantItem{{"x.md", claim.ResultRejected, claim.ReasonNotRegular, "malformed/x.md"}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertSpoolEmpty(t)
				if fi, err := os.Lstat(e.path("malformed/x.md")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("malformed/x.md is not the link: %v", err)
				}
			},
		},
		{
			// No handoff lost: more files than one batch holds are all stored
			// and archived.
			name: "more files than one batch",
			setup: func(t *testing.T, e *pullEnv) {
				for i := range 70 {
					e.put(t, fmt.Sprintf("h%03d.md", i), fmt.Appendf(nil, "# Memory Handoff\n\n## Title\nnumber %d\n", i))
				}
			},
			outcome: "ok", stored: 70,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				for i := range 70 {
					e.assertStored(t, fmt.Sprintf("h%03d.md", i), fmt.Appendf(nil, "# Memory Handoff\n\n## Title\nnumber %d\n", i), claim.ProcessedDir)
				}
			},
		},
		{
			// None lost: two names with the same bytes are two sources of one
			// spool entry, both archived.
			name: "same bytes under two names",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "a.md", handoff)
				e.put(t, "b.md", handoff)
			},
			outcome: "ok", stored: 2,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "a.md", handoff, claim.ProcessedDir)
				e.assertStored(t, "b.md", handoff, claim.ProcessedDir)
			},
		},
		{
			// No handoff lost, and one file does not cost the host: a file
			// the host refuses to read (the connection fine) waits in place
			// for the next run with what the host said, and the others are
			// stored and archived.
			name: "a file the host refuses to read is deferred with its error",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "a.md", handoff)
				e.put(t, "bad.md", handoff)
				e.put(t, "c.md", handoff[:len(handoff)-1])
				e.fs.readFail = func(name string) error {
					if filepath.Base(name) == "bad.md" {
						return &os.PathError{Op: "open", Path: name, Err: errors.New("input/output error")}
					}
					return nil
				}
			},
			outcome: "ok", stored: 2,
			items: []wantItem{{"bad.md", claim.ResultDeferred, claim.ReasonReadFailed, ""}},
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "a.md", handoff, claim.ProcessedDir)
				e.assertStored(t, "c.md", handoff[:len(handoff)-1], claim.ProcessedDir)
				e.assertInPlace(t, "bad.md", handoff)
				if len(rep.Items) == 1 && !strings.Contains(rep.Items[0].Error, "input/output error") {
					t.Errorf("deferred item's error %q does not say what the host said", rep.Items[0].Error)
				}
			},
		},
		{
			// Nothing moved that is not a plain *.md name.
			name: "hostile names are reported and left alone",
			setup: func(t *testing.T, e *pullEnv) {
				e.put(t, "ok.md", handoff)
				e.put(t, "a\nb.md", handoff)
				e.put(t, "a\x1b[2Jb.md", handoff)
			},
			outcome: "ok", stored: 1,
			check: func(t *testing.T, e *pullEnv, rep claim.HostReport) {
				e.assertStored(t, "ok.md", handoff, claim.ProcessedDir)
				for _, n := range []string{"a\nb.md", "a\x1b[2Jb.md"} {
					if got, err := os.ReadFile(e.path(n)); err != nil || string(got) != string(handoff) {
						t.Errorf("%q not left alone: %v", n, err)
					}
					if e.fs.wasRead(e.path(n)) {
						t.Errorf("%q was read", n)
					}
				}
				if len(rep.Inboxes) != 1 || !equalStrings(rep.Inboxes[0].Ignored, []string{claim.Quote("a\nb.md"), claim.Quote("a\x1b[2Jb.md")}) || rep.Inboxes[0].IgnoredCount != 2 {
					t.Errorf("inbox report %+v does not list the ignored names", rep.Inboxes)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newPullEnv(t)
			tc.setup(t, e)
			var sp spool.Store = e.spool
			if tc.failSpool {
				sp = failSpool{e.spool}
			}
			outside := snapshot(t, e.outside)
			rep := pull(t, e.fs, e.cfg, sp, e.rec)
			if tc.outcome != "" && rep.Outcome != tc.outcome {
				t.Errorf("outcome %q (error %q), want %q", rep.Outcome, rep.Error, tc.outcome)
			}
			if rep.Outcome == "error" && rep.Error == "" {
				t.Error("outcome error without a message")
			}
			if rep.Stored != tc.stored {
				t.Errorf("stored %d, want %d", rep.Stored, tc.stored)
			}
			if len(rep.Items) != len(tc.items) {
				t.Errorf("items %+v, want %+v", rep.Items, tc.items)
			} else {
				for i, w := range tc.items {
					it := rep.Items[i]
					if it.Inbox != e.inbox || it.Name != w.name || it.Result != w.result || it.Reason != w.reason || it.ArchivedAs != w.archivedAs {
						t.Errorf("item %+v, want %+v", it, w)
					}
				}
			}
			tc.check(t, e, rep)
			assertSameTree(t, "outside the inbox", outside, snapshot(t, e.outside))
		})
	}
}

// assertInPlaceStored checks that a file whose archive failed is still in
// the inbox (so the next run retries), while its bytes are safe in the spool.
func (e *pullEnv) assertInPlaceStored(t *testing.T, name string, data []byte) {
	t.Helper()
	if got, err := os.ReadFile(e.path(name)); err != nil || string(got) != string(data) {
		t.Errorf("%s: not left in place with its bytes (err %v)", name, err)
	}
	if got, err := e.spool.Get(sha(data)); err != nil || string(got) != string(data) {
		t.Errorf("%s: not in the spool (err %v)", name, err)
	}
	if e.rec.isArchived(e.inbox, name, sha(data)) {
		t.Errorf("%s: marked archived although it is still in the inbox", name)
	}
}

// onceFor returns a beforeRead hook that runs fn the first time name is read.
func onceFor(name string, fn func()) func(string) {
	var once sync.Once
	return func(n string) {
		if n == name {
			once.Do(fn)
		}
	}
}

// TestPullSymlinkedInbox protects "nothing read or written outside the
// inbox": an inbox that is a symlink is reported and its files are never
// read or moved.
func TestPullSymlinkedInbox(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	// outside/memory-handoffs is a real inbox; two names lead to it.
	writeFile(t, filepath.Join(e.outside, claim.InboxDir, "x.md"), fixture(t, "handoff.md"), old)
	declared := filepath.Join(e.root, "other", ".claude", claim.InboxDir)
	mkdirAll(t, filepath.Dir(declared))
	if err := os.Symlink(filepath.Join(e.outside, claim.InboxDir), declared); err != nil {
		t.Fatal(err)
	}
	harness := filepath.Join(e.root, "walked", "r", ".claude")
	mkdirAll(t, filepath.Dir(harness))
	if err := os.Symlink(e.outside, harness); err != nil {
		t.Fatal(err)
	}
	e.cfg.Inboxes = []string{declared}
	e.cfg.Roots = []claim.Root{{Path: filepath.Join(e.root, "walked"), MaxDepth: 1}}
	before := snapshot(t, e.outside)
	rep := pull(t, e.fs, e.cfg, e.spool, e.rec)
	if rep.Outcome != "ok" {
		t.Errorf("outcome %q (%s)", rep.Outcome, rep.Error)
	}
	states := map[string]string{}
	for _, ir := range rep.Inboxes {
		states[ir.Path] = ir.State
		if ir.Pending != 0 {
			t.Errorf("inbox %s: pending %d", ir.Path, ir.Pending)
		}
	}
	want := map[string]string{declared: claim.StateSymlink, filepath.Join(harness, claim.InboxDir): claim.StateSymlink}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("inbox states %v, want %v", states, want)
	}
	if n := e.fs.readCount(); n != 0 {
		t.Errorf("%d files read", n)
	}
	assertSameTree(t, "symlink targets", before, snapshot(t, e.outside))
	e.assertSpoolEmpty(t)
}

// TestPullDryRun protects "a dry run writes nothing": no rename or
// directory on the host, nothing in the real store; new content goes only
// to the store the dry run was given (a run gives it a scratch copy of the
// ledger).
func TestPullDryRun(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	data := fixture(t, "handoff.md")
	e.put(t, "x.md", data)
	build(t, e.inbox, "y.md |fifo")
	e.cfg.DryRun = true
	upper, err := spool.Open(filepath.Join(tempRoot(t), "scratch"))
	if err != nil {
		t.Fatal(err)
	}
	defer upper.Close()
	e.fs.spool = upper
	before := snapshot(t, e.inbox)
	rep := pull(t, e.fs, e.cfg, upper, e.rec)
	if rep.Outcome != "ok" {
		t.Errorf("outcome %q (%s)", rep.Outcome, rep.Error)
	}
	assertSameTree(t, "inbox after a dry run", before, snapshot(t, e.inbox))
	if ents, _ := os.ReadDir(e.spoolAt); len(ents) != 0 {
		t.Errorf("dry run wrote %d files to the real spool", len(ents))
	}
	if ok, _ := upper.Has(sha(data)); !ok {
		t.Error("dry run did not claim x.md into the scratch spool")
	}
	if len(rep.Items) != 1 || rep.Items[0].Name != "y.md" || rep.Items[0].Result != claim.ResultRejected {
		t.Errorf("items %+v, want y.md rejected", rep.Items)
	}
}

// TestPullCanceled protects "never hang": a canceled context ends the pull
// with an error and touches nothing.
func TestPullCanceled(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	e.put(t, "x.md", fixture(t, "handoff.md"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := claim.Pull(ctx, e.fs, e.cfg, storingRecorder{e.spool, e.rec}, runID, parses)
	if rep.Outcome != "error" {
		t.Errorf("outcome %q, want error", rep.Outcome)
	}
	e.assertInPlace(t, "x.md", fixture(t, "handoff.md"))
}

// TestPullRewrittenBeforeArchive protects "no handoff lost": a writer that
// replaces a claimed file between its read and its rename must not have the
// new bytes archived unstored.
func TestPullRewrittenBeforeArchive(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	first := fixture(t, "handoff.md")
	second := []byte("# Memory Handoff\n\n## Title\nrewritten after the claim\n")
	e.put(t, "x.md", first)
	var once sync.Once
	e.fs.beforeRename = func(oldname, newname string) {
		if oldname != e.path("x.md") {
			return
		}
		once.Do(func() {
			// An agent rewrites its handoff atomically (temp file + rename).
			writeFile(t, e.path(".x.tmp"), second, old)
			if err := os.Rename(e.path(".x.tmp"), e.path("x.md")); err != nil {
				t.Error(err)
			}
		})
	}
	pull(t, e.fs, e.cfg, e.spool, e.rec)
	// The second version must be either stored or still waiting in the inbox.
	if ok, _ := e.spool.Has(sha(second)); ok {
		return
	}
	if got, err := os.ReadFile(e.path("x.md")); err == nil && string(got) == string(second) {
		return
	}
	var where []string
	filepath.WalkDir(e.inbox, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if got, _ := os.ReadFile(p); string(got) == string(second) {
				where = append(where, strings.TrimPrefix(p, e.inbox+"/"))
			}
		}
		return nil
	})
	t.Errorf("the rewritten handoff is neither stored nor in the inbox; it sits at %q, never to be pulled", where)
}

// slowMkdir holds each MKDIR for a while, so that archives of one inbox
// that each made processed/ would overlap.
type slowMkdir struct{ *callLog }

func (s slowMkdir) Mkdir(ctx context.Context, name string) error {
	time.Sleep(50 * time.Millisecond)
	return s.callLog.Mkdir(ctx, name)
}

// TestPullArchiveDirOnce: the files of one inbox are archived at once, and
// processed/ is made by one MKDIR, not one per file followed by an LSTAT
// each (the bulk cell asked 19 calls an inbox for it). All ten are still
// stored and archived (invariant: no handoff lost).
func TestPullArchiveDirOnce(t *testing.T) {
	t.Parallel()
	e := newPullEnv(t)
	body := func(i int) []byte { return fmt.Appendf(nil, "# Memory Handoff\n\n## Title\nnumber %d\n", i) }
	for i := range 10 {
		e.put(t, fmt.Sprintf("h%d.md", i), body(i))
	}
	log := &callLog{FS: e.fs}
	rep := pull(t, slowMkdir{log}, e.cfg, e.spool, e.rec)
	if rep.Outcome != "ok" {
		t.Fatalf("outcome %q, want ok: %+v", rep.Outcome, rep)
	}
	dir := e.path(claim.ProcessedDir)
	if n, m := log.count("mkdir "+dir), log.count("lstat "+dir); n != 1 || m != 0 {
		t.Errorf("processed/ made %d times and asked about %d times, want 1 and 0:\n%s", n, m, strings.Join(log.calls, "\n"))
	}
	for i := range 10 {
		e.assertStored(t, fmt.Sprintf("h%d.md", i), body(i), claim.ProcessedDir)
	}
}

// TestPullArchiveDirFromListing: what the inbox's listing said of
// processed/ spares asking again: present (a directory), it is not asked
// about; absent, it is made without asking first. A processed/ that is a
// symlink still stops the archive (invariant: nothing is renamed through a
// symlink).
func TestPullArchiveDirFromListing(t *testing.T) {
	t.Parallel()
	data := fixture(t, "handoff.md")
	for _, tc := range []struct {
		name     string
		setup    func(e *pullEnv)
		lstats   int // lstats of processed/
		mkdirs   int
		archived bool
	}{
		{"present", func(e *pullEnv) { mkdirAll(t, e.path(claim.ProcessedDir)) }, 0, 0, true},
		{"absent", func(e *pullEnv) {}, 0, 1, true},
		{"symlink", func(e *pullEnv) {
			if err := os.Symlink(e.outside, e.path(claim.ProcessedDir)); err != nil {
				t.Fatal(err)
			}
		}, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newPullEnv(t)
			e.put(t, "x.md", data)
			tc.setup(e)
			log := &callLog{FS: e.fs}
			pull(t, log, e.cfg, e.spool, e.rec)
			dir := e.path(claim.ProcessedDir)
			if n := log.count("lstat " + dir); n != tc.lstats {
				t.Errorf("processed/ asked about %d times, want %d:\n%s", n, tc.lstats, strings.Join(log.calls, "\n"))
			}
			if n := log.count("mkdir " + dir); n != tc.mkdirs {
				t.Errorf("processed/ made %d times, want %d", n, tc.mkdirs)
			}
			if tc.archived {
				e.assertStored(t, "x.md", data, claim.ProcessedDir)
			} else if ents, _ := os.ReadDir(e.outside); len(ents) != 0 {
				t.Errorf("%d files moved through the symlinked processed/", len(ents))
			}
		})
	}
}
