package ssh

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/hostile"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
)

// Invariant: listings that run at once on one FS each get their own
// directory's entries, all of them, and their own budget: a listing over
// its bound fails and the listings around it do not notice. The guard
// holds nothing once they are over.
func TestReadDirConcurrentListings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(*testing.T) *sshdtest.Server
	}{
		{"embedded", func(t *testing.T) *sshdtest.Server { return sshdtest.StartEmbedded(t, sshdtest.Options{}) }},
		{"openssh", func(t *testing.T) *sshdtest.Server { return sshdtest.StartOpenSSH(t, sshdtest.Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := dialT(t, configFor(tc.start(t)))
			root := t.TempDir()
			// Directory i holds i*7 files (several NAME replies for the
			// larger ones: servers send about 100 entries per reply).
			const dirs = 32
			want := make([][]string, dirs)
			for i := range dirs {
				dir := filepath.Join(root, fmt.Sprintf("d%02d", i))
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				for j := range i * 7 {
					name := fmt.Sprintf("f%02d-%03d.md", i, j)
					if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o600); err != nil {
						t.Fatal(err)
					}
					want[i] = append(want[i], name)
				}
			}
			const workers = 256
			var wg sync.WaitGroup
			var failures atomic.Int64
			for w := range workers {
				wg.Go(func() {
					i := w % dirs
					dir := filepath.Join(root, fmt.Sprintf("d%02d", i))
					n := len(want[i])
					switch {
					case w%8 == 7 && n > 1:
						// Over the bound: fails, alone.
						_, err := f.ReadDir(ctxT(t), dir, n-1)
						if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d entries", n-1)) {
							t.Errorf("ReadDir %s with maxEntries %d of %d: %v, want a too-many-entries error", dir, n-1, n, err)
						}
						failures.Add(1)
						return
					case w%8 == 6:
						n = 0 // the transport's own bound
					}
					ents, err := f.ReadDir(ctxT(t), dir, n)
					if err != nil {
						t.Errorf("ReadDir %s (maxEntries %d): %v", dir, n, err)
						return
					}
					var got []string
					for _, e := range ents {
						if !e.IsRegular() || e.Size != int64(len(e.Name)) {
							t.Errorf("ReadDir %s: entry %+v", dir, e)
						}
						got = append(got, e.Name)
					}
					slices.Sort(got)
					if !slices.Equal(got, want[i]) {
						t.Errorf("ReadDir %s: %d entries %.60q…, want %d %.60q…", dir, len(got), got, len(want[i]), want[i])
					}
				})
			}
			wg.Wait()
			if failures.Load() == 0 {
				t.Fatal("no listing went over its bound; the test proves nothing")
			}
			assertGuardIdle(t, f, root)
		})
	}
}

// assertGuardIdle checks that the guard keeps no listing, request or
// registration once every ReadDir has returned (pkg/sftp closes a
// directory handle before ReadDir returns) and the connection still
// works. The guard answers a listing's CLOSE itself, so a read-ahead
// READDIR may still be on its way then; an LSTAT of p first sends any
// the guard holds back, and the server answers in order, so its reply
// comes after theirs.
func assertGuardIdle(t *testing.T, f *FS, p string) {
	t.Helper()
	if _, err := f.Lstat(ctxT(t), p); err != nil {
		t.Fatalf("Lstat %s after the listings: %v", p, err)
	}
	g := f.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.paths)+len(g.opendirs)+len(g.listings)+len(g.readdirs) != 0 {
		t.Errorf("guard state left after every listing ended: %d paths, %d opendirs, %d listings, %d readdirs",
			len(g.paths), len(g.opendirs), len(g.listings), len(g.readdirs))
	}
}

// Invariant: a host cannot make a listing hold more than its budget (plus
// one reply), however many listings run at once; the listing that never
// ends fails with the bound, and the listings beside it, on the same
// connection and at the same time, are unaffected and complete.
func TestReadDirEndlessBesideNormal(t *testing.T) {
	t.Parallel()
	const home = "/home/h"
	v := hostile.NewVFS(home)
	var generated atomic.Int64 // entries the server made up for endless listings
	v.Add(home+"/endless", hostile.Dir()).List = func(dst []os.FileInfo, off int64) (int, error) {
		for i := range dst {
			dst[i] = hostile.Entry(fmt.Sprintf("e%09d.md", off+int64(i)), 0o600, 10)
		}
		generated.Add(int64(len(dst)))
		return len(dst), nil
	}
	const normal = 16
	for i := range normal {
		d := fmt.Sprintf("%s/n%02d", home, i)
		v.Add(d, hostile.Dir())
		for j := range 150 + i {
			v.Add(fmt.Sprintf("%s/f%03d.md", d, j), hostile.File("x"))
		}
	}
	srv := hostile.Start(t, t.TempDir(), v)
	f := dialT(t, Config{
		Alias: "hostile", HostName: srv.Host, Port: srv.Port, User: srv.User,
		IdentityFiles: []string{srv.IdentityFile}, KnownHostsFiles: []string{srv.KnownHosts},
		ConnectTimeout: 10 * time.Second,
	})

	const endless, budget, perReply = 8, 1000, 100 // pkg/sftp's request server lists 100 per reply
	var wg sync.WaitGroup
	for range endless {
		wg.Go(func() {
			_, err := f.ReadDir(ctxT(t), home+"/endless", budget)
			if err == nil || !strings.Contains(err.Error(), "more than 1000 entries") {
				t.Errorf("endless listing: %v, want a too-many-entries error", err)
			}
		})
	}
	for i := range 4 * normal {
		wg.Go(func() {
			d := fmt.Sprintf("%s/n%02d", home, i%normal)
			want := 150 + i%normal
			ents, err := f.ReadDir(ctxT(t), d, budget)
			if err != nil {
				t.Errorf("ReadDir %s beside endless listings: %v", d, err)
				return
			}
			names := map[string]bool{}
			for _, e := range ents {
				names[e.Name] = true
			}
			if len(ents) != want || len(names) != want || !names["f000.md"] || !names[fmt.Sprintf("f%03d.md", want-1)] {
				t.Errorf("ReadDir %s: %d entries (%d distinct), want %d", d, len(ents), len(names), want)
			}
		})
	}
	wg.Wait()
	// Each endless listing was handed at most its budget ("." and ".."
	// included) and the server sent at most the replies the read-ahead had
	// in flight, refused.
	if got, bound := generated.Load(), int64(endless*(budget+2+readAhead*perReply)); got > bound {
		t.Errorf("the server generated %d entries for %d endless listings; the bound is %d", got, endless, bound)
	}
	assertGuardIdle(t, f, path.Join(home, "n00"))
}

