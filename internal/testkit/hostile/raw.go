package hostile

import (
	"context"
	"encoding/binary"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// SFTP v3 packet types (draft-ietf-secsh-filexfer-02).
const (
	FxpInit     byte = 1
	FxpVersion  byte = 2
	FxpOpen     byte = 3
	FxpClose    byte = 4
	FxpRead     byte = 5
	FxpWrite    byte = 6
	FxpLstat    byte = 7
	FxpFstat    byte = 8
	FxpSetstat  byte = 9
	FxpOpendir  byte = 11
	FxpReaddir  byte = 12
	FxpRemove   byte = 13
	FxpMkdir    byte = 14
	FxpRmdir    byte = 15
	FxpRealpath byte = 16
	FxpStat     byte = 17
	FxpRename   byte = 18
	FxpStatus   byte = 101
	FxpHandle   byte = 102
	FxpData     byte = 103
	FxpName     byte = 104
	FxpAttrs    byte = 105
)

// SFTP status codes.
const (
	FxOK          uint32 = 0
	FxEOF         uint32 = 1
	FxNoSuchFile  uint32 = 2
	FxPermission  uint32 = 3
	FxFailure     uint32 = 4
	FxUnsupported uint32 = 8
)

// Attribute flags.
const (
	AttrSize        uint32 = 0x1
	AttrPermissions uint32 = 0x4
	AttrACModTime   uint32 = 0x8
	AttrExtended    uint32 = 0x80000000
)

// Request is one SFTP request as Raw parsed it.
type Request struct {
	Type   byte
	ID     uint32
	Path   string // OPEN, LSTAT, STAT, OPENDIR, REALPATH, MKDIR, REMOVE, RENAME (source), SETSTAT
	Target string // RENAME destination
	Handle string // READ, FSTAT, READDIR, CLOSE
	File   string // the path the handle was opened for
	Offset uint64 // READ
	Len    uint32 // READ
	N      int    // READ and READDIR requests on this handle before this one
}

// Raw is a minimal hand-written SFTP v3 server over a fixed set of
// virtual files, whose replies Hook may replace with any bytes. Directories
// are implied by the files' paths.
type Raw struct {
	Home  string
	Files map[string]string // absolute path → content, each reported as a 0600 file modified at Past
	// Hook, when set, is shown every request first. A non-nil result is
	// written to the client as is, in place of the normal reply: a whole
	// frame, length prefix included (see Frame), or any bytes at all.
	Hook func(Request) []byte
	// MaxHandles, when set, is how many open handles the server keeps, as
	// Green End's sftp-server keeps 128: past it, OPEN and OPENDIR still
	// answer with a handle, but one the server does not know, and every
	// request on it fails with "invalid handle".
	MaxHandles int

	mu        sync.Mutex
	dirs      map[string]bool // made by MKDIR
	peak      int             // most handles open at once, phantoms included
	phantomsN int             // phantom handles handed out
}

// Peak reports the most handles that were open at once in any session
// (handles past MaxHandles included), and how many of those were phantoms.
func (r *Raw) Peak() (open, phantoms int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak, r.phantomsN
}

// Frame prefixes body with its length, making one SFTP frame.
func Frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// U32 appends v big-endian.
func U32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// U64 appends v big-endian.
func U64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// Str appends an SSH string.
func Str(b []byte, s string) []byte { return append(U32(b, uint32(len(s))), s...) }

// Status is the body of an SSH_FXP_STATUS reply.
func Status(id, code uint32, msg string) []byte {
	return Str(Str(U32(U32([]byte{FxpStatus}, id), code), msg), "")
}

// Attrs appends SFTP v3 attributes: size, POSIX mode bits and times.
func Attrs(b []byte, size uint64, posixMode uint32) []byte {
	b = U32(b, AttrSize|AttrPermissions|AttrACModTime)
	b = binary.BigEndian.AppendUint64(b, size)
	b = U32(b, posixMode)
	t := uint32(Past.Unix())
	return U32(U32(b, t), t)
}

// POSIX file type bits for Attrs.
const (
	ModeRegular uint32 = 0o100000
	ModeDir     uint32 = 0o040000
)

type rawHandle struct {
	path    string
	dir     bool
	count   int  // READ or READDIR requests so far
	phantom bool // handed out past MaxHandles: the server does not know it
}

// ServeSFTP implements Engine.
func (r *Raw) ServeSFTP(ctx context.Context, rw io.ReadWriteCloser) {
	handles := map[string]*rawHandle{}
	next := 0
	for {
		var lb [4]byte
		if _, err := io.ReadFull(rw, lb[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lb[:])
		if n == 0 || n > 1<<20 {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(rw, body); err != nil {
			return
		}
		req := parse(body)
		if req.Type == FxpInit {
			if _, err := rw.Write(Frame([]byte{FxpVersion, 0, 0, 0, 3})); err != nil {
				return
			}
			continue
		}
		h, known := handles[req.Handle]
		phantom := known && h.phantom
		if phantom {
			if req.Type == FxpClose {
				delete(handles, req.Handle)
			}
		} else if known {
			req.File = h.path
			req.N = h.count
			if req.Type == FxpRead || req.Type == FxpReaddir {
				h.count++
			}
		}
		var out []byte
		if r.Hook != nil {
			out = r.Hook(req)
		}
		if out == nil {
			switch req.Type {
			case FxpRead, FxpFstat, FxpReaddir, FxpClose:
				if phantom {
					out = Frame(Status(req.ID, FxFailure, "invalid handle"))
				}
			}
		}
		if out == nil {
			reply := r.reply(req, handles, &next)
			out = Frame(reply)
		}
		if _, err := rw.Write(out); err != nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func parse(body []byte) Request {
	req := Request{Type: body[0]}
	b := body[1:]
	u32 := func() uint32 {
		if len(b) < 4 {
			b = nil
			return 0
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v
	}
	str := func() string {
		l := int(u32())
		if l > len(b) {
			b = nil
			return ""
		}
		s := string(b[:l])
		b = b[l:]
		return s
	}
	if req.Type == FxpInit {
		return req
	}
	req.ID = u32()
	switch req.Type {
	case FxpOpen, FxpLstat, FxpStat, FxpOpendir, FxpRealpath, FxpMkdir, FxpRemove, FxpRmdir, FxpSetstat:
		req.Path = str()
	case FxpRename:
		req.Path = str()
		req.Target = str()
	case FxpRead:
		req.Handle = str()
		hi, lo := u32(), u32()
		req.Offset = uint64(hi)<<32 | uint64(lo)
		req.Len = u32()
	case FxpFstat, FxpReaddir, FxpClose, FxpWrite:
		req.Handle = str()
	}
	return req
}

// isDir reports whether p is a directory implied by the files (or home).
func (r *Raw) isDir(p string) bool {
	p = path.Clean(p)
	if p == "/" || p == path.Clean(r.Home) || strings.HasPrefix(r.Home, p+"/") || r.dirs[p] {
		return true
	}
	for f := range r.Files {
		if strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// entries lists the names directly inside dir.
func (r *Raw) entries(dir string) []string {
	dir = path.Clean(dir)
	seen := map[string]bool{}
	for d := range r.dirs {
		if path.Dir(d) == dir {
			seen[path.Base(d)] = true
		}
	}
	for f := range r.Files {
		if rest, ok := strings.CutPrefix(f, dir+"/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			seen[name] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *Raw) attrsOf(b []byte, p string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p = path.Clean(p)
	if data, ok := r.Files[p]; ok {
		return Attrs(b, uint64(len(data)), ModeRegular|0o600), true
	}
	if r.isDir(p) {
		return Attrs(b, 4096, ModeDir|0o700), true
	}
	return b, false
}

// reply is an honest server's answer.
func (r *Raw) reply(req Request, handles map[string]*rawHandle, next *int) []byte {
	id := req.ID
	switch req.Type {
	case FxpRealpath:
		p := req.Path
		if p == "" || p == "." {
			p = r.Home
		} else if !path.IsAbs(p) {
			p = path.Join(r.Home, p)
		}
		b := U32(U32([]byte{FxpName}, id), 1)
		b = Str(Str(b, path.Clean(p)), path.Clean(p))
		return U32(b, 0)
	case FxpLstat, FxpStat:
		if b, ok := r.attrsOf(U32([]byte{FxpAttrs}, id), req.Path); ok {
			return b
		}
		return Status(id, FxNoSuchFile, "no such file")
	case FxpFstat:
		if b, ok := r.attrsOf(U32([]byte{FxpAttrs}, id), req.File); ok {
			return b
		}
		return Status(id, FxFailure, "bad handle")
	case FxpOpen, FxpOpendir:
		r.mu.Lock()
		_, isFile := r.Files[path.Clean(req.Path)]
		dir := r.isDir(req.Path)
		r.mu.Unlock()
		if req.Type == FxpOpen && !isFile || req.Type == FxpOpendir && !dir {
			return Status(id, FxNoSuchFile, "no such file")
		}
		*next++
		h := "h" + strconv.Itoa(*next)
		r.mu.Lock()
		phantom := r.MaxHandles > 0 && len(handles) >= r.MaxHandles
		r.peak = max(r.peak, len(handles)+1)
		if phantom {
			r.phantomsN++
		}
		r.mu.Unlock()
		handles[h] = &rawHandle{path: path.Clean(req.Path), dir: dir, phantom: phantom}
		return Str(U32([]byte{FxpHandle}, id), h)
	case FxpRead:
		r.mu.Lock()
		data, ok := r.Files[req.File]
		r.mu.Unlock()
		if !ok {
			return Status(id, FxFailure, "bad handle")
		}
		if req.Offset >= uint64(len(data)) {
			return Status(id, FxEOF, "eof")
		}
		chunk := data[req.Offset:]
		if uint64(len(chunk)) > uint64(req.Len) {
			chunk = chunk[:req.Len]
		}
		return Str(U32([]byte{FxpData}, id), chunk)
	case FxpReaddir:
		if req.N > 0 {
			return Status(id, FxEOF, "eof")
		}
		names := r.entries(req.File)
		b := U32(U32([]byte{FxpName}, id), uint32(len(names)))
		for _, n := range names {
			b = Str(Str(b, n), n)
			b, _ = r.attrsOf(b, path.Join(req.File, n))
		}
		return b
	case FxpClose:
		delete(handles, req.Handle)
		return Status(id, FxOK, "")
	case FxpRename:
		r.mu.Lock()
		defer r.mu.Unlock()
		from, to := path.Clean(req.Path), path.Clean(req.Target)
		data, ok := r.Files[from]
		if !ok {
			return Status(id, FxNoSuchFile, "no such file")
		}
		if _, exists := r.Files[to]; exists {
			return Status(id, FxFailure, "file exists")
		}
		delete(r.Files, from)
		r.Files[to] = data
		return Status(id, FxOK, "")
	case FxpMkdir:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.isDir(req.Path) {
			return Status(id, FxFailure, "file exists")
		}
		if r.dirs == nil {
			r.dirs = map[string]bool{}
		}
		r.dirs[path.Clean(req.Path)] = true
		return Status(id, FxOK, "")
	case FxpSetstat:
		return Status(id, FxOK, "")
	case FxpRemove:
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, ok := r.Files[path.Clean(req.Path)]; !ok {
			return Status(id, FxNoSuchFile, "no such file")
		}
		delete(r.Files, path.Clean(req.Path))
		return Status(id, FxOK, "")
	}
	return Status(id, FxUnsupported, "unsupported")
}

// Snapshot returns a copy of the current files.
func (r *Raw) Snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.Files))
	for k, v := range r.Files {
		out[k] = v
	}
	return out
}
