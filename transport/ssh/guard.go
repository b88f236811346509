package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/handoff-sync/handoff/transport"
)

// SFTP packet types and status codes the guard needs (draft-ietf-secsh-filexfer-02).
const (
	fxpClose     = 4
	fxpOpendir   = 11
	fxpReaddir   = 12
	fxpStatus    = 101
	fxpHandle    = 102
	fxpData      = 103
	fxpName      = 104
	fxOK         = 0
	fxEOF        = 1
	fxFailure    = 4
	maxSFTPFrame = 256 * 1024 // pkg/sftp refuses larger packets too
	// maxEarlyCloses bounds the made-up CLOSE replies waiting for the
	// reader to hand them on; past it a CLOSE waits for the server.
	maxEarlyCloses = 64
	// pumpAhead bounds the server's frames the pump has read and the
	// reader not yet taken (at most pumpAhead × maxSFTPFrame bytes).
	pumpAhead = 16
)

// listGuard bounds directory listings, each on its own: pkg/sftp's ReadDir
// gathers every entry a server sends, so one that never ends a listing
// could fill memory. It watches the SFTP stream both ways, follows each
// listing by request id and handle, and replaces a reply that would spend
// a listing's budget with a failure carrying its token. It also answers
// a listing's CLOSE itself, sparing a round trip per directory. See
// docs/design.md, "The listing guard".
type listGuard struct {
	token string // in the status that cuts a listing short

	mu       sync.Mutex
	paths    map[string]*dirBudget // path → registration, while FS.ReadDir lists it
	opendirs map[uint32]*dirBudget // OPENDIR id → budget, until the reply
	listings map[string]*listing   // open directory handle → its listing
	readdirs map[uint32]*listing   // READDIR id → listing, until the reply
	swallow  map[uint32]bool       // CLOSE ids answered by the guard: the server's reply is dropped
	lstats   map[uint32]lstatSlot  // the guard's own LSTAT ids (LstatAll), until the reply

	early chan []byte // CLOSE replies the guard made up, for the reader to hand on

	// handles is told of each directory CLOSE the guard answers, and of
	// the server's own answer when it comes (nil in some tests).
	handles *handleLimit
	// limitsAsked: a limits@openssh.com request with id limitsID is on
	// its way; its reply is taken out of the stream.
	limitsAsked bool

	// Read-ahead (see readAhead): out carries the guard's own READDIRs;
	// aheadIDs maps each one's id to its listing; dropIDs are those whose
	// listing was closed before the reply came; ready holds replies made
	// for pkg/sftp's READDIRs, and readySig says there are some.
	out      *guardWriter // nil: no read-ahead
	lastID   uint32
	aheadIDs map[uint32]*listing
	dropIDs  map[uint32]bool
	ready    [][]byte
	readySig chan struct{}
}

// readAhead is how many READDIRs the guard sends at once for a listing
// after a full reply: a big directory gets two replies per round trip.
// The first READDIR goes out alone as soon as the directory's handle
// arrives (a short reply ends the listing, see shortListing), so a small
// directory is listed in two round trips (OPENDIR; READDIR) instead of
// three. Only for OpenSSH's own sftp-server, which answers a session's
// requests one at a time and in order; others list as before (newFS).
const readAhead = 2

// shortListing is one more than the entries OpenSSH's sftp-server puts in
// a READDIR reply while its readdir(3) finds more: it stops at 100, and
// only the end of the directory stops it sooner (unchanged since 2000). So
// a reply from it with fewer entries is the last, and the guard ends the
// listing there instead of asking again to be told so: the first READDIR
// goes out alone, and a directory of fewer than 100 entries costs OPENDIR
// and one READDIR (docs/design.md, "The listing guard").
const shortListing = 100

// limitsID is the request id of the guard's own limits@openssh.com
// request. pkg/sftp numbers its requests from 1 up, so it never reaches
// this one in a session.
const limitsID = 0xffffffff

// SFTP packet types for the limits request and its answer.
const (
	fxpExtended      = 200
	fxpExtendedReply = 201
)

