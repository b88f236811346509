package sshfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// SFTP packet types and status codes the guard needs (draft-ietf-secsh-filexfer-02).
const (
	fxpReaddir   = 12
	fxpStatus    = 101
	fxpData      = 103
	fxpName      = 104
	fxFailure    = 4
	maxSFTPFrame = 256 * 1024 // pkg/sftp refuses larger packets too
)

// listGuard bounds directory listings. pkg/sftp's ReadDir gathers every
// entry the server sends before returning, so a server that never ends a
// listing could fill memory. The guard watches the SFTP stream between
// pkg/sftp and the channel: it notes the ids of READDIR requests sent while
// a listing is active, counts the entries their NAME replies announce, and
// once the budget is spent it hands pkg/sftp a failure status in place of
// the reply, which ends the listing. Only one listing is active at a time
// (FS.ReadDir serialises them).
type listGuard struct {
	mu       sync.Mutex
	active   bool
	budget   uint64
	seen     uint64
	exceeded bool
	ids      map[uint32]struct{}
	masked   map[string]string // masked name -> name as the server sent it
}

func newListGuard() *listGuard {
	return &listGuard{ids: make(map[uint32]struct{})}
}

// begin starts a listing that may receive at most budget entries.
func (g *listGuard) begin(budget int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active, g.budget, g.seen, g.exceeded = true, uint64(budget), 0, false
	clear(g.ids)
	g.masked = nil
}

// unmask returns a listed name as the server sent it.
func (g *listGuard) unmask(name string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if orig, ok := g.masked[name]; ok {
		return orig
	}
	return name
}

// noteMasked remembers a name maskSlashes changed.
func (g *listGuard) noteMasked(masked, orig string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.masked == nil {
		g.masked = map[string]string{}
	}
	if len(g.masked) < maxMasked {
		g.masked[masked] = orig
	}
}

// end stops watching and reports whether the budget was exceeded.
func (g *listGuard) end() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active = false
	clear(g.ids)
	return g.exceeded
}

// sent records an outgoing request.
func (g *listGuard) sent(typ byte, id uint32) {
	if typ != fxpReaddir {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active {
		g.ids[id] = struct{}{}
	}
}

// refuse reports whether the NAME reply with this id and entry count must
// be replaced by a failure, and whether it answers a listing at all.
func (g *listGuard) refuse(id uint32, count uint32) (refused, listing bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.ids[id]; !ok {
		return false, false
	}
	delete(g.ids, id)
	// An empty reply counts as one entry, so that a server cannot keep a
	// listing going forever with replies that hold nothing.
	n := max(uint64(count), 1)
	if g.exceeded || g.seen+n > g.budget {
		g.exceeded = true
		return true, true
	}
	g.seen += n
	return false, true
}

// guardWriter passes pkg/sftp's requests through, noting each one's type
// and id before it leaves (so the reply cannot arrive first).
type guardWriter struct {
	w    io.WriteCloser
	g    *listGuard
	hdr  [9]byte // length, type, id of the frame being written
	hdrN int
	left uint64 // bytes of the current frame after its header
}

func (w *guardWriter) Write(p []byte) (int, error) {
	w.observe(p)
	return w.w.Write(p)
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
			if length+4 > uint64(len(w.hdr)) {
				w.left = length + 4 - uint64(len(w.hdr))
			}
			w.g.sent(w.hdr[4], binary.BigEndian.Uint32(w.hdr[5:9]))
			if w.left == 0 {
				w.hdrN = 0
			}
			continue
		}
		n := uint64(len(p))
		if n > w.left {
			n = w.left
		}
		w.left -= n
		p = p[n:]
		if w.left == 0 {
			w.hdrN = 0
		}
	}
}

// guardReader hands pkg/sftp the server's replies one whole frame at a
// time, replacing with a failure status a NAME reply the guard refuses and
// an empty DATA reply.
type guardReader struct {
	r     io.Reader
	g     *listGuard
	frame []byte
	off   int

	mu  sync.Mutex
	err error // why the stream was cut off, if the guard cut it
}

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

func (r *guardReader) next() error {
	var lb [4]byte
	if _, err := io.ReadFull(r.r, lb[:]); err != nil {
		return err
	}
	length := binary.BigEndian.Uint32(lb[:])
	if length > maxSFTPFrame {
		return fmt.Errorf("sftp: server sent a %d-byte packet (limit %d)", length, maxSFTPFrame)
	}
	if cap(r.frame) < int(length)+4 {
		r.frame = make([]byte, int(length)+4)
	}
	r.frame = r.frame[:int(length)+4]
	copy(r.frame, lb[:])
	if _, err := io.ReadFull(r.r, r.frame[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	r.off = 0
	body := r.frame[4:]
	if len(body) < 9 {
		return nil
	}
	id := binary.BigEndian.Uint32(body[1:5])
	switch body[0] {
	case fxpName:
		refused, listing := r.g.refuse(id, binary.BigEndian.Uint32(body[5:9]))
		if refused {
			r.frame = statusFrame(r.frame[:0], id, fxFailure, "too many directory entries")
		} else if listing {
			maskSlashes(body, r.g.noteMasked)
		}
	case fxpData:
		// pkg/sftp asks again after an empty data reply, so a server could
		// keep a read spinning forever; a real server says EOF instead.
		if binary.BigEndian.Uint32(body[5:9]) == 0 {
			r.frame = statusFrame(r.frame[:0], id, fxFailure, "empty data reply")
		}
	}
	return nil
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
