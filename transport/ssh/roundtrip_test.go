package ssh

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/transport"
)

// SFTP request types the round-trip tests name.
const (
	reqOpen    = 3
	reqClose   = 4
	reqRead    = 5
	reqLstat   = 7
	reqFstat   = 8
	reqRename  = 18
	reqReaddir = 12
	reqWrite   = 6
)

var reqNames = map[byte]string{3: "OPEN", 4: "CLOSE", 5: "READ", 7: "LSTAT", 8: "FSTAT", 11: "OPENDIR", 12: "READDIR", 14: "MKDIR", 18: "RENAME"}

// relay sits on the SFTP stream between an FS and a server and counts
// what the FS asks. Every reply is held for rtt (a simulated round trip),
// so that requests the FS sends without waiting overlap, and:
//   - a READ reply is also held until readBurst READs (two when unset)
//     are outstanding, at most readGate: a read that sends its requests
//     together is seen doing so however the goroutines are scheduled;
//   - with holdCloses, CLOSE replies are held until releaseCloses, so that
//     a test can tell whether the FS waits for them.
type relay struct {
	rtt        time.Duration
	readGate   time.Duration
	readBurst  int
	holdCloses bool

	mu       sync.Mutex
	changed  *sync.Cond
	types    []byte          // request types in the order sent
	pending  map[uint32]byte // id → type, sent and not yet answered to the FS
	rounds   int             // requests (CLOSE aside) sent while none was pending
	maxReads int             // most READs pending at once
	// depth is the longest chain of requests each sent after a reply to
	// the one before: a request's generation is one more than the highest
	// generation answered before it was sent (CLOSE aside). Unlike rounds
	// it counts round trips right when requests overlap (an upper bound:
	// an unrelated reply also counts).
	gens     map[uint32]int
	answered int
	depth    int
	// byHandle: with it, a READDIR's generation is one more than the
	// latest answered request on its handle (the OPENDIR that returned
	// it, or an earlier READDIR), and other requests are of generation 1,
	// however late the goroutines that send them run: the exact critical
	// path of listings sent at once.
	byHandle   bool
	handleGens map[string]int    // a handle's latest answered generation
	opendirs   map[uint32]bool   // OPENDIR ids not yet answered
	readdirs   map[uint32]string // READDIR id → its handle, until answered
	released   bool              // CLOSE replies may go

	wmu      sync.Mutex // the FS side of the stream
	toClient io.Writer
}

// startRelayed starts the SFTP server serve on one side of r and an FS on
// the other.
func startRelayed(t *testing.T, r *relay, serve func(t *testing.T, in io.Reader, out io.WriteCloser)) *FS {
	t.Helper()
	f := startRelayedAsking(t, r, serve)
	// The limits@openssh.com request newFS sends is answered before the
	// counting starts.
	for deadline := time.Now().Add(5 * time.Second); f.guard.asking() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	r.reset()
	return f
}

