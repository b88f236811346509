package hostile

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pkg/sftp"
)

// Past is the modification time VFS nodes get by default: old enough for
// any settle period.
var Past = time.Now().Add(-time.Hour).Truncate(time.Second)

// Node is one virtual file or directory. Its fields say what the server
// claims; they need not agree with each other.
type Node struct {
	// Mode is what LSTAT and READDIR report (type bits and permissions).
	Mode    fs.FileMode
	Size    int64 // what LSTAT and READDIR report
	ModTime time.Time
	Data    []byte // what READ serves, unless Read is set

	// Read, when set, serves READ requests in place of Data: it fills p
	// from offset off and returns io.EOF at the end. ctx ends with the
	// session; a Read that waits must return then.
	Read func(ctx context.Context, p []byte, off int64) (int, error)
	// Fstat, when set, is what FSTAT on an open handle (and STAT) reports,
	// given how many bytes READ has served from this node so far. Unset:
	// the same as LSTAT.
	Fstat func(served int64) (size int64, mode fs.FileMode)
	// List, when set, lists a directory in place of its children: it fills
	// dst with the entries from offset on and returns io.EOF after the
	// last. It is called once per READDIR, so a listing can be generated
	// lazily. Entries may have any name (see Entry).
	List func(dst []os.FileInfo, offset int64) (int, error)
	// Extra entries are listed after a directory's real children; they
	// need not exist (names with "/" or NUL cannot).
	Extra []os.FileInfo

	// Target, for a node of mode fs.ModeSymlink, is the absolute path it
	// points to (see Symlink). A symlink without one is never followed.
	Target string

	served atomic.Int64 // bytes READ served
	reads  atomic.Int64 // READ replies with data
	opens  atomic.Int64 // OPEN requests
}

// File is a regular file of mode 0600 holding data, modified at Past.
func File(data string) *Node {
	return &Node{Mode: 0o600, Size: int64(len(data)), ModTime: Past, Data: []byte(data)}
}

// Dir is a directory of mode 0700.
func Dir() *Node { return &Node{Mode: fs.ModeDir | 0o700, ModTime: Past} }

// Symlink is a symbolic link to the absolute path target.
func Symlink(target string) *Node {
	return &Node{Mode: fs.ModeSymlink | 0o777, Size: int64(len(target)), ModTime: Past, Target: target}
}

// Served reports how many bytes READ has served from the node.
func (n *Node) Served() int64 { return n.served.Load() }

// Reads reports how many READ requests got data.
func (n *Node) Reads() int64 { return n.reads.Load() }

// Opens reports how many times the node was opened.
func (n *Node) Opens() int64 { return n.opens.Load() }

// Entry is a directory entry with any name, described as LSTAT would be.
func Entry(name string, mode fs.FileMode, size int64) os.FileInfo {
	return info{name: name, mode: mode, size: size, mtime: Past}
}

// EntryAt is Entry with a modification time.
func EntryAt(name string, mode fs.FileMode, size int64, mtime time.Time) os.FileInfo {
	return info{name: name, mode: mode, size: size, mtime: mtime}
}

// Endless is a Node.Read that never reaches the end: every READ is filled
// with b.
func Endless(b byte) func(context.Context, []byte, int64) (int, error) {
	return func(_ context.Context, p []byte, _ int64) (int, error) {
		for i := range p {
			p[i] = b
		}
		return len(p), nil
	}
}

