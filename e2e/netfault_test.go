package e2e

// Network faults between the canonical host and an SSH host. A real
// OpenSSH sshd sits behind internal/testkit/faultproxy, a TCP proxy that
// stalls, throttles, black-holes or resets the connection at exact byte
// counts (or when a side effect of the SFTP traffic shows up on disk); the
// built binary syncs through it with a short host timeout, connect timeout
// and keepalive interval. A calibration run without faults measures where in
// the byte stream the handshake, the first listing and the big file's read
// fall, so that faults land in a known phase.
//
// Every faulty run must hold these invariants:
//   - bounded time: the run ends within the host timeout + the worker's
//     3 s grace + slack, and the mechanism meant to end it (connect
//     deadline, keepalive, host deadline, the reset itself) is the one that
//     did, as the host's error says;
//   - no remote archive without local storage: every handoff gone from its
//     remote inbox is in the ledger's store (exact bytes) and sources, and
//     its remote copy sits in processed/ or malformed/;
//   - nothing partial stored: no .handoff-tmp.* file, every stored content
//     hashes to its key (stored);
//   - convergence: the next run without faults exits 0 and ingests every
//     handoff exactly once (checkConverged).

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/handoff-sync/handoff/internal/durable"
	"github.com/handoff-sync/handoff/internal/testkit/faultproxy"
	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/receipts"
)

// The settings every net-fault manifest uses, and the bound they imply.
const (
	nfHostTimeout    = 8 * time.Second
	nfConnectTimeout = 2 * time.Second
	nfAliveInterval  = 1 * time.Second
	nfAliveCountMax  = 3               // sshfs.DefaultServerAliveCountMax
	nfWorkerGrace    = 3 * time.Second // handoff.workerGrace: the parent kills a worker this long after the host timeout
	nfSlack          = 3 * time.Second // process start-up, ingest, receipt
	nfBound          = nfHostTimeout + nfWorkerGrace + nfSlack

	nfBigSize = 600 << 10 // big.md, read in 32 KiB SFTP reads (and once more to verify the archive)
)

// Phrases the host's error carries depending on what ended the pull.
const (
	nfErrConnect   = "for connect, handshake and login" // sshfs: the connect deadline
	nfErrKeepalive = "keepalives"                       // sshfs: the keepalive gave up on the peer
)

// nfErrDeadline is what the host's error says when the host timeout ended
// the pull (internal/worker's pull).
var nfErrDeadline = "deadline of " + nfHostTimeout.String() + " exceeded"

// nfWorld is newWorld's canonical fixture (world.mixed()) plus a third
// repository whose inbox holds one large handoff, pulled over SSH from a
// host whose manifest entry points at a fault proxy (or straight at a
// server).
type nfWorld struct {
	*world
	home     string
	repos    string
	bigPath  string
	proxy    *faultproxy.Proxy // nil when the host is reached directly
	markers  map[string][]string
	results  map[string]string
	original map[string]string // path -> bytes of every handoff before the faulty run
}