// dirBudget is one path being listed: the budget each listing of it gets,
// and the names masked in its listings.
type dirBudget struct {
	path   string
	budget uint64
	users  int           // FS.ReadDir calls listing path with this budget
	idle   chan struct{} // closed once users drops to 0
	masked map[string]string
}

// listing is one open directory handle.
type listing struct {
	dir      *dirBudget
	seen     uint64 // entries handed to pkg/sftp
	exceeded bool

	// The read-ahead's state: the guard's READDIRs in flight, in the
	// order sent; NAME replies not yet asked for; the terminal reply (the
	// end of the listing or an error) of the earliest READDIR that got
	// one, held until none is in flight; and pkg/sftp's READDIR ids
	// waiting for a reply.
	handle      string
	inflight    []uint32
	replies     [][]byte
	terminal    []byte
	terminalSeq uint32
	ended       bool
	waiting     []uint32
}

// closedListing stands for a handle the guard does not know (never opened
// by a listing, or already closed): it has no budget at all, so any entries
// sent for it are refused.
var closedListing = &listing{dir: &dirBudget{}}

func newListGuard() *listGuard {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return &listGuard{
		token:    "too many directory entries [guard " + hex.EncodeToString(b[:]) + "]",
		paths:    make(map[string]*dirBudget),
		opendirs: make(map[uint32]*dirBudget),
		listings: make(map[string]*listing),
		readdirs: make(map[uint32]*listing),
		swallow:  make(map[uint32]bool),
		lstats:   make(map[uint32]lstatSlot),
		early:    make(chan []byte, maxEarlyCloses),
		lastID:   limitsID,
		aheadIDs: make(map[uint32]*listing),
		dropIDs:  make(map[uint32]bool),
		readySig: make(chan struct{}, 1),
	}
}

// begin registers a listing of path that may receive at most budget
// entries, and returns the registration for unmask and end. Listings of
// the same path with the same budget run at once; one with another budget
// waits until those end, since the guard could not tell their OPENDIRs
// apart. It returns early, with an error, when ctx or stop ends.
func (g *listGuard) begin(ctx context.Context, stop <-chan struct{}, path string, budget int) (*dirBudget, error) {
	for {
		g.mu.Lock()
		d := g.paths[path]
		if d == nil {
			d = &dirBudget{path: path, budget: uint64(budget), idle: make(chan struct{})}
			g.paths[path] = d
		}
		if d.budget == uint64(budget) {
			d.users++
			g.mu.Unlock()
			return d, nil
		}
		idle := d.idle
		g.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, errClosed
		}
	}
}

// end ends one FS.ReadDir call's registration.
func (g *listGuard) end(d *dirBudget) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d.users--
	if d.users == 0 {
		delete(g.paths, d.path)
		close(d.idle)
	}
}

// cut reports whether err is the guard's own refusal: the listing ran out
// of budget.
func (g *listGuard) cut(err error) bool {
	return err != nil && strings.Contains(err.Error(), g.token)
}

// unmask returns a name listed under d as the server sent it.
func (g *listGuard) unmask(d *dirBudget, name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if orig, ok := d.masked[name]; ok {
		return orig
	}
	return name
}

// noteMasked remembers a name maskSlashes changed in a listing of d.
func (g *listGuard) noteMasked(d *dirBudget, masked, orig string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d.masked == nil {
		d.masked = map[string]string{}
	}
	if len(d.masked) < maxMasked {
		d.masked[masked] = orig
	}
}