// VFS is an in-memory tree served through pkg/sftp's request server. Paths
// are absolute and slash-separated. Writes are refused unless Writable is
// set; renames move nodes and, like OpenSSH's SSH_FXP_RENAME, never
// replace an existing name (posix-rename@openssh.com does, when Writable).
type VFS struct {
	// Home is what REALPATH "." answers: the login directory.
	Home string
	// Rename, when set, sees every RENAME first. If it returns handled,
	// err is the answer and nothing moves (a lying server).
	Rename func(from, to string) (handled bool, err error)
	// Lstat, when set, sees every LSTAT first; handled means err (or the
	// node) is the answer.
	Lstat func(p string) (fi os.FileInfo, handled bool, err error)
	// FollowSymlinks makes LSTAT, RENAME and REMOVE follow a symlink in
	// the last component too, as ProFTPD's mod_sftp does: LSTAT reports
	// what a link points to (a dangling link as itself), RENAME and
	// REMOVE act on it. Listings still report each entry's own type.
	// Either way OPEN, OPENDIR and REALPATH follow symlinks, and every
	// request follows them in the components before the last, as any
	// server on a POSIX file system does.
	FollowSymlinks bool
	// FollowInListings makes READDIR report what a symlink points to,
	// as LSTAT does with FollowSymlinks: nothing but REALPATH then tells
	// a link from what it points to.
	FollowInListings bool
	// FollowRenameTarget makes RENAME and posix-rename follow a symlink
	// at the new name: renaming over a link replaces what it points to.
	FollowRenameTarget bool
	// RealPathLexical makes REALPATH of a missing path answer the path
	// itself, cleaned, with no symlink on its way resolved (a server
	// that does not look).
	RealPathLexical bool
	// DropWrites acknowledges every WRITE and stores nothing; FSTAT on
	// the handle then honestly reports what is stored.
	DropWrites bool
	// SwapDir, with SwapTarget, replaces the directory SwapDir by a
	// symlink to SwapTarget (its subtree is dropped) just before the
	// first mutating request (a create, MKDIR, RENAME, REMOVE or
	// SETSTAT) naming a path inside it: a directory swapped after the
	// client looked it up.
	SwapDir, SwapTarget string
	swapped             bool
	// Writable lets OPEN create regular files (following symlinks in the
	// last component unless SSH_FXF_EXCL is given, as open(2) does),
	// WRITE fill them, SETSTAT change their permission bits and
	// posix-rename@openssh.com replace.
	Writable bool
	mu       sync.Mutex
	nodes    map[string]*Node
	log      []string // requests, "METHOD path"
	muts     []string // changes made, "METHOD path" with paths resolved
}

// NewVFS returns a tree holding only "/" and home (and its parents).
func NewVFS(home string) *VFS {
	v := &VFS{Home: path.Clean(home), nodes: map[string]*Node{"/": Dir()}}
	v.Add(v.Home, Dir())
	return v
}

// Add puts n at p, creating missing parent directories. It returns n.
func (v *VFS) Add(p string, n *Node) *Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	p = path.Clean(p)
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := v.nodes[d]; !ok {
			v.nodes[d] = Dir()
		}
	}
	v.nodes[p] = n
	return n
}

// resolve returns the path p names once its symlinks are followed: those
// before the last component always, the last one too with final. A path
// that cannot be resolved (a dangling link, a loop) is returned as far as
// it got.
func (v *VFS) resolve(p string, final bool) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.resolveLocked(path.Clean(p), final, 0)
}

func (v *VFS) resolveLocked(p string, final bool, depth int) string {
	if p == "/" || depth > 40 {
		return p
	}
	parent := v.resolveLocked(path.Dir(p), true, depth+1)
	cur := path.Join(parent, path.Base(p))
	if !final {
		return cur
	}
	n := v.nodes[cur]
	if n == nil || n.Mode&fs.ModeSymlink == 0 || n.Target == "" {
		return cur
	}
	next := v.resolveLocked(path.Clean(n.Target), true, depth+1)
	if _, ok := v.nodes[next]; !ok {
		return cur // dangling: the link itself
	}
	return next
}

// Node returns the node at p, or nil.
func (v *VFS) Node(p string) *Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.nodes[path.Clean(p)]
}

// Paths lists every path in the tree, sorted.
func (v *VFS) Paths() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for p := range v.nodes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Requests returns the requests served so far, each "METHOD path" (RENAME
// as "Rename from -> to").
func (v *VFS) Requests() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.log...)
}