func newNFWorld(t *testing.T, srv *sshdtest.Server, viaProxy bool) *nfWorld {
	t.Helper()
	w := newWorld(t)
	nw := &nfWorld{world: w, home: filepath.Join(w.dir, "home"), repos: filepath.Join(w.dir, "repos")}
	mustMkdir(t, nw.home)
	nw.markers = w.mixed()
	bigInbox := filepath.Join(nw.repos, "zbig/.claude/memory-handoffs")
	w.inboxes = append(w.inboxes, bigInbox)
	nw.bigPath = filepath.Join(bigInbox, "big.md")
	var filler strings.Builder
	for i := 0; filler.Len() < nfBigSize-200; i++ {
		fmt.Fprintf(&filler, "\n- filler line %06d of a large handoff", i)
	}
	mustWrite(t, nw.bigPath, docHandoff("rules/big.md", "- marker-BIG"+filler.String()))
	nw.markers["rules/big.md"] = []string{"marker-BIG"}
	nw.results = maps.Clone(mixedResults)
	nw.results["big.md"] = "routed"

	port, knownHosts := srv.Port, srv.KnownHosts
	if viaProxy {
		p, err := faultproxy.Start(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		nw.proxy = p
		port = p.Port()
		// known_hosts names host:port, so the proxy's port needs its own lines.
		var lines []string
		for _, k := range srv.HostKeys {
			lines = append(lines, knownhosts.Line([]string{p.Addr()}, k))
		}
		knownHosts = sshdtest.WriteKnownHosts(t, lines...)
	}
	block := fmt.Sprintf("{host: %s, port: %d, user: %s, identity_file: %s, known_hosts: %s, connect_timeout: %s, server_alive_interval: %s}",
		srv.Host, port, srv.User, srv.IdentityFile, knownHosts, nfConnectTimeout, nfAliveInterval)
	writeManifest(t, w.manifest, w.ws, hostYAML("laptop", block, nil, []string{nw.repos}, "timeout: "+nfHostTimeout.String()))

	nw.original = map[string]string{}
	for _, in := range w.inboxes {
		ents, err := os.ReadDir(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".md") {
				b, err := os.ReadFile(filepath.Join(in, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				nw.original[filepath.Join(in, e.Name())] = string(b)
			}
		}
	}
	if len(nw.original) != len(nw.results) {
		t.Fatalf("fixture holds %d handoffs, want %d", len(nw.original), len(nw.results))
	}
	return nw
}

func (nw *nfWorld) syncJSON(t *testing.T) sshRun {
	t.Helper()
	return runHandoff(t, childEnv(nw.home), "sync", "--manifest", nw.manifest, "--json")
}

// nfAtime is a file's last access time.
func nfAtime(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Atim.Sec, st.Atim.Nsec)
}

// nfAccessMarker ages p's access time by two days and returns a predicate
// that turns true once something reads p (getdents for a directory,
// read for a file): relatime updates an access time older than a day.
// It never turns true on a file system mounted noatime.
func nfAccessMarker(t *testing.T, p string) func(faultproxy.Stats) bool {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, old, fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	before := nfAtime(t, p)
	return func(faultproxy.Stats) bool {
		fi, err := os.Stat(p)
		if err != nil {
			return false
		}
		st := fi.Sys().(*syscall.Stat_t)
		return !time.Unix(st.Atim.Sec, st.Atim.Nsec).Equal(before)
	}
}

// nfArchivedMarker turns true once inbox's processed/ holds a file: the
// server has carried out the first archive rename (it does so before it
// answers, so the answer is still to come).
func nfArchivedMarker(inbox string) func(faultproxy.Stats) bool {
	return func(faultproxy.Stats) bool {
		ents, _ := os.ReadDir(filepath.Join(inbox, "processed"))
		return len(ents) > 0
	}
}

// checkAfterFault asserts what must hold after any interrupted run and
// returns how many handoffs the faulty run archived on the remote host.
func (nw *nfWorld) checkAfterFault(t *testing.T) int {
	t.Helper()
	have := stored(t, nw.ws)
	sources := map[string]bool{}
	db, err := sql.Open("sqlite", filepath.Join(nw.ws, ".handoff/ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT inbox, name, sha256 FROM sources`)
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	for rows.Next() {
		var inbox, name, sha string
		if err := rows.Scan(&inbox, &name, &sha); err != nil {
			t.Fatal(err)
		}
		sources[inbox+"|"+name+"|"+sha] = true
	}
	rows.Close()
	db.Close()

	archived := 0
	for p, content := range nw.original {
		b, err := os.ReadFile(p)
		if err == nil {
			if string(b) != content {
				t.Errorf("%s changed in its inbox", p)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		archived++
		inbox, name := filepath.Dir(p), filepath.Base(p)
		if b, ok := have[sum(content)]; !ok || string(b) != content {
			t.Errorf("%s left its remote inbox but the store does not hold its exact bytes", p)
		}
		if !sources[inbox+"|"+name+"|"+sum(content)] {
			t.Errorf("%s left its remote inbox but the ledger has no source for it", p)
		}
		found := false
		for _, as := range []string{processedName(name, content), malformedName(name, content)} {
			if b, err := os.ReadFile(filepath.Join(inbox, as)); err == nil && string(b) == content {
				found = true
			}
		}
		if !found {
			t.Errorf("%s left its remote inbox but no archived copy holds its bytes", p)
		}
	}

	filepath.WalkDir(nw.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), durable.TempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	return archived
}

// converge runs once more without faults and asserts every handoff was
// ingested exactly once.
func (nw *nfWorld) converge(t *testing.T) time.Duration {
	t.Helper()
	if nw.proxy != nil {
		nw.proxy.SetPlan(faultproxy.Plan{})
	}
	r := nw.syncJSON(t)
	if r.code != 0 {
		t.Fatalf("the run after the fault did not converge: %s", r)
	}
	nw.checkConverged(nw.markers, nw.results)
	if rc := decodeReceipt(t, r); rc.Outcome != receipts.OutcomeOK {
		t.Errorf("run after the fault: outcome %q", rc.Outcome)
	}
	return r.elapsed
}

// nfCalibration holds byte counts (server to client) measured in a run
// without faults.
type nfCalibration struct {
	kex       int64 // half way through the server's key exchange reply
	sftpStart int64 // half way through the SFTP server's version packet (Dial still running)
	afterDial int64 // the reply to the first SFTP requests after the session is up (the root's lstat and opendir)
	// upAfterDial is what the client had sent when the SFTP version
	// packet, which ends Dial, arrived: a byte more up is a request
	// sent after Dial returned, whatever the timing of the replies.
	upAfterDial int64
	listing     int64 // the reply to the first directory read
	midRead     int64 // half way through reading big.md
	total       faultproxy.Stats
	elapsed     time.Duration
	chunks      int
}

// nfCalibrate runs a clean sync through a passive proxy and reads the phase
// boundaries off its trace. The phases are found from side effects on
// disk (the discovery root's and big.md's access times), so the counts do
// not depend on knowing SSH's message sizes.
func nfCalibrate(t *testing.T, srv *sshdtest.Server) nfCalibration {
	t.Helper()
	nw := newNFWorld(t, srv, true)
	probe := func(when func(faultproxy.Stats) bool) faultproxy.Fault {
		// A zero delay changes nothing; its firing records the counters.
		return faultproxy.DelayAt(faultproxy.Both, 0, faultproxy.Trigger{When: when})
	}
	nw.proxy.SetPlan(faultproxy.Plan{Faults: []faultproxy.Fault{
		probe(nfAccessMarker(t, nw.repos)),
		probe(nfAccessMarker(t, nw.bigPath)),
	}})
	r := nw.syncJSON(t)
	if r.code != 0 {
		t.Fatalf("calibration run: %s", r)
	}
	nw.checkConverged(nw.markers, nw.results)
	time.Sleep(100 * time.Millisecond) // let the proxy see the close
	conns := nw.proxy.Conns()
	if len(conns) != 1 {
		t.Fatalf("calibration run made %d connections, want 1", len(conns))
	}
	c := conns[0]
	cal := nfCalibration{total: c.Stats, elapsed: r.elapsed, chunks: len(c.Trace)}
	fired := map[int]int64{}
	for _, f := range c.Fired {
		fired[f.Fault] = f.Stats.Down
	}
	var down []faultproxy.Chunk
	for _, ch := range c.Trace {
		if ch.Dir == faultproxy.Down {
			down = append(down, ch)
		}
	}
	start := func(ch faultproxy.Chunk) int64 { return ch.Down - int64(ch.N) }
	// The server's banner, KEXINIT and key exchange reply travel in the
	// clear: read them off the bytes, not off the chunks. The server sends
	// its banner and KEXINIT back to back, so one read often holds both (or
	// any read may split a message); only the bytes say where each ends.
	op, err := nfParseOpening(c.DownHead)
	if err != nil {
		t.Fatalf("calibration: the trace does not start with a banner and a KEXINIT: %v; first chunks down: %+v", err, down[:min(3, len(down))])
	}
	cal.kex = op.reply + (op.replyEnd-op.reply)/2

	listing, ok := fired[0]
	if !ok {
		msg := "calibration: the discovery root's access time never changed: the file system under TMPDIR does not update atime (noatime?), so the listing cannot be located"
		if os.Getenv(sshdtest.RequiredEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cal.listing = listing
	// The replies before the first directory read: the answer to the
	// limits@openssh.com request sent as the session starts, the root's
	// lstat, opendir and the two realpaths asked with them, and before
	// them the SFTP version packet that ends Dial. The client sends these
	// requests together, so their replies may share a read or even one SSH
	// packet; the version packet, which the client waits for, is a chunk
	// of its own.
	k := -1
	for i, ch := range down {
		if start(ch) == listing {
			k = i
		}
	}
	if k < 5 {
		t.Fatalf("calibration: no chunk starts at the listing (%d): %+v", listing, down)
	}
	// OpenSSH's version packet lists its extensions (over 300 bytes once
	// encrypted), and the client answers it at once (limits@openssh.com,
	// then the root's lstat, opendir and realpaths): the bytes sent up
	// grow before the next chunk down. The replies after it are short,
	// alone or a few to a chunk, the last of them right before the
	// listing. Anything else means the client's first SFTP requests
	// changed: update this phase map. Under load the server's next
	// packet may come in a read of its own before the client has sent
	// anything more, so the first reply after Dial is the first chunk
	// that follows more bytes up, not the chunk right after the version.
	v, a := -1, -1
	for i := k - 2; i >= max(0, k-8) && v < 0; i-- {
		if down[i].N < 300 {
			continue
		}
		for j := i + 1; j < k; j++ {
			if down[j].Up > down[i].Up {
				v, a = i, j
				break
			}
		}
	}
	if n := k - a; v < 0 || n < 1 || n > 5 {
		t.Fatalf("calibration: the replies before the first listing are not version, limits, lstat, opendir and realpaths: %+v", down[max(0, k-6):k+1])
	}
	cal.afterDial = start(down[a])
	cal.upAfterDial = down[v].Up
	cal.sftpStart = start(down[v]) + int64(down[v].N)/2

	if bigRead, ok := fired[1]; ok {
		cal.midRead = bigRead + nfBigSize/2
	} else {
		// big.md is read last, then read once more to verify its archive.
		cal.midRead = c.Stats.Down - nfBigSize*3/2
	}
	if cal.midRead <= cal.listing || cal.midRead+nfBigSize/2 > c.Stats.Down {
		t.Fatalf("calibration: mid-read point %d outside the run (listing %d, total %d)", cal.midRead, cal.listing, c.Stats.Down)
	}
	t.Logf("calibration: clean sync %v, %d chunks, %d bytes up, %d down; %s, KEXINIT at %d, kex reply %d-%d; kex %d, sftp start %d, after dial %d, listing %d, mid-read %d",
		r.elapsed.Round(time.Millisecond), cal.chunks, c.Stats.Up, c.Stats.Down, op.banner, op.kexinit, op.reply, op.replyEnd, cal.kex, cal.sftpStart, cal.afterDial, cal.listing, cal.midRead)
	return cal
}

// nfOpening is where the clear-text start of what an SSH server sends
// lies: offsets in bytes from the start of the server-to-client stream.
type nfOpening struct {
	banner   string // the version line, without its CR LF
	kexinit  int64  // the server's KEXINIT packet starts here, right after the banner
	reply    int64  // its key exchange reply starts here, right after the KEXINIT
	replyEnd int64  // and ends here
}

// nfParseOpening reads b, the first bytes a server sent, as a version line
// "SSH-2.0-...\r\n" (RFC 4253 4.2) followed by two binary packets in the
// clear (RFC 4253 6; no MAC before the first NEWKEYS): the server's
// KEXINIT (message 20), then its key exchange method's reply (a message
// from 30 to 49). It needs the three whole, and looks only at the bytes:
// how they were split into reads does not matter.
func nfParseOpening(b []byte) (nfOpening, error) {
	const maxBanner = 255 // RFC 4253 4.2, CR LF included
	var op nfOpening
	if !bytes.HasPrefix(b, []byte("SSH-2.0-")) {
		return op, fmt.Errorf("no SSH-2.0 version line first: %q", b[:min(len(b), 64)])
	}
	eol := bytes.Index(b[:min(len(b), maxBanner)], []byte("\r\n"))
	if eol < 0 {
		return op, fmt.Errorf("no CR LF ends the version line within %d bytes: %q", maxBanner, b[:min(len(b), maxBanner)])
	}
	op.banner = string(b[:eol])
	op.kexinit = int64(eol + 2)
	msg, end, err := nfClearPacket(b, eol+2)
	if err != nil {
		return op, fmt.Errorf("after the version line %q: %v", op.banner, err)
	}
	if msg != 20 {
		return op, fmt.Errorf("the packet after the version line %q is message %d, want KEXINIT (20)", op.banner, msg)
	}
	op.reply = int64(end)
	if msg, end, err = nfClearPacket(b, end); err != nil {
		return op, fmt.Errorf("after the KEXINIT: %v", err)
	}
	if msg < 30 || msg > 49 {
		return op, fmt.Errorf("the packet after the KEXINIT is message %d, want a key exchange reply (30 to 49)", msg)
	}
	op.replyEnd = int64(end)
	return op, nil
}

// nfClearPacket reads the unencrypted binary packet at b[off:] and returns
// its message number and the offset where it ends.
func nfClearPacket(b []byte, off int) (msg byte, end int, err error) {
	if len(b)-off < 6 {
		return 0, 0, fmt.Errorf("%d bytes at offset %d, too few for a binary packet", len(b)-off, off)
	}
	// packet_length, padding_length, payload (message number first),
	// padding: at least 4 bytes of padding, a payload, and the whole a
	// multiple of 8 bytes (the block size before any cipher).
	plen := uint32(b[off])<<24 | uint32(b[off+1])<<16 | uint32(b[off+2])<<8 | uint32(b[off+3])
	pad := uint32(b[off+4])
	if plen > 35000 || pad < 4 || pad+2 > plen || (4+plen)%8 != 0 {
		return 0, 0, fmt.Errorf("no binary packet at offset %d (length %d, padding %d)", off, plen, pad)
	}
	end = off + 4 + int(plen)
	if end > len(b) {
		return 0, 0, fmt.Errorf("the packet at offset %d ends at %d, past the %d bytes seen", off, end, len(b))
	}
	return b[off+5], end, nil
}

// TestNetFaultOpening checks nfParseOpening on a server's opening built by
// hand: the banner and its KEXINIT in one piece, as one read delivers them
// under load (the calibration once expected each in a read of its own).
func TestNetFaultOpening(t *testing.T) {
	packet := func(payload ...byte) []byte {
		pad := 8 - (4+1+len(payload))%8
		if pad < 4 {
			pad += 8
		}
		n := 1 + len(payload) + pad
		p := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), byte(pad)}
		p = append(p, payload...)
		return append(p, make([]byte, pad)...)
	}
	banner := "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u7"
	kexinit := packet(append([]byte{20}, bytes.Repeat([]byte("k"), 1100)...)...)
	reply := packet(append([]byte{31}, bytes.Repeat([]byte("r"), 1200)...)...)
	newkeys := packet(21)
	encrypted := bytes.Repeat([]byte{0xa5}, 300)
	joined := slices.Concat([]byte(banner+"\r\n"), kexinit, reply, newkeys, encrypted)

	op, err := nfParseOpening(joined)
	if err != nil {
		t.Fatal(err)
	}
	want := nfOpening{
		banner:   banner,
		kexinit:  int64(len(banner) + 2),
		reply:    int64(len(banner) + 2 + len(kexinit)),
		replyEnd: int64(len(banner) + 2 + len(kexinit) + len(reply)),
	}
	if op != want {
		t.Errorf("got %+v, want %+v", op, want)
	}

	for name, b := range map[string][]byte{
		"no banner":           slices.Concat(kexinit, reply),
		"SSH-1.99 banner":     slices.Concat([]byte("SSH-1.99-x\r\n"), kexinit, reply),
		"banner without CRLF": slices.Concat([]byte("SSH-2.0-"), bytes.Repeat([]byte("x"), 300), []byte("\r\n"), kexinit, reply),
		"no KEXINIT":          slices.Concat([]byte(banner+"\r\n"), reply, reply),
		"no reply":            slices.Concat([]byte(banner+"\r\n"), kexinit, newkeys),
		"cut KEXINIT":         slices.Concat([]byte(banner+"\r\n"), kexinit[:len(kexinit)-1]),
		"cut reply":           slices.Concat([]byte(banner+"\r\n"), kexinit, reply[:len(reply)-1]),
		"not a packet":        slices.Concat([]byte(banner+"\r\n"), encrypted),
	} {
		op, err := nfParseOpening(b)
		if err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, op)
		}
		t.Logf("%s: %v", name, err)
	}
}

// nfFigure is one case's measurements, for the summary.
type nfFigure struct {
	name     string
	faulty   time.Duration // the faulty run, start to exit
	detect   time.Duration // from the fault to the end of that run
	converge time.Duration // the next run, without faults
	archived int           // handoffs the faulty run archived remotely
	hostErr  string
	firedAt  string
}

// TestNetFault runs one sync per fault through a fault proxy in front of
// one real sshd, then a clean sync, and checks the invariants in the
// file's comment after each.
func TestNetFault(t *testing.T) {
	srv := sshdtest.StartOpenSSH(t, sshdtest.Options{})
	cal := nfCalibrate(t, srv)

	var figMu sync.Mutex
	var figures []nfFigure
	record := func(f nfFigure) {
		figMu.Lock()
		defer figMu.Unlock()
		figures = append(figures, f)
	}
	defer func() {
		var b strings.Builder
		dur := func(d time.Duration) string {
			if d == 0 {
				return "-"
			}
			return d.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "%-28s %8s %8s %8s %8s  %s\n", "case", "faulty", "detect", "next run", "archived", "host error ($W: the world's directory) / fault")
		for _, f := range figures {
			fmt.Fprintf(&b, "%-28s %8s %8s %8s %8d  %s\n%65s %s\n", f.name, dur(f.faulty), dur(f.detect), dur(f.converge), f.archived, f.hostErr, "", f.firedAt)
		}
		t.Logf("calibration: clean sync %v; net-fault figures:\n%s", cal.elapsed.Round(10*time.Millisecond), b.String())
	}()

	type nfCase struct {
		name string
		// plan is every connection's plan; nw is the world (for markers).
		plan func(t *testing.T, nw *nfWorld) faultproxy.Plan
		// wantErr is what the host's error must say: which mechanism ended it.
		wantErr string
		// detect bounds the time from the fault (its firing, or the first
		// connection for faults armed at once) to the end of the run: the
		// deadline of the mechanism meant to notice it, plus slack.
		detect time.Duration
		// check, when set, asserts what is particular to the case.
		check func(t *testing.T, nw *nfWorld, archived int)
		// afterConverge, when set, asserts more once the next run is done.
		afterConverge func(t *testing.T, nw *nfWorld)
	}
	// After the fault: the connect deadline; the keepalive, which gives up
	// at most (count max + 1) intervals after the last answer; a reset,
	// noticed at once. Each plus what is left of the run (ingest of a
	// 600 KiB document, receipt: up to 2.2 s measured on a loaded machine).
	const endSlack = nfSlack
	connectBound := nfConnectTimeout + endSlack
	keepaliveBound := nfAliveInterval*(nfAliveCountMax+1) + endSlack
	resetBound := endSlack
	cases := []nfCase{
		{
			// Accepts TCP and never answers: the connect deadline ends it.
			name:    "silent-accept",
			plan:    func(*testing.T, *nfWorld) faultproxy.Plan { return faultproxy.Plan{SilentAccept: true} },
			wantErr: nfErrConnect,
			detect:  connectBound,
			check:   nfNothingArchived,
		},
		{
			// The server's banner at one byte a second: the connect
			// deadline covers the version exchange too.
			name: "banner-1-byte-per-second",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.ThrottleAt(faultproxy.Down, 1, faultproxy.Trigger{})}}
			},
			wantErr: nfErrConnect,
			detect:  connectBound,
			check:   nfNothingArchived,
		},
		{
			// The server's key exchange reply stops half way.
			name: "stall-in-key-exchange",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.StallAt(faultproxy.Down, faultproxy.Trigger{Down: cal.kex})}}
			},
			wantErr: nfErrConnect,
			detect:  connectBound,
			check:   nfNothingArchived,
		},
		{
			// Logged in; the SFTP server's version packet stops half way.
			// The raw socket's deadline is gone by now (it covered the
			// handshake); the connect deadline must still close it.
			name: "stall-in-sftp-start",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.StallAt(faultproxy.Down, faultproxy.Trigger{Down: cal.sftpStart})}}
			},
			wantErr: nfErrConnect,
			detect:  connectBound,
			check:   nfNothingArchived,
		},
		{
			// Logged in, SFTP started, then both directions stop as the
			// first request after Dial goes up, before any reply to it:
			// Dial's deadline is disarmed by now, so only the keepalive
			// can notice. (Triggered by the bytes sent, not received: a
			// byte offset down could fall inside the version packet in a
			// run where sshd's own packets came in another order, and
			// then Dial, not the keepalive, would see the stall.)
			name: "stall-after-auth",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.StallAt(faultproxy.Both, faultproxy.Trigger{Up: cal.upAfterDial + 1})}}
			},
			wantErr: nfErrKeepalive,
			detect:  keepaliveBound,
			check:   nfNothingArchived,
		},
		{
			// Everything vanishes, both ways, from the reply to the first
			// directory read on; the sockets stay open.
			name: "black-hole-while-listing",
			plan: func(t *testing.T, nw *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.BlackHoleAt(faultproxy.Trigger{When: nfAccessMarker(t, nw.repos)})}}
			},
			wantErr: nfErrKeepalive,
			detect:  keepaliveBound,
			check:   nfNothingArchived,
		},
		{
			// The server's replies stop half way through big.md.
			name: "stall-mid-read",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.StallAt(faultproxy.Down, faultproxy.Trigger{Down: cal.midRead})}}
			},
			wantErr: nfErrKeepalive,
			detect:  keepaliveBound,
			check:   nfBigNotArchived,
		},
		{
			// An RST half way through big.md.
			name: "reset-mid-read",
			plan: func(*testing.T, *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.ResetAt(faultproxy.Trigger{Down: cal.midRead})}}
			},
			wantErr: "connection",
			detect:  resetBound,
			check:   nfBigNotArchived,
		},
		{
			// The server carries out the first archive rename, and from
			// its answer on everything vanishes: the client cannot know
			// whether the rename happened.
			name: "black-hole-mid-rename",
			plan: func(t *testing.T, nw *nfWorld) faultproxy.Plan {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.BlackHoleAt(faultproxy.Trigger{When: nfArchivedMarker(nw.inboxes[0])})}}
			},
			wantErr: nfErrKeepalive,
			detect:  keepaliveBound,
			check: func(t *testing.T, nw *nfWorld, archived int) {
				// A batch's renames are in flight together, so more than
				// one may reach the server before the fault cuts it off;
				// at least the one that triggered it did.
				if archived < 1 {
					t.Errorf("the faulty run archived %d handoffs, want at least the one whose rename answer was lost", archived)
				}
			},
			afterConverge: nfRenamesAcknowledged,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nw := newNFWorld(t, srv, true)
			plan := tc.plan(t, nw)
			nw.proxy.SetPlan(plan)
			start := time.Now()
			r := nw.syncJSON(t)
			end := start.Add(r.elapsed)
			fig := nfFigure{name: tc.name, faulty: r.elapsed}
			defer func() { record(fig) }()

			if r.elapsed > nfBound {
				t.Errorf("the faulty run took %v, more than the host timeout %v + worker grace %v + slack %v", r.elapsed, nfHostTimeout, nfWorkerGrace, nfSlack)
			}
			conns := nw.proxy.Conns()
			var faultAt time.Time
			for _, c := range conns {
				for _, f := range c.Fired {
					if at := c.Accepted.Add(f.Stats.Elapsed); faultAt.IsZero() || at.Before(faultAt) {
						faultAt = at
					}
				}
			}
			if faultAt.IsZero() && len(conns) > 0 {
				faultAt = conns[0].Accepted
			}
			if faultAt.IsZero() {
				t.Fatalf("the run never reached the proxy: %s", r)
			}
			fig.detect = end.Sub(faultAt)
			if fig.detect > tc.detect {
				t.Errorf("the run ended %v after the fault, want at most %v: what should have noticed it (%q) did not", fig.detect, tc.detect, tc.wantErr)
			}
			if r.code != 1 {
				t.Fatalf("want exit 1 with the host failed: %s", r)
			}
			rc := decodeReceipt(t, r)
			h := receiptHost(t, rc, "laptop")
			fig.hostErr = strings.ReplaceAll(h.Error, nw.dir, "$W")
			if h.Outcome != "error" || !strings.Contains(h.Error, tc.wantErr) {
				t.Errorf("host outcome %q error %q, want an error saying %q", h.Outcome, h.Error, tc.wantErr)
			}
			if rc.Outcome != receipts.OutcomeFailed {
				t.Errorf("run outcome %q, want failed (its only host failed)", rc.Outcome)
			}
			fired := plan.SilentAccept
			for _, c := range conns {
				for _, f := range c.Fired {
					fired = true
					fig.firedAt += fmt.Sprintf("conn %d: %s at up=%d down=%d +%v; ", c.Index, f.What, f.Stats.Up, f.Stats.Down, f.Stats.Elapsed.Round(time.Millisecond))
				}
			}
			if !fired {
				t.Errorf("no fault fired: the case did not test what it says")
			}
			if plan.SilentAccept {
				fig.firedAt = fmt.Sprintf("%d connection(s), all silent", len(conns))
			}
			fig.archived = nw.checkAfterFault(t)
			if tc.check != nil {
				tc.check(t, nw, fig.archived)
			}
			fig.converge = nw.converge(t)
			if tc.afterConverge != nil {
				tc.afterConverge(t, nw)
			}
		})
	}

	// The embedded server's Stall hook holds the first SFTP rename request
	// unanswered (and never carries it out) while keepalives are still
	// answered: the transport is healthy, the request is lost. Only the
	// host's deadline can end it.
	t.Run("stall-mid-rename-request", func(t *testing.T) {
		var armed atomic.Bool
		armed.Store(true)
		emb := sshdtest.StartEmbedded(t, sshdtest.Options{Stall: func(pt byte) bool {
			return armed.Load() && pt == sshdtest.PacketRename
		}})
		nw := newNFWorld(t, emb, false)
		r := nw.syncJSON(t)
		fig := nfFigure{name: "stall-mid-rename-request", faulty: r.elapsed, firedAt: "embedded server: first SFTP rename never answered"}
		defer func() { record(fig) }()
		if r.elapsed > nfBound {
			t.Errorf("the faulty run took %v, more than %v", r.elapsed, nfBound)
		}
		if r.code != 1 {
			t.Fatalf("want exit 1 with the host failed: %s", r)
		}
		h := receiptHost(t, decodeReceipt(t, r), "laptop")
		fig.hostErr = strings.ReplaceAll(h.Error, nw.dir, "$W")
		if h.Outcome != "error" || !strings.Contains(h.Error, nfErrDeadline) {
			t.Errorf("host outcome %q error %q, want the host deadline (%q)", h.Outcome, h.Error, nfErrDeadline)
		}
		fig.archived = nw.checkAfterFault(t)
		if fig.archived != 0 {
			t.Errorf("%d handoffs archived although the first rename was never carried out", fig.archived)
		}
		armed.Store(false)
		fig.converge = nw.converge(t)
	})

	// Control: a reset during the first connection's key exchange is
	// retried (Dial makes up to 3 attempts within the connect deadline);
	// the second connection is clean, so the run succeeds.
	t.Run("reset-in-handshake-retried", func(t *testing.T) {
		nw := newNFWorld(t, srv, true)
		nw.proxy.SetPlanFunc(func(i int) faultproxy.Plan {
			if i == 0 {
				return faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.ResetAt(faultproxy.Trigger{Down: cal.kex})}}
			}
			return faultproxy.Plan{}
		})
		r := nw.syncJSON(t)
		record(nfFigure{name: "reset-in-handshake-retried", faulty: r.elapsed, archived: len(nw.results),
			firedAt: fmt.Sprintf("%d connections", nw.proxy.Accepted())})
		if r.code != 0 {
			t.Fatalf("a reset the retry should absorb failed the sync: %s", r)
		}
		if n := nw.proxy.Accepted(); n != 2 {
			t.Errorf("%d connections, want 2 (the reset one and the retry)", n)
		}
		if c := nw.proxy.Conns()[0]; !c.FiredKind(faultproxy.Reset) {
			t.Errorf("the first connection was not reset: %+v", c.Fired)
		}
		nw.checkConverged(nw.markers, nw.results)
	})

	// Control: a slow link that keeps answering is not a fault. Every
	// chunk waits 1 ms each way (about 600 chunks); the sync must succeed
	// within the host timeout and converge in one run.
	t.Run("latency-control", func(t *testing.T) {
		nw := newNFWorld(t, srv, true)
		nw.proxy.SetPlan(faultproxy.Plan{Faults: []faultproxy.Fault{faultproxy.DelayAt(faultproxy.Both, time.Millisecond, faultproxy.Trigger{})}})
		r := nw.syncJSON(t)
		record(nfFigure{name: "latency-control (1ms/chunk)", faulty: r.elapsed, archived: len(nw.results), firedAt: "ok"})
		if r.code != 0 {
			t.Fatalf("a slow but live link failed the sync: %s", r)
		}
		nw.checkConverged(nw.markers, nw.results)
		if r.elapsed > nfHostTimeout {
			t.Errorf("slow sync took %v", r.elapsed)
		}
	})
}