// sent records an outgoing request; body is the whole packet after its
// length (type, id, fields) for the types the guard follows, else just
// type and id.
func (g *listGuard) sent(body []byte) {
	typ, id := body[0], binary.BigEndian.Uint32(body[1:5])
	switch typ {
	case fxpOpendir, fxpReaddir, fxpClose:
	default:
		return
	}
	s, ok := sshString(body[5:])
	g.mu.Lock()
	defer g.mu.Unlock()
	switch typ {
	case fxpOpendir:
		d := g.paths[string(s)]
		if !ok || d == nil {
			// Not a listing FS.ReadDir registered (there is none): the
			// transport's own bound.
			d = &dirBudget{budget: transport.DefaultMaxEntries + 2}
		}
		g.opendirs[id] = d
	case fxpReaddir:
		l := g.listings[string(s)]
		if !ok || l == nil {
			l = closedListing
		}
		g.readdirs[id] = l
	case fxpClose:
		l := g.listings[string(s)]
		if !ok || l == nil {
			return
		}
		for _, gid := range l.inflight {
			g.dropIDs[gid] = true
		}
		l.inflight, l.replies, l.waiting = nil, nil, nil
		delete(g.listings, string(s))
		// The listing is over: answer for the server, which will close
		// the handle in the order it was asked (and whose answer the
		// reader drops).
		select {
		case g.early <- statusFrame(nil, id, fxOK, ""):
			g.swallow[id] = true
			if g.handles != nil {
				g.handles.closeAnswered()
			}
		default:
		}
	}
}

// swallowed reports whether a reply with id answers a CLOSE the guard has
// answered already, and forgets the id.
func (g *listGuard) swallowed(id uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.swallow[id] {
		return false
	}
	delete(g.swallow, id)
	if g.handles != nil {
		g.handles.closeDone()
	}
	return true
}

// askLimits sends a limits@openssh.com request on w, the stream below
// pkg/sftp. Call it only while nothing else writes to the stream.
func (g *listGuard) askLimits(w io.Writer) error {
	_, err := w.Write(g.limitsRequest())
	return err
}

// limitsRequest returns the guard's limits@openssh.com request, to be sent
// at once: its answer is awaited from now on.
func (g *listGuard) limitsRequest() []byte {
	const ext = "limits@openssh.com"
	var b []byte
	b = binary.BigEndian.AppendUint32(b, uint32(1+4+4+len(ext)))
	b = append(b, fxpExtended)
	b = binary.BigEndian.AppendUint32(b, limitsID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ext)))
	b = append(b, ext...)
	g.mu.Lock()
	g.limitsAsked = true
	g.mu.Unlock()
	return b
}

// asking reports whether the answer to askLimits is still to come.
func (g *listGuard) asking() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limitsAsked
}

// limitsReply takes the answer to askLimits out of the stream: it reports
// whether body (type, id, fields) is that answer, and if it carries an
// open-handles limit, applies it.
func (g *listGuard) limitsReply(body []byte) bool {
	if binary.BigEndian.Uint32(body[1:5]) != limitsID {
		return false
	}
	g.mu.Lock()
	asked := g.limitsAsked
	g.limitsAsked = false
	g.mu.Unlock()
	if !asked {
		return false
	}
	// max-packet-length, max-read-length, max-write-length,
	// max-open-handles: four uint64s. 0 means the server does not know,
	// which leaves the default.
	if body[0] == fxpExtendedReply && len(body) >= 5+32 && g.handles != nil {
		if n := binary.BigEndian.Uint64(body[5+24:]); n > 0 {
			g.handles.setLimit(int(min(n, maxHandles)))
		}
	}
	return true
}

// verdict is what the guard does with a reply.
type verdict int

const (
	pass         verdict = iota // hand it to pkg/sftp as it is
	listed                      // a NAME reply to a listing within budget: mask it
	refuse                      // replace it with the guard's failure status
	refuseHandle                // replace it: the server reused an open handle
	opened                      // a HANDLE reply to a listing's OPENDIR: read ahead
)

// received looks at a reply (body: type, id, fields) before pkg/sftp
// does. For a listed NAME reply it also returns the listing's registration.
func (g *listGuard) received(body []byte) (verdict, *dirBudget) {
	typ, id := body[0], binary.BigEndian.Uint32(body[1:5])
	g.mu.Lock()
	defer g.mu.Unlock()
	if d, ok := g.opendirs[id]; ok {
		delete(g.opendirs, id)
		if typ != fxpHandle {
			return pass, nil
		}
		h, ok := sshString(body[5:])
		if !ok {
			return pass, nil // pkg/sftp fails the OPENDIR itself
		}
		if _, dup := g.listings[string(h)]; dup {
			// Two open listings on one handle would share one budget and
			// the first CLOSE would leave the other unguarded.
			return refuseHandle, nil
		}
		g.listings[string(h)] = &listing{dir: d, handle: string(h)}
		return opened, nil
	}
	l, ok := g.readdirs[id]
	if !ok {
		return pass, nil
	}
	delete(g.readdirs, id)
	if typ != fxpName || len(body) < 9 {
		return pass, nil // pkg/sftp ends the listing
	}
	// An empty reply counts as one entry, so that a server cannot keep a
	// listing going forever with replies that hold nothing.
	n := max(uint64(binary.BigEndian.Uint32(body[5:9])), 1)
	if l.exceeded || l.seen+n > l.dir.budget {
		l.exceeded = true
		return refuse, nil
	}
	l.seen += n
	return listed, l.dir
}