// Invariant: listings of one name with different bounds each get their
// own bound (the guard tells listings apart by the name they open, so
// they take turns rather than share a budget).
func TestReadDirSameNameDifferentBounds(t *testing.T) {
	t.Parallel()
	f := dialT(t, configFor(sshdtest.StartEmbedded(t, sshdtest.Options{})))
	dir := t.TempDir()
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%02d.md", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			max := []int{10, 50, 0, 49}[w%4]
			ents, err := f.ReadDir(ctxT(t), dir, max)
			wantErr := max == 10 || max == 49
			switch {
			case wantErr && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d entries", max))):
				t.Errorf("ReadDir maxEntries %d over 50 entries: %v, want a too-many-entries error", max, err)
			case !wantErr && (err != nil || len(ents) != 50):
				t.Errorf("ReadDir maxEntries %d over 50 entries: %d entries, %v", max, len(ents), err)
			}
		})
	}
	wg.Wait()
	assertGuardIdle(t, f, dir)
}

// Listings on one FS are not serialised: the server answers no OPENDIR
// until four listings have sent theirs, which only happens if ReadDir lets
// them overlap.
func TestReadDirListingsOverlap(t *testing.T) {
	t.Parallel()
	const overlap = 4
	fk := &fakeSFTP{
		attrs:        func(byte) (uint64, fs.FileMode) { return 0, fs.ModeDir | 0o700 },
		readdir:      func(h string, n int) uint32 { return uint32(3 * max(0, 1-n)) }, // 3 entries, then EOF
		holdOpendirs: overlap,
	}
	f := fk.start(t)
	var wg sync.WaitGroup
	for range overlap {
		wg.Go(func() {
			ents, err := f.ReadDir(ctxT(t), "/inbox", 10)
			if err != nil || len(ents) != 3 {
				t.Errorf("ReadDir: %d entries, %v; want 3", len(ents), err)
			}
		})
	}
	wg.Wait()
	if fk.heldTimeout.Load() {
		t.Fatalf("fewer than %d listings were ever open at once: ReadDir serialises them", overlap)
	}
	assertGuardIdle(t, f, "/inbox")
}

// Invariant: two listings never share a handle, and so never a budget (nor
// does one's CLOSE leave the other unguarded): a server that hands a second
// OPENDIR the handle of a listing still open has that OPENDIR refused, and
// the first listing keeps its own bound.
func TestReadDirReusedHandle(t *testing.T) {
	t.Parallel()
	fk := &fakeSFTP{
		attrs:        func(byte) (uint64, fs.FileMode) { return 0, fs.ModeDir | 0o700 },
		readdir:      func(string, int) uint32 { return 100 }, // never ends
		holdOpendirs: 2,
		handle:       "same",
	}
	f := fk.start(t)
	const max = 500
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := f.ReadDir(ctxT(t), "/inbox", max)
			errs <- err
		}()
	}
	var bound, reused int
	for range 2 {
		switch err := <-errs; {
		case err != nil && strings.Contains(err.Error(), "more than 500 entries"):
			bound++
		case err != nil && strings.Contains(err.Error(), "reused an open directory handle"):
			reused++
		default:
			t.Errorf("ReadDir: %v, want a too-many-entries or reused-handle error", err)
		}
	}
	if bound != 1 || reused != 1 {
		t.Errorf("%d listings cut at the bound, %d refused for the reused handle; want one each", bound, reused)
	}
	if fk.heldTimeout.Load() {
		t.Fatal("the two OPENDIRs were never in flight at once")
	}
	if got, bound := fk.served.Load(), int64(max+2+readAhead*100); got > bound {
		t.Fatalf("server sent %d entries for one handle; the bound is %d", got, bound)
	}
	assertGuardIdle(t, f, "/inbox")
}