func nfNothingArchived(t *testing.T, _ *nfWorld, archived int) {
	t.Helper()
	if archived != 0 {
		t.Errorf("%d handoffs archived although the fault came before any was read", archived)
	}
}

func nfBigNotArchived(t *testing.T, nw *nfWorld, _ int) {
	t.Helper()
	if _, err := os.Stat(nw.bigPath); err != nil {
		t.Errorf("big.md, whose read was cut, left its inbox: %v", err)
	}
}

// nfRenamesAcknowledged: once the runs have converged, every source whose
// remote copy sits at its archive name is recorded as archived, and
// `handoff where` says so. A rename carried out by the server whose answer
// was lost is exactly the case: the inbox no longer lists the file, so no
// later run meets it again.
func nfRenamesAcknowledged(t *testing.T, nw *nfWorld) {
	t.Run("ledger-confirms-lost-rename", func(t *testing.T) {
		db, err := sql.Open("sqlite", filepath.Join(nw.ws, ".handoff/ledger.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(`SELECT inbox, name, archived_as, acked FROM sources`)
		if err != nil {
			t.Fatal(err)
		}
		type src struct {
			inbox, name, as string
			acked           bool
		}
		var srcs []src
		for rows.Next() {
			var s src
			if err := rows.Scan(&s.inbox, &s.name, &s.as, &s.acked); err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, s)
		}
		rows.Close()
		for _, s := range srcs {
			if s.acked {
				continue
			}
			if _, err := os.Stat(filepath.Join(s.inbox, s.as)); err == nil {
				t.Errorf("%s: archived on the host as %s, but the ledger still says the rename is not confirmed", filepath.Join(s.inbox, s.name), s.as)
				r := runHandoff(t, childEnv(nw.home), "where", "--manifest", nw.manifest, s.name)
				t.Logf("handoff where %s:\n%s", s.name, r.stdout)
			}
		}
	})
}