// sshString reads the SSH string at the start of b.
func sshString(b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b[:4])
	if uint64(n) > uint64(len(b)-4) {
		return nil, false
	}
	return b[4 : 4+n], true
}

// guardWriter passes pkg/sftp's requests through, showing each one to the
// guard before it leaves (so that the reply cannot arrive first). pkg/sftp
// writes one request at a time, in one or more Writes. A READDIR the
// read-ahead answers is not passed on; the guard's own READDIRs go out
// with pkg/sftp's next Write, between its requests (inject).
type guardWriter struct {
	w io.WriteCloser
	g *listGuard

	mu   sync.Mutex
	hdr  [9]byte // length, type, id of the frame being written
	hdrN int
	keep bool   // the guard reads this frame's fields: gather it in body
	body []byte // the frame after its length
	left uint64 // bytes of the current frame after its header
	out  []byte // bytes of this Write to pass on
	err  error  // the first write error: every later write fails with it

	pendMu  sync.Mutex
	pending []byte // the guard's own frames, waiting for pkg/sftp's next Write

	afterInit []byte // the guard's own frames, to follow pkg/sftp's first (INIT)

	watch *sentWatch // shown each READ while it watches (pipelined.go)
}

func (w *guardWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.out = w.out[:0]
	if w.hdrN == 0 {
		w.out = w.takePending(w.out)
	}
	w.observe(p)
	if w.hdrN == 0 {
		w.out = append(w.out, w.afterInit...)
		w.afterInit = nil
		w.out = w.takePending(w.out)
	}
	if len(w.out) > 0 {
		if _, err := w.w.Write(w.out); err != nil {
			w.err = err
			return 0, err
		}
	}
	return len(p), nil
}