// Touched reports whether any request named p (or, for a rename, had p as
// source or target).
func (v *VFS) Touched(p string) bool {
	for _, r := range v.Requests() {
		_, rest, _ := strings.Cut(r, " ")
		from, to, isRename := strings.Cut(rest, " -> ")
		if rest == p || isRename && (from == p || to == p) {
			return true
		}
	}
	return false
}

func (v *VFS) record(method, p string) {
	v.mu.Lock()
	v.log = append(v.log, method+" "+p)
	v.mu.Unlock()
}

// Mutations returns the changes the tree went through, each "METHOD
// path" (Create, Write, Mkdir, Remove, Setstat; "Rename from -> to"),
// with the paths the server acted on: symlinks it followed resolved. A
// test checks these against where the client may write.
func (v *VFS) Mutations() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.muts...)
}

// mutated records a change; v.mu must be held.
func (v *VFS) mutated(method, p string) {
	v.muts = append(v.muts, method+" "+p)
}

// swap replaces SwapDir by its symlink, once, when p is inside it.
func (v *VFS) swap(p string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p = path.Clean(p)
	if v.SwapDir == "" || v.swapped || !(p == v.SwapDir || strings.HasPrefix(p, v.SwapDir+"/")) {
		return
	}
	v.swapped = true
	for q := range v.nodes {
		if strings.HasPrefix(q, v.SwapDir+"/") {
			delete(v.nodes, q)
		}
	}
	v.nodes[v.SwapDir] = Symlink(v.SwapTarget)
}

// ServeSFTP implements Engine.
func (v *VFS) ServeSFTP(ctx context.Context, rw io.ReadWriteCloser) {
	h := &session{v: v, ctx: ctx}
	rs := sftp.NewRequestServer(rw, sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h})
	rs.Serve()
	rs.Close()
}

// session is the request server's handlers for one SFTP session.
type session struct {
	v   *VFS
	ctx context.Context
}

var (
	_ sftp.FileReader         = (*session)(nil)
	_ sftp.FileWriter         = (*session)(nil)
	_ sftp.FileCmder          = (*session)(nil)
	_ sftp.LstatFileLister    = (*session)(nil)
	_ sftp.RealPathFileLister = (*session)(nil)
)

func (s *session) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	s.v.record("Open", r.Filepath)
	n := s.v.Node(s.v.resolve(r.Filepath, true))
	if n == nil {
		return nil, os.ErrNotExist
	}
	n.opens.Add(1)
	if n.Mode.IsDir() && n.Read == nil {
		return nil, syscall.EISDIR
	}
	return &reader{ctx: s.ctx, n: n}, nil
}

func (s *session) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	v := s.v
	v.record("Write", r.Filepath)
	if !v.Writable {
		return nil, os.ErrPermission
	}
	flags := r.Pflags()
	v.swap(r.Filepath)
	p := v.resolve(r.Filepath, !flags.Excl)
	v.mu.Lock()
	defer v.mu.Unlock()
	n, ok := v.nodes[p]
	switch {
	case ok && flags.Excl:
		return nil, os.ErrExist
	case ok && !n.Mode.IsRegular():
		return nil, syscall.EISDIR
	case !ok && !flags.Creat:
		return nil, os.ErrNotExist
	case !ok:
		if parent, ok := v.nodes[path.Dir(p)]; !ok || !parent.Mode.IsDir() {
			return nil, os.ErrNotExist
		}
		n = &Node{Mode: 0o600, ModTime: time.Now().Truncate(time.Second)}
		v.nodes[p] = n
		v.mutated("Create", p)
	}
	if flags.Trunc {
		n.Data, n.Size = nil, 0
	}
	return &writer{v: v, n: n, p: p}, nil
}

// writer fills a node from WRITE requests.
type writer struct {
	v *VFS
	n *Node
	p string
}