// startRelayedAsking is startRelayed without waiting for the answer to
// the limits@openssh.com request the session starts with.
func startRelayedAsking(t *testing.T, r *relay, serve func(t *testing.T, in io.Reader, out io.WriteCloser)) *FS {
	t.Helper()
	r.pending = map[uint32]byte{}
	r.changed = sync.NewCond(&r.mu)
	fsR, relayW := io.Pipe() // replies to the FS
	relayR, fsW := io.Pipe() // requests from the FS
	srvR, toSrv := io.Pipe()
	fromSrv, srvW := io.Pipe()
	r.toClient = relayW
	go serve(t, srvR, srvW)
	go r.forwardRequests(relayR, toSrv)
	go r.forwardReplies(fromSrv)
	f, err := newFS(fsR, fsW, Config{Alias: "relayed"}, slog.New(slog.DiscardHandler), false, closerFunc(func() error {
		fsR.Close()
		relayR.Close()
		toSrv.Close()
		fromSrv.Close()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.releaseCloses(); f.Close() })
	return f
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

// pkgSFTPServer serves the real file system with pkg/sftp's server.
func pkgSFTPServer(t *testing.T, in io.Reader, out io.WriteCloser) {
	s, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{in, out})
	if err != nil {
		t.Error(err)
		return
	}
	s.Serve()
}

// openSSHServer serves the real file system with OpenSSH's sftp-server,
// the program behind every OpenSSH host's "sftp" subsystem.
func openSSHServer(t *testing.T) func(t *testing.T, in io.Reader, out io.WriteCloser) {
	return execServer(t, "/usr/lib/openssh/sftp-server", "openssh-sftp-server")
}

// execServer serves the real file system with the SFTP server program bin
// on its stdin and stdout. Without bin the test is skipped, or fails when
// HANDOFF_E2E_REQUIRED is set; pkg names the Debian package to install.
func execServer(t *testing.T, bin, pkg string) func(t *testing.T, in io.Reader, out io.WriteCloser) {
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatalf("%s: %v (install %s)", bin, err, pkg)
		}
		t.Skipf("%s: %v (install %s)", bin, err, pkg)
	}
	return func(t *testing.T, in io.Reader, out io.WriteCloser) {
		cmd := exec.Command(bin)
		cmd.Stdin, cmd.Stdout = in, out
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		cmd.Wait()
		out.Close()
	}
}

func (r *relay) forwardRequests(from io.Reader, to io.Writer) {
	for {
		frame, err := readSFTPFrame(from)
		if err != nil {
			return
		}
		if typ := frame[4]; typ != 1 { // INIT has no id
			id := binary.BigEndian.Uint32(frame[5:9])
			r.mu.Lock()
			if typ != reqClose && r.pendingExcept(reqClose) == 0 {
				r.rounds++
			}
			if typ != reqClose {
				if r.gens == nil {
					r.gens, r.handleGens, r.opendirs, r.readdirs = map[uint32]int{}, map[string]int{}, map[uint32]bool{}, map[uint32]string{}
				}
				gen := r.answered + 1
				if r.byHandle {
					gen = 1
					if h, ok := sshString(frame[9:]); ok && typ == 12 {
						gen = r.handleGens[string(h)] + 1
						r.readdirs[id] = string(h)
					}
					if typ == 11 {
						r.opendirs[id] = true
					}
				}
				r.gens[id] = gen
				r.depth = max(r.depth, gen)
			}
			r.types = append(r.types, typ)
			r.pending[id] = typ
			if typ == reqRead {
				r.maxReads = max(r.maxReads, r.pendingOf(reqRead))
			}
			r.changed.Broadcast()
			r.mu.Unlock()
		}
		if _, err := to.Write(frame); err != nil {
			return
		}
	}
}

func (r *relay) forwardReplies(from io.Reader) {
	for {
		frame, err := readSFTPFrame(from)
		if err != nil {
			return
		}
		arrived := time.Now()
		go func() {
			var id uint32
			var typ byte
			if frame[4] != 2 { // VERSION has no id
				id = binary.BigEndian.Uint32(frame[5:9])
				r.mu.Lock()
				typ = r.pending[id]
				r.mu.Unlock()
				time.Sleep(time.Until(arrived.Add(r.rtt)))
			}
			r.mu.Lock()
			switch typ {
			case reqRead:
				deadline := time.Now().Add(r.readGate)
				stop := time.AfterFunc(r.readGate, func() { r.mu.Lock(); r.changed.Broadcast(); r.mu.Unlock() })
				burst := max(r.readBurst, 2)
				for r.pendingOf(reqRead) < burst && r.maxReads < burst && time.Now().Before(deadline) {
					r.changed.Wait()
				}
				stop.Stop()
			case reqClose:
				for r.holdCloses && !r.released {
					r.changed.Wait()
				}
			}
			// Answered once the FS can see it: before it is written,
			// since the FS may send its next request at once.
			r.wmu.Lock()
			r.answered = max(r.answered, r.gens[id])
			if r.opendirs[id] && frame[4] == fxpHandle {
				if h, ok := sshString(frame[9:]); ok {
					r.handleGens[string(h)] = r.gens[id]
				}
			}
			if h, ok := r.readdirs[id]; ok {
				r.handleGens[h] = max(r.handleGens[h], r.gens[id])
			}
			delete(r.opendirs, id)
			delete(r.readdirs, id)
			delete(r.gens, id)
			delete(r.pending, id)
			r.changed.Broadcast()
			r.mu.Unlock()
			r.toClient.Write(frame)
			r.wmu.Unlock()
		}()
	}
}