// send writes frames of the guard's own now, from a caller that may wait
// on the stream (not the reader): between two of pkg/sftp's requests, or,
// if pkg/sftp is part way through writing one, with its next Write.
func (w *guardWriter) send(frames []byte) error {
	w.inject(frames)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.hdrN != 0 {
		return nil
	}
	if out := w.takePending(nil); len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// inject queues frames of the guard's own. They go out with pkg/sftp's
// next Write, between two of its requests: the reader, which calls this,
// must never wait on the stream (the server may be waiting for it to read).
// pkg/sftp always writes again soon after a read-ahead starts or a reply
// is taken: the READDIR it sends next.
func (w *guardWriter) inject(frames []byte) {
	if len(frames) == 0 {
		return
	}
	w.pendMu.Lock()
	defer w.pendMu.Unlock()
	w.pending = append(w.pending, frames...)
}

// takePending appends the queued frames to b, leaving out READDIRs whose
// listing pkg/sftp has closed meanwhile (they would only earn an error).
func (w *guardWriter) takePending(b []byte) []byte {
	w.pendMu.Lock()
	defer w.pendMu.Unlock()
	for p := w.pending; len(p) >= 9; {
		n := 4 + int(binary.BigEndian.Uint32(p[:4]))
		if !w.g.unsent(binary.BigEndian.Uint32(p[5:9])) {
			b = append(b, p[:n]...)
		}
		p = p[n:]
	}
	w.pending = w.pending[:0]
	return b
}

func (w *guardWriter) Close() error { return w.w.Close() }

func (w *guardWriter) observe(p []byte) {
	for len(p) > 0 {
		if w.hdrN < len(w.hdr) {
			n := copy(w.hdr[w.hdrN:], p)
			w.hdrN += n
			p = p[n:]
			if w.hdrN < len(w.hdr) {
				return
			}
			length := uint64(binary.BigEndian.Uint32(w.hdr[:4]))
			w.left = 0
			if length+4 > uint64(len(w.hdr)) {
				w.left = length + 4 - uint64(len(w.hdr))
			}
			switch w.hdr[4] {
			case fxpOpendir, fxpReaddir, fxpClose:
				// Our own requests, small: keep the whole body, and pass
				// the frame on once it is whole.
				w.keep = true
				w.body = append(w.body[:0], w.hdr[4:]...)
			case fxpRead:
				// As small; kept only while a pipelined read waits
				// for one to be queued.
				w.keep = w.watch != nil && w.watch.watching()
				if w.keep {
					w.body = append(w.body[:0], w.hdr[4:]...)
				} else {
					w.out = append(w.out, w.hdr[:]...)
				}
			default:
				w.keep = false
				w.out = append(w.out, w.hdr[:]...)
			}
			if w.left == 0 {
				w.done()
			}
			continue
		}
		n := min(uint64(len(p)), w.left)
		if w.keep {
			w.body = append(w.body, p[:n]...)
		} else {
			w.out = append(w.out, p[:n]...)
		}
		w.left -= n
		p = p[n:]
		if w.left == 0 {
			w.done()
		}
	}
}

// done ends the frame being written.
func (w *guardWriter) done() {
	w.hdrN = 0
	if !w.keep {
		w.g.sent(w.hdr[4:])
		return
	}
	if w.body[0] == fxpRead {
		w.watch.saw(w.body)
	}
	if w.body[0] == fxpReaddir && w.g.answerReaddir(w.body) {
		return // answered from the read-ahead; the server never sees it
	}
	w.g.sent(w.body)
	w.out = append(w.out, w.hdr[:4]...)
	w.out = append(w.out, w.body...)
}

// readdirFrame is a READDIR request for handle h.
func readdirFrame(b []byte, id uint32, h string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(1+4+4+len(h)))
	b = append(b, fxpReaddir)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	return append(b, h...)
}

// aheadLocked registers n more of the guard's READDIRs for l and returns
// their frames, to be sent (inject) once g.mu is released. Their ids count
// down from below limitsID; pkg/sftp's count up from 1.
func (g *listGuard) aheadLocked(l *listing, n int) []byte {
	var b []byte
	for range n {
		g.lastID--
		id := g.lastID
		g.aheadIDs[id] = l
		g.readdirs[id] = l
		l.inflight = append(l.inflight, id)
		b = readdirFrame(b, id, l.handle)
	}
	return b
}

// startAhead sends the first READDIRs of the listing whose handle h has
// just arrived, before pkg/sftp asks for them.
func (g *listGuard) startAhead(h string) {
	g.mu.Lock()
	out, l := g.out, g.listings[h]
	var frames []byte
	if out != nil && l != nil {
		frames = g.aheadLocked(l, 1) // one: a short reply ends the listing
	}
	g.mu.Unlock()
	if len(frames) > 0 {
		out.inject(frames)
	}
}

// answerReaddir answers pkg/sftp's READDIR (body: type, id, handle) from
// the read-ahead: with a reply already here, or with the next one to come.
// It reports false for a READDIR the read-ahead does not cover, which goes
// to the server as before.
func (g *listGuard) answerReaddir(body []byte) bool {
	id := binary.BigEndian.Uint32(body[1:5])
	h, ok := sshString(body[5:])
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.listings[string(h)]
	if !ok || l == nil || len(l.inflight) == 0 && len(l.replies) == 0 && l.terminal == nil {
		return false
	}
	switch {
	case len(l.replies) > 0:
		g.readyLocked(l.replies[0], id)
		l.replies = l.replies[1:]
	case g.terminalReadyLocked(l):
		g.readyLocked(l.terminal, id)
		l.terminal = nil
	default:
		l.waiting = append(l.waiting, id)
	}
	return true
}