func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	w.v.mu.Lock()
	defer w.v.mu.Unlock()
	w.v.mutated("Write", w.p)
	if w.v.DropWrites {
		return len(p), nil
	}
	if end := off + int64(len(p)); end > int64(len(w.n.Data)) {
		w.n.Data = append(w.n.Data, make([]byte, end-int64(len(w.n.Data)))...)
	}
	copy(w.n.Data[off:], p)
	w.n.Size = int64(len(w.n.Data))
	w.n.ModTime = time.Now().Truncate(time.Second)
	return len(p), nil
}

func (s *session) Filecmd(r *sftp.Request) error {
	v := s.v
	switch r.Method {
	case "Rename", "PosixRename":
		v.record("Rename", r.Filepath+" -> "+r.Target)
		if v.Rename != nil {
			if handled, err := v.Rename(r.Filepath, r.Target); handled {
				return err
			}
		}
		v.swap(r.Filepath)
		to := v.resolve(r.Target, v.FollowRenameTarget)
		if r.Method == "PosixRename" && v.Writable {
			v.mu.Lock()
			if n, ok := v.nodes[to]; ok && !n.Mode.IsDir() {
				delete(v.nodes, to)
			}
			v.mu.Unlock()
		}
		return v.move(v.resolve(r.Filepath, v.FollowSymlinks), to)
	case "Mkdir":
		v.record("Mkdir", r.Filepath)
		v.swap(r.Filepath)
		p := v.resolve(r.Filepath, false)
		v.mu.Lock()
		defer v.mu.Unlock()
		if _, ok := v.nodes[p]; ok {
			return os.ErrExist
		}
		if parent, ok := v.nodes[path.Dir(p)]; !ok || !parent.Mode.IsDir() {
			return os.ErrNotExist
		}
		v.nodes[p] = Dir()
		v.mutated("Mkdir", p)
		return nil
	case "Remove", "Rmdir":
		v.record("Remove", r.Filepath)
		v.swap(r.Filepath)
		p := v.resolve(r.Filepath, v.FollowSymlinks)
		v.mu.Lock()
		defer v.mu.Unlock()
		if _, ok := v.nodes[p]; !ok {
			return os.ErrNotExist
		}
		for q := range v.nodes {
			if strings.HasPrefix(q, p+"/") {
				return syscall.ENOTEMPTY
			}
		}
		delete(v.nodes, p)
		v.mutated("Remove", p)
		return nil
	case "Setstat":
		v.record("Setstat", r.Filepath)
		v.swap(r.Filepath)
		p := v.resolve(r.Filepath, true)
		n := v.Node(p)
		if n == nil {
			return os.ErrNotExist
		}
		if attrs := r.Attributes(); v.Writable && r.AttrFlags().Permissions {
			v.mu.Lock()
			n.Mode = n.Mode.Type() | attrs.FileMode().Perm()
			v.mutated("Setstat", p)
			v.mu.Unlock()
		}
		return nil
	}
	v.record(r.Method, r.Filepath)
	return os.ErrPermission
}

// PosixRename is posix-rename@openssh.com: with Writable it replaces an
// existing file, as rename(2) does; without, it acts as RENAME.
func (s *session) PosixRename(r *sftp.Request) error { return s.Filecmd(r) }

// move renames from to to, with its subtree, refusing to replace.
func (v *VFS) move(from, to string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	from, to = path.Clean(from), path.Clean(to)
	n, ok := v.nodes[from]
	if !ok {
		return os.ErrNotExist
	}
	if _, ok := v.nodes[to]; ok {
		return fmt.Errorf("rename %s: %w", to, os.ErrExist)
	}
	if parent, ok := v.nodes[path.Dir(to)]; !ok || !parent.Mode.IsDir() {
		return os.ErrNotExist
	}
	delete(v.nodes, from)
	v.nodes[to] = n
	v.mutated("Rename", from+" -> "+to)
	for q, c := range v.nodes {
		if rest, ok := strings.CutPrefix(q, from+"/"); ok {
			delete(v.nodes, q)
			v.nodes[to+"/"+rest] = c
		}
	}
	return nil
}