// pendingOf counts pending requests of type typ; r.mu is held.
func (r *relay) pendingOf(typ byte) int {
	n := 0
	for _, t := range r.pending {
		if t == typ {
			n++
		}
	}
	return n
}

// pendingExcept counts pending requests not of type typ; r.mu is held.
func (r *relay) pendingExcept(typ byte) int { return len(r.pending) - r.pendingOf(typ) }

// closeUnawaited checks that the call named op returned while the answer
// to its CLOSE was still held back (it did not wait for it), then releases
// the CLOSEs and returns the counts once every request has its reply.
func (r *relay) closeUnawaited(t *testing.T, op string) stats {
	t.Helper()
	if r.sentOf(t, reqClose, 1) != 1 {
		t.Fatalf("the CLOSE was answered before %s returned, though the relay holds CLOSE answers", op)
	}
	r.releaseCloses()
	return r.snapshot(t)
}

func (r *relay) releaseCloses() {
	r.mu.Lock()
	r.released = true
	r.changed.Broadcast()
	r.mu.Unlock()
}

// reset forgets what was counted so far (the connection's start).
func (r *relay) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types, r.rounds, r.maxReads = nil, 0, 0
	r.answered, r.depth = 0, 0
}

// stats is what the relay counted since the last reset.
type stats struct {
	requests int          // all requests, CLOSE included
	byType   map[byte]int // requests by type
	rounds   int          // round trips the FS waited for, CLOSE aside
	depth    int          // see relay.depth
	maxReads int          // most READ requests outstanding at once
	seq      string       // request types in order
}

func (s stats) String() string {
	return fmt.Sprintf("%d requests, %d round trips (CLOSE aside), at most %d READs at once: %s", s.requests, s.rounds, s.maxReads, s.seq)
}

// snapshot returns the counts, once every request sent has its reply.
func (r *relay) snapshot(t *testing.T) stats {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	stop := time.AfterFunc(10*time.Second, func() { r.mu.Lock(); r.changed.Broadcast(); r.mu.Unlock() })
	defer stop.Stop()
	for len(r.pending) > 0 && time.Now().Before(deadline) {
		r.changed.Wait()
	}
	s := stats{requests: len(r.types), byType: map[byte]int{}, rounds: r.rounds, maxReads: r.maxReads, depth: r.depth}
	var seq bytes.Buffer
	for i, typ := range r.types {
		s.byType[typ]++
		if i > 0 {
			seq.WriteString(" ")
		}
		name := reqNames[typ]
		if name == "" {
			name = fmt.Sprint(typ)
		}
		seq.WriteString(name)
	}
	s.seq = seq.String()
	return s
}

// sentOf waits until n requests of type typ have been sent and reports how
// many of those are still unanswered.
func (r *relay) sentOf(t *testing.T, typ byte, n int) (unanswered int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	stop := time.AfterFunc(10*time.Second, func() { r.mu.Lock(); r.changed.Broadcast(); r.mu.Unlock() })
	defer stop.Stop()
	for bytes.Count(r.types, []byte{typ}) < n {
		if !time.Now().Before(deadline) {
			t.Fatalf("%d %s requests sent, want %d", bytes.Count(r.types, []byte{typ}), reqNames[typ], n)
		}
		r.changed.Wait()
	}
	return r.pendingOf(typ)
}

// servers are the SFTP servers the round-trip tests count against:
// pkg/sftp's and OpenSSH's sftp-server.
var servers = []struct {
	name  string
	serve func(t *testing.T) func(*testing.T, io.Reader, io.WriteCloser)
}{
	{"pkg-sftp", func(*testing.T) func(*testing.T, io.Reader, io.WriteCloser) { return pkgSFTPServer }},
	{"openssh-sftp-server", openSSHServer},
}