// terminalReadyLocked reports whether l's end may be handed on: every
// READDIR sent before the one that found it has been answered (the server
// answers in order, so those sent after can only find the end too: their
// replies are dropped).
func (g *listGuard) terminalReadyLocked(l *listing) bool {
	if l.terminal == nil || len(l.replies) > 0 {
		return false
	}
	for _, id := range l.inflight {
		if id > l.terminalSeq { // ids count down: larger is earlier
			return false
		}
	}
	for _, id := range l.inflight {
		g.dropIDs[id] = true
	}
	l.inflight = nil
	return true
}

// readyLocked queues frame, as the reply to id, for the reader.
func (g *listGuard) readyLocked(frame []byte, id uint32) {
	binary.BigEndian.PutUint32(frame[5:9], id)
	g.ready = append(g.ready, frame)
	select {
	case g.readySig <- struct{}{}:
	default:
	}
}

// takeReady returns the next reply queued for pkg/sftp, or nil.
func (g *listGuard) takeReady() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ready) == 0 {
		return nil
	}
	f := g.ready[0]
	g.ready = g.ready[1:]
	if len(g.ready) > 0 {
		select {
		case g.readySig <- struct{}{}:
		default:
		}
	}
	return f
}

// aheadReply takes the server's reply to one of the guard's READDIRs (in
// r.frame, already judged) out of the stream: it becomes the reply to
// pkg/sftp's READDIR that waits for it, or waits for that READDIR. When
// the last READDIR in flight gets a NAME reply, two more go out. The end of the listing (or an error) is
// held until every READDIR sent before it is answered, and the earliest
// one's is kept. It reports whether r.frame is to be handed on now.
func (r *guardReader) aheadReply(id uint32, l *listing, name bool) bool {
	g := r.g
	g.mu.Lock()
	l.inflight = slices.DeleteFunc(l.inflight, func(v uint32) bool { return v == id })
	frame := append([]byte(nil), r.frame...)
	var more []byte
	handNow := false
	if name {
		short := len(r.frame) >= 13 && binary.BigEndian.Uint32(r.frame[9:13]) < shortListing
		if short {
			// The server's readdir(3) found the end: so does the listing,
			// with an end of file made up for pkg/sftp's next READDIR. A
			// READDIR still in flight can only find the end too.
			l.ended = true
			if l.terminal == nil || id > l.terminalSeq { // ids count down: larger is earlier
				l.terminal, l.terminalSeq = statusFrame(nil, id, fxEOF, "End of file"), id
			}
		}
		if len(l.waiting) > 0 {
			binary.BigEndian.PutUint32(r.frame[5:9], l.waiting[0])
			l.waiting = l.waiting[1:]
			handNow = true
		} else {
			l.replies = append(l.replies, frame)
		}
		// The last READDIR in flight found more: send the next pair. (While
		// one is still in flight it may find the end, and a READDIR sent
		// now would be wasted.)
		if len(l.inflight) == 0 && !l.ended && !l.exceeded && g.listings[l.handle] == l {
			more = g.aheadLocked(l, readAhead)
		}
	} else {
		l.ended = true
		if l.terminal == nil || id > l.terminalSeq { // ids count down: larger is earlier
			l.terminal, l.terminalSeq = frame, id
		}
	}
	if !handNow && len(l.waiting) > 0 && g.terminalReadyLocked(l) {
		g.readyLocked(l.terminal, l.waiting[0])
		l.terminal, l.waiting = nil, l.waiting[1:]
	}
	out := g.out
	g.mu.Unlock()
	if len(more) > 0 {
		out.inject(more)
	}
	return handNow
}

// unsent reports whether the guard's READDIR id, about to be sent, belongs
// to a listing already closed, and if so forgets it.
func (g *listGuard) unsent(id uint32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.dropIDs[id] {
		return false
	}
	delete(g.dropIDs, id)
	delete(g.aheadIDs, id)
	delete(g.readdirs, id)
	return true
}