func (s *session) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	v := s.v
	switch r.Method {
	case "List":
		v.record("List", r.Filepath)
		dir := v.resolve(r.Filepath, true)
		n := v.Node(dir)
		if n == nil {
			return nil, os.ErrNotExist
		}
		if !n.Mode.IsDir() {
			return nil, syscall.ENOTDIR
		}
		if n.List != nil {
			return listFunc(n.List), nil
		}
		return listerAt(v.children(dir, n)), nil
	case "Stat": // STAT, and FSTAT on an open handle
		v.record("Fstat", r.Filepath)
		n := v.Node(v.resolve(r.Filepath, true))
		if n == nil {
			return nil, os.ErrNotExist
		}
		fi := n.info(path.Base(r.Filepath))
		if n.Fstat != nil {
			fi.size, fi.mode = n.Fstat(n.served.Load())
		}
		return listerAt{fi}, nil
	}
	v.record(r.Method, r.Filepath)
	return nil, os.ErrPermission
}

func (s *session) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	v := s.v
	v.record("Lstat", r.Filepath)
	if v.Lstat != nil {
		if fi, handled, err := v.Lstat(r.Filepath); handled {
			if err != nil {
				return nil, err
			}
			return listerAt{fi}, nil
		}
	}
	n := v.Node(v.resolve(r.Filepath, v.FollowSymlinks))
	if n == nil {
		return nil, os.ErrNotExist
	}
	return listerAt{n.info(path.Base(r.Filepath))}, nil
}

func (s *session) RealPath(p string) (string, error) {
	if p == "" || p == "." {
		return s.v.Home, nil
	}
	if !path.IsAbs(p) {
		p = path.Join(s.v.Home, p)
	}
	if s.v.RealPathLexical && s.v.Node(s.v.resolve(p, true)) == nil {
		return path.Clean(p), nil
	}
	return s.v.resolve(p, true), nil
}

// children lists a directory: its nodes by name, then its Extra entries.
func (v *VFS) children(dir string, n *Node) []os.FileInfo {
	v.mu.Lock()
	defer v.mu.Unlock()
	dir = path.Clean(dir)
	var out []os.FileInfo
	for p, c := range v.nodes {
		if p != "/" && path.Dir(p) == dir {
			if v.FollowInListings {
				if t := v.nodes[v.resolveLocked(p, true, 0)]; t != nil {
					c = t
				}
			}
			out = append(out, c.info(path.Base(p)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return append(out, n.Extra...)
}

func (n *Node) info(name string) info {
	return info{name: name, mode: n.Mode, size: n.Size, mtime: n.ModTime}
}

// reader serves READs from a node, counting what it serves.
type reader struct {
	ctx context.Context
	n   *Node
}

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	var n int
	var err error
	if r.n.Read != nil {
		n, err = r.n.Read(r.ctx, p, off)
	} else {
		if off >= int64(len(r.n.Data)) {
			return 0, io.EOF
		}
		n = copy(p, r.n.Data[off:])
		if n < len(p) {
			err = io.EOF
		}
	}
	if n > 0 {
		r.n.served.Add(int64(n))
		r.n.reads.Add(1)
	}
	return n, err
}

// info is an os.FileInfo with any name.
type info struct {
	name  string
	mode  fs.FileMode
	size  int64
	mtime time.Time
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.size }
func (i info) Mode() fs.FileMode  { return i.mode }
func (i info) ModTime() time.Time { return i.mtime }
func (i info) IsDir() bool        { return i.mode.IsDir() }
func (i info) Sys() any           { return nil }

// listerAt lists a fixed slice.
type listerAt []os.FileInfo

func (l listerAt) ListAt(dst []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(dst, l[off:])
	if n < len(dst) {
		return n, io.EOF
	}
	return n, nil
}

// listFunc adapts Node.List.
type listFunc func([]os.FileInfo, int64) (int, error)

func (f listFunc) ListAt(dst []os.FileInfo, off int64) (int, error) { return f(dst, off) }