// ReadFile waits for five round trips whatever the file's size (up to 64
// chunks): LSTAT, OPEN, FSTAT, the READs sent together, FSTAT. It does not
// wait for the CLOSE. (Before: 7 round trips for 2 KiB, 16 for 300 KiB,
// one READ at a time and the CLOSE awaited.)
func TestReadFileRoundTrips(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		for _, tc := range []struct {
			size  int
			reads int // data chunks, and the probe at the size
		}{
			{2 << 10, 2},
			{300 << 10, 10 + 1},
		} {
			t.Run(fmt.Sprintf("%s/%dKiB", srv.name, tc.size>>10), func(t *testing.T) {
				t.Parallel()
				serve := srv.serve(t)
				name := filepath.Join(t.TempDir(), "f.md")
				want := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16)
				if err := os.WriteFile(name, want, 0o600); err != nil {
					t.Fatal(err)
				}
				// Every READ held until all are out: under load the
				// goroutines that send them may run late, and a reply
				// must not overtake the last of them.
				r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, readBurst: tc.reads, holdCloses: true}
				f := startRelayed(t, r, serve)
				got, fi, err := f.ReadFile(ctxT(t), name, 1<<20)
				if err != nil || !bytes.Equal(got, want) || fi.Size != int64(tc.size) {
					t.Fatalf("ReadFile: %d bytes, %+v, %v", len(got), fi, err)
				}
				s := r.closeUnawaited(t, "ReadFile")
				t.Logf("ReadFile %d KiB: %v", tc.size>>10, s)
				if s.rounds != 5 {
					t.Errorf("%d round trips, want 5 (LSTAT, OPEN, FSTAT, READs, FSTAT)", s.rounds)
				}
				if s.byType[reqRead] != tc.reads || s.byType[reqClose] != 1 || s.requests != 5+tc.reads {
					t.Errorf("requests %s, want LSTAT OPEN FSTAT, %d READs, FSTAT CLOSE", s.seq, tc.reads)
				}
				if s.maxReads != tc.reads {
					t.Errorf("at most %d READs in flight at once, want all %d", s.maxReads, tc.reads)
				}
			})
		}
	}
}

// TestReadDirRoundTrips: a listing waits for two round trips on OpenSSH's
// sftp-server (OPENDIR, one READDIR whose short reply ends it) and three
// elsewhere (a READDIR more to the end), not for the answer to its CLOSE,
// which the guard gives at once; the server's own answer, when it comes,
// is dropped and the session goes on (a second listing and a read still
// work).
func TestReadDirRoundTrips(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			serve := srv.serve(t)
			dir := t.TempDir()
			for _, n := range []string{"a.md", "b.md", "c.md"} {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, holdCloses: true}
			f := startRelayed(t, r, serve)
			ents, err := f.ReadDir(ctxT(t), dir, 100)
			if err != nil || len(ents) != 3 {
				t.Fatalf("ReadDir: %d entries, %v", len(ents), err)
			}
			s := r.closeUnawaited(t, "ReadDir")
			t.Logf("ReadDir: %v", s)
			// OpenSSH's sftp-server gets the read-ahead: its READDIR goes
			// out with the handle, and its short reply ends the listing.
			// Others list one READDIR at a time, as pkg/sftp asks, until
			// the server says the end.
			if srv.name == "openssh-sftp-server" {
				if s.rounds != 2 || s.requests != 3 || s.byType[reqReaddir] != 1 || s.byType[reqClose] != 1 {
					t.Errorf("%d round trips, requests %s; want 2 round trips: OPENDIR, then one READDIR, and a CLOSE", s.rounds, s.seq)
				}
			} else if s.rounds != 3 || s.requests != 4 || s.byType[reqClose] != 1 {
				t.Errorf("%d round trips, requests %s; want 3 round trips: OPENDIR, READDIR, READDIR, and a CLOSE", s.rounds, s.seq)
			}
			// The server's answer to the CLOSE has gone by: the session
			// must not have taken it for a reply to something else.
			if ents, err := f.ReadDir(ctxT(t), dir, 100); err != nil || len(ents) != 3 {
				t.Fatalf("second ReadDir: %d entries, %v", len(ents), err)
			}
			if got, _, err := f.ReadFile(ctxT(t), filepath.Join(dir, "a.md"), 100); err != nil || string(got) != "a.md" {
				t.Fatalf("ReadFile after the listings: %q, %v", got, err)
			}
		})
	}
}