// aheadOf reports whether id is one of the guard's READDIRs and its
// listing; a READDIR whose listing was closed is forgotten and its reply
// dropped (drop).
func (g *listGuard) aheadOf(id uint32) (l *listing, ok, drop bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok = g.aheadIDs[id]
	if !ok {
		return nil, false, false
	}
	delete(g.aheadIDs, id)
	if g.dropIDs[id] {
		delete(g.dropIDs, id)
		delete(g.readdirs, id)
		return nil, true, true
	}
	return l, true, false
}

// guardReader hands pkg/sftp the server's replies one whole frame at a
// time, replacing with a failure status a NAME reply the guard refuses, a
// HANDLE reply to OPENDIR that repeats an open listing's handle, and an
// empty DATA reply; and hands it the CLOSE replies the guard made up, as
// soon as they are made, dropping the server's own. A goroutine (the pump)
// reads the server's frames one at a time, so that a made-up reply need
// not wait for the server's next frame.
type guardReader struct {
	r     io.Reader
	g     *listGuard
	frame []byte
	off   int

	pumpOnce sync.Once
	frames   chan pumped   // from the pump: a frame, or the error that ended the stream
	quit     chan struct{} // closed by stop: the pump gives up
	stopOnce sync.Once

	mu  sync.Mutex
	err error // why the stream was cut off, if the guard cut it
}

// pumped is a frame the pump read, or the error that ended the stream.
type pumped struct {
	frame []byte
	err   error
}

func newGuardReader(r io.Reader, g *listGuard) *guardReader {
	return &guardReader{r: r, g: g, frames: make(chan pumped, pumpAhead), quit: make(chan struct{})}
}

// stop ends the pump (once the stream is closed, it has nothing to read).
func (r *guardReader) stop() { r.stopOnce.Do(func() { close(r.quit) }) }

func (r *guardReader) Read(p []byte) (int, error) {
	if r.off == len(r.frame) {
		if err := r.next(); err != nil {
			if err != io.EOF {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
			return 0, err
		}
	}
	n := copy(p, r.frame[r.off:])
	r.off += n
	return n, nil
}

// failure is the error that ended the stream, or nil.
func (r *guardReader) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// pump reads the server's frames, each whole and within maxSFTPFrame, and
// hands them to next, until the stream ends or stop is called.
func (r *guardReader) pump() {
	for {
		frame, err := readSFTPFrame(r.r)
		select {
		case r.frames <- pumped{frame, err}:
		case <-r.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// readSFTPFrame reads one frame (length and body) from rd.
func readSFTPFrame(rd io.Reader) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(rd, lb[:]); err != nil {
		return nil, err
	}
	length := binary.BigEndian.Uint32(lb[:])
	if length > maxSFTPFrame {
		return nil, fmt.Errorf("sftp: server sent a %d-byte packet (limit %d)", length, maxSFTPFrame)
	}
	frame := make([]byte, int(length)+4)
	copy(frame, lb[:])
	if _, err := io.ReadFull(rd, frame[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// next makes r.frame the next frame to hand pkg/sftp: a made-up CLOSE
// reply, or the server's next frame as the guard judges it.
func (r *guardReader) next() error {
	r.pumpOnce.Do(func() { go r.pump() })
	for {
		var p pumped
		select {
		case f := <-r.g.early:
			r.frame, r.off = f, 0
			return nil
		case <-r.g.readySig:
			if f := r.g.takeReady(); f != nil {
				r.frame, r.off = f, 0
				return nil
			}
			continue
		case p = <-r.frames:
		}
		if p.err != nil {
			// Nothing more will come: the guard's own LSTATs fail too.
			r.g.endLstats(fmt.Errorf("%w: %w", errClosed, p.err))
			return p.err
		}
		r.frame, r.off = p.frame, 0
		if r.judge() {
			return nil
		}
	}
}

// judge looks at the server's frame in r.frame, rewriting it where the
// guard says so. It returns false for a frame to drop: the server's reply
// to a CLOSE the guard has answered.
func (r *guardReader) judge() bool {
	body := r.frame[4:]
	if len(body) < 5 || body[0] < fxpStatus {
		return true // VERSION (no id), or too short for pkg/sftp to accept
	}
	id := binary.BigEndian.Uint32(body[1:5])
	if r.g.swallowed(id) || r.g.limitsReply(body) || r.g.lstatReply(body) {
		return false
	}
	l, ahead, drop := r.g.aheadOf(id)
	if drop {
		return false
	}
	switch v, d := r.g.received(body); v {
	case refuse:
		r.frame = statusFrame(r.frame[:0], id, fxFailure, r.g.token)
		if ahead {
			return r.aheadReply(id, l, false)
		}
		return true
	case refuseHandle:
		r.frame = statusFrame(r.frame[:0], id, fxFailure, "the server reused an open directory handle")
		return true
	case opened:
		h, _ := sshString(body[5:])
		r.g.startAhead(string(h))
		return true
	case listed:
		maskSlashes(body, func(masked, orig string) { r.g.noteMasked(d, masked, orig) })
		if ahead {
			return r.aheadReply(id, l, true)
		}
		return true
	}
	if ahead {
		return r.aheadReply(id, l, false)
	}
	switch body[0] {
	case fxpData:
		// pkg/sftp asks again after an empty data reply, so a server could
		// keep a read spinning forever; a real server says EOF instead.
		if len(body) >= 9 && binary.BigEndian.Uint32(body[5:9]) == 0 {
			r.frame = statusFrame(r.frame[:0], id, fxFailure, "empty data reply")
		}
	}
	return true
}

// statusFrame appends an SSH_FXP_STATUS packet to b.
func statusFrame(b []byte, id, code uint32, msg string) []byte {
	length := 1 + 4 + 4 + 4 + len(msg) + 4
	b = binary.BigEndian.AppendUint32(b, uint32(length))
	b = append(b, fxpStatus)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, code)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	b = append(b, msg...)
	b = binary.BigEndian.AppendUint32(b, 0) // language tag
	return b
}

// slashMask stands in for "/" in listed names on their way through
// pkg/sftp, whose ReadDir keeps only path.Base of each name: a hostile
// "sub/evil.md" would arrive as "evil.md". FS.ReadDir puts the "/" back, so
// that the name is seen, and refused, as the server sent it. (A NUL cannot
// be part of a real file name.)
const slashMask = 0

// maxMasked bounds how many masked names one listing remembers; the rest
// are reported with the mask in place of "/" (still refused, as NUL is a
// control character).
const maxMasked = 1000

// maskSlashes replaces "/" in the file names of a NAME reply body (type, id,
// count, entries) in place, telling note about each name it changed. A body
// it cannot parse is left as it is.
func maskSlashes(body []byte, note func(masked, orig string)) {
	count := binary.BigEndian.Uint32(body[5:9])
	p := body[9:]
	str := func() ([]byte, bool) {
		if len(p) < 4 {
			return nil, false
		}
		n := binary.BigEndian.Uint32(p[:4])
		if uint64(n) > uint64(len(p)-4) {
			return nil, false
		}
		s := p[4 : 4+n]
		p = p[4+n:]
		return s, true
	}
	skip := func(n int) bool {
		if len(p) < n {
			return false
		}
		p = p[n:]
		return true
	}
	for range count {
		name, ok := str()
		if !ok {
			return
		}
		if bytes.IndexByte(name, '/') >= 0 {
			orig := string(name)
			for i, b := range name {
				if b == '/' {
					name[i] = slashMask
				}
			}
			note(string(name), orig)
		}
		if _, ok := str(); !ok { // longname
			return
		}
		if len(p) < 4 {
			return
		}
		flags := binary.BigEndian.Uint32(p[:4])
		p = p[4:]
		for _, f := range []struct {
			bit uint32
			n   int
		}{{0x1, 8}, {0x2, 8}, {0x4, 4}, {0x8, 8}} {
			if flags&f.bit != 0 && !skip(f.n) {
				return
			}
		}
		if flags&0x80000000 != 0 {
			if len(p) < 4 {
				return
			}
			ext := binary.BigEndian.Uint32(p[:4])
			p = p[4:]
			for range ext {
				if _, ok := str(); !ok {
					return
				}
				if _, ok := str(); !ok {
					return
				}
			}
		}
	}
}