// TestReadDirShortReplyEnds: OpenSSH's sftp-server puts 100 entries in a
// READDIR reply unless its readdir(3) found the end, so the guard ends a
// listing at the first shorter reply. A directory whose entries fill whole
// replies still gets the server's own end, and every entry is listed
// whatever the size (invariant: no handoff is missed by a listing cut
// short).
func TestReadDirShortReplyEnds(t *testing.T) {
	t.Parallel()
	serve := openSSHServer(t)
	for _, tc := range []struct {
		files    int // and "." and ".."
		readdirs int
		rounds   int
	}{
		{3, 1, 2},   // one short reply
		{98, 3, 3},  // one full reply, then a pair: the end, twice
		{250, 3, 3}, // one full reply, then a pair: full, short
		{398, 5, 4}, // full; full, full; the end, twice
	} {
		t.Run(fmt.Sprint(tc.files), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := map[string]bool{}
			for i := range tc.files {
				n := fmt.Sprintf("h%03d.md", i)
				want[n] = true
				if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second}
			f := startRelayed(t, r, serve)
			ents, err := f.ReadDir(ctxT(t), dir, 1000)
			if err != nil {
				t.Fatalf("ReadDir: %v", err)
			}
			for _, e := range ents {
				if !want[e.Name] {
					t.Errorf("listed %q, which is not in the directory (or twice)", e.Name)
				}
				delete(want, e.Name)
			}
			if len(want) != 0 {
				t.Errorf("%d of %d files not listed", len(want), tc.files)
			}
			s := r.snapshot(t)
			t.Logf("ReadDir of %d: %v", tc.files, s)
			if s.byType[reqReaddir] != tc.readdirs || s.rounds != tc.rounds {
				t.Errorf("%d READDIRs in %d round trips (%s), want %d in %d", s.byType[reqReaddir], s.rounds, s.seq, tc.readdirs, tc.rounds)
			}
		})
	}
}

// TestReadContentRoundTrips: the read-back after an archive rename costs
// three round trips (LSTAT, OPEN, READs with the probe; CLOSE not waited
// for), and keeps the bounds: a FIFO is never opened, a file over the limit
// is refused unread, and a file longer than its stat is refused (a host
// cannot make it hold more than limit+1 bytes).
func TestReadContentRoundTrips(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			serve := srv.serve(t)
			dir := t.TempDir()
			name := filepath.Join(dir, "f.md")
			want := bytes.Repeat([]byte("0123456789abcdef"), 128)
			if err := os.WriteFile(name, want, 0o600); err != nil {
				t.Fatal(err)
			}
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, holdCloses: true}
			f := startRelayed(t, r, serve)
			got, err := f.ReadContent(ctxT(t), name, int64(len(want)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("ReadContent: %d bytes, %v", len(got), err)
			}
			s := r.closeUnawaited(t, "ReadContent")
			if s.rounds != 3 || s.byType[reqRead] != 2 || s.requests != 5 {
				t.Errorf("%d round trips, requests %s; want 3 round trips: LSTAT OPEN, 2 READs, CLOSE", s.rounds, s.seq)
			}
			if _, err := f.ReadContent(ctxT(t), name, int64(len(want))-1); !errors.Is(err, transport.ErrTooLarge) {
				t.Errorf("over the limit: %v, want ErrTooLarge", err)
			}
			fifo := filepath.Join(dir, "p.md")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadContent(ctxT(t), fifo, 1<<20); !errors.Is(err, transport.ErrNotRegular) {
				t.Errorf("FIFO: %v, want ErrNotRegular without opening it", err)
			}
		})
	}
}

// TestReadTailRoundTrips: checking a git index against its memo costs two
// round trips (OPEN, one READ of the last 20 bytes; CLOSE not waited for)
// and 20 bytes, whatever the index's size.
func TestReadTailRoundTrips(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			serve := srv.serve(t)
			name := filepath.Join(t.TempDir(), "index")
			data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
			if err := os.WriteFile(name, data, 0o600); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(name)
			if err != nil {
				t.Fatal(err)
			}
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, holdCloses: true}
			f := startRelayed(t, r, serve)
			got, err := f.ReadTail(ctxT(t), name, fromOS(fi), 20)
			if err != nil || !bytes.Equal(got, data[len(data)-20:]) {
				t.Fatalf("ReadTail: %q, %v", got, err)
			}
			s := r.closeUnawaited(t, "ReadTail")
			if s.rounds != 2 || s.byType[reqRead] != 1 || s.requests != 3 {
				t.Errorf("%d round trips, requests %s; want 2 round trips: OPEN, one READ, CLOSE", s.rounds, s.seq)
			}
		})
	}
}

// TestReadListedRoundTrips: a file just listed is read in four round trips
// (OPEN, FSTAT, READs with the probe, FSTAT; CLOSE not waited for), its
// listing standing in for the LSTAT. The bounds hold against the listing:
// a listed size over the limit is refused unread, and a handle whose size
// or time is not the listed one fails with ErrChanged (a host cannot make
// the pull store bytes other than those of the file it listed).
func TestReadListedRoundTrips(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			serve := srv.serve(t)
			name, want, listed := listedFile(t, serve)
			r := &relay{rtt: 5 * time.Millisecond, readGate: time.Second, holdCloses: true}
			f := startRelayed(t, r, serve)
			got, fi, err := f.ReadListed(ctxT(t), name, listed, 1<<20)
			if err != nil || !bytes.Equal(got, want) || fi.Size != int64(len(want)) {
				t.Fatalf("ReadListed: %d bytes, %+v, %v", len(got), fi, err)
			}
			s := r.closeUnawaited(t, "ReadListed")
			if s.rounds != 4 || s.byType[reqRead] != 2 || s.requests != 6 {
				t.Errorf("%d round trips, requests %s; want 4 round trips: OPEN FSTAT, 2 READs, FSTAT CLOSE", s.rounds, s.seq)
			}
			if _, _, err := f.ReadListed(ctxT(t), name, listed, int64(len(want))-1); !errors.Is(err, transport.ErrTooLarge) {
				t.Errorf("listed size over the limit: %v, want ErrTooLarge", err)
			}
			stale := listed
			stale.Size--
			if _, _, err := f.ReadListed(ctxT(t), name, stale, 1<<20); !errors.Is(err, transport.ErrChanged) {
				t.Errorf("handle larger than listed: %v, want ErrChanged", err)
			}
			stale = listed
			stale.ModTime = stale.ModTime.Add(-time.Hour)
			if _, _, err := f.ReadListed(ctxT(t), name, stale, 1<<20); !errors.Is(err, transport.ErrChanged) {
				t.Errorf("handle newer than listed: %v, want ErrChanged", err)
			}
		})
	}
}

// listedFile writes a 2 KiB file into a new directory and lists it
// through serve: its name, its bytes, and the listing's entry for it.
func listedFile(t *testing.T, serve func(t *testing.T, in io.Reader, out io.WriteCloser)) (string, []byte, transport.FileInfo) {
	t.Helper()
	dir := t.TempDir()
	name := filepath.Join(dir, "f.md")
	want := bytes.Repeat([]byte("0123456789abcdef"), 128)
	if err := os.WriteFile(name, want, 0o600); err != nil {
		t.Fatal(err)
	}
	ents, err := startRelayed(t, &relay{}, serve).ReadDir(ctxT(t), dir, 0)
	if err != nil || len(ents) != 1 {
		t.Fatalf("ReadDir: %v, %v", ents, err)
	}
	return name, want, ents[0]
}

// Rename's requests. On OpenSSH, a name ReadFile just found regular is
// renamed with one request (link(2) semantics: never replaces); anything
// else is checked first, since OpenSSH's rename of a symlink replaces a
// dangling symlink. On other servers, always LSTAT then RENAME.
// (Before: LSTAT then RENAME everywhere.)
func TestRenameRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		server     int  // index in servers
		linkRename bool // as Dial would set it for the server
		read       bool // ReadFile the source first
		src, dst   string
		wantErr    error
		want       string // requests made by Rename
	}{
		{"openssh/read", 1, true, true, "a.md", "new.md", nil, "RENAME"},
		{"openssh/read/exists", 1, true, true, "a.md", "old.md", transport.ErrExist, "RENAME LSTAT"},
		{"openssh/read/missing-dir", 1, true, true, "a.md", "no/new.md", transport.ErrNotExist, "RENAME"},
		{"openssh/unread", 1, true, false, "a.md", "new.md", nil, "LSTAT RENAME"},
		{"openssh/unread/exists", 1, true, false, "a.md", "old.md", transport.ErrExist, "LSTAT"},
		{"openssh/symlink-onto-dangling", 1, true, false, "link", "dangling", transport.ErrExist, "LSTAT"},
		{"pkg-sftp/read", 0, false, true, "a.md", "new.md", nil, "LSTAT RENAME"},
		{"pkg-sftp/read/exists", 0, false, true, "a.md", "old.md", transport.ErrExist, "LSTAT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			serve := servers[tc.server].serve(t)
			dir := t.TempDir()
			p := func(n string) string { return filepath.Join(dir, n) }
			write := func(n, data string) {
				if err := os.WriteFile(p(n), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write("a.md", "new")
			write("old.md", "old")
			if err := os.Symlink("a.md", p("link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("nowhere", p("dangling")); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, dir)
			r := &relay{readGate: time.Millisecond}
			f := startRelayed(t, r, serve)
			f.openSSH = tc.linkRename
			if tc.read {
				if _, _, err := f.ReadFile(ctxT(t), p(tc.src), 100); err != nil {
					t.Fatal(err)
				}
				r.sentOf(t, reqClose, 1)
				r.snapshot(t)
				r.reset()
			}
			err := f.Rename(ctxT(t), p(tc.src), p(tc.dst))
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Rename: %v, want %v", err, tc.wantErr)
			}
			if s := r.snapshot(t); s.seq != tc.want {
				t.Errorf("Rename sent %s, want %s", s.seq, tc.want)
			}
			after := snapshotDir(t, dir)
			if tc.wantErr != nil && !maps.Equal(before, after) {
				t.Errorf("a failed Rename changed the directory: %v, was %v", after, before)
			}
			if tc.wantErr == nil && (after[tc.dst] != before[tc.src] || after[tc.src] != "") {
				t.Errorf("after Rename: %v, was %v", after, before)
			}
		})
	}
}

// snapshotDir maps each name in dir to its content, or "-> target" for a
// symlink.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err == nil {
			out[e.Name()] = "-> " + target
		} else if b, err := os.ReadFile(p); err == nil {
			out[e.Name()] = string(b)
		} else {
			out[e.Name()] = "?"
		}
	}
	return out
}

func TestIsOpenSSH(t *testing.T) {
	for _, tc := range []struct {
		banner string
		want   bool
	}{
		{"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3", true},
		{"SSH-2.0-OpenSSH_for_Windows_8.1", true},
		{"SSH-1.99-OpenSSH_3.9p1", true},
		{"SSH-2.0-Go", false},
		{"SSH-2.0-dropbear_2022.83", false},
		{"SSH-2.0-OpenSSHish_1.0", false},
		{"SSH-2.0-AWS_SFTP_1.1", false},
		{"OpenSSH_9.2", false},
	} {
		if got := isOpenSSH(tc.banner); got != tc.want {
			t.Errorf("isOpenSSH(%q) = %v, want %v", tc.banner, got, tc.want)
		}
		if got, want := isWindowsOpenSSH(tc.banner), strings.Contains(tc.banner, "Windows"); got != want {
			t.Errorf("isWindowsOpenSSH(%q) = %v, want %v", tc.banner, got, want)
		}
	}
}
