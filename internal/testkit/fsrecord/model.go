package fsrecord

import (
	"bytes"
	"path"
	"sort"
	"strings"
)

// Model is a forgetful file system: it replays Ops and can say, after any
// prefix of them, what a reader would find after a power cut right there.
//
// Paths the trace never created are taken to exist already, durably, with
// unknown content unless Seed gave it.
type Model struct {
	// NewDirsDurable makes a directory created by mkdirat durable in its
	// parent at once, as if the parent had been fsynced (what ext4 and XFS
	// journals happen to give). Off, a new directory (and so everything
	// in it) survives only once its parent directory is fsynced.
	NewDirsDurable bool

	root   *inode
	nextID int
}

type inode struct {
	id       int
	dir      bool
	data     []byte // volatile content (files)
	known    bool   // data is known (written in the trace or seeded)
	dur      []byte // durable content
	durKnown bool
	ents     map[string]*inode // volatile entries (directories)
	durEnts  map[string]*inode // durable entries
	gone     map[string]bool   // names removed in the trace: never assumed to pre-exist
	fresh    bool              // created in the trace: holds only names the trace made
}

// NewModel returns an empty model.
func NewModel() *Model {
	m := &Model{}
	m.root = m.newInode(true)
	return m
}

func (m *Model) newInode(dir bool) *inode {
	m.nextID++
	n := &inode{id: m.nextID, dir: dir, known: true, durKnown: true}
	if dir {
		n.ents, n.durEnts, n.gone = map[string]*inode{}, map[string]*inode{}, map[string]bool{}
	}
	return n
}

func split(p string) []string {
	p = path.Clean(p)
	if p == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// lookup walks volatile entries, taking untouched names to pre-exist
// durably. It returns nil for a name the trace removed.
func (m *Model) lookup(p string, wantDir bool) *inode {
	n := m.root
	parts := split(p)
	for i, c := range parts {
		if !n.dir {
			return nil
		}
		next, ok := n.ents[c]
		if !ok {
			if n.gone[c] || n.fresh {
				return nil
			}
			next = m.newInode(i < len(parts)-1 || wantDir)
			next.known, next.durKnown = false, false
			n.ents[c], n.durEnts[c] = next, next
		}
		n = next
	}
	return n
}

func (m *Model) parent(p string) (*inode, string) {
	d := m.lookup(path.Dir(path.Clean(p)), true)
	return d, path.Base(p)
}

// Seed declares the content a file had before the trace began.
func (m *Model) Seed(p string, data []byte) {
	n := m.lookup(p, false)
	if n == nil {
		return
	}
	n.data, n.known = append([]byte(nil), data...), true
	n.dur, n.durKnown = append([]byte(nil), data...), true
}

// Apply replays one op. Failed calls change nothing.
func (m *Model) Apply(o Op) {
	if o.Ret < 0 {
		return
	}
	switch o.Call {
	case "openat":
		if strings.Contains(o.Flags, "O_CREAT") {
			d, name := m.parent(o.Path)
			if d == nil || !d.dir {
				return
			}
			n, ok := d.ents[name]
			if !ok {
				n = m.newInode(false)
				n.dur, n.durKnown = nil, true // a crash may leave it empty
				d.ents[name] = n
				delete(d.gone, name)
			}
			if strings.Contains(o.Flags, "O_TRUNC") {
				n.data, n.known = nil, true
			}
			return
		}
		if strings.Contains(o.Flags, "O_TRUNC") {
			if n := m.lookup(o.Path, false); n != nil {
				n.data, n.known = nil, true
			}
		}
	case "write", "pwrite64":
		n := m.lookup(o.Path, false)
		if n == nil || n.dir {
			return
		}
		if o.Cut {
			n.known = false
			return
		}
		off := int64(len(n.data))
		if o.Call == "pwrite64" {
			off = o.Off
		}
		if need := off + int64(len(o.Data)); need > int64(len(n.data)) {
			n.data = append(n.data, make([]byte, need-int64(len(n.data)))...)
		}
		copy(n.data[off:], o.Data)
	case "fsync", "fdatasync":
		n := m.lookup(o.Path, false)
		if n == nil {
			return
		}
		if n.dir {
			n.durEnts = make(map[string]*inode, len(n.ents))
			for k, v := range n.ents {
				n.durEnts[k] = v
			}
			return
		}
		n.dur, n.durKnown = append([]byte(nil), n.data...), n.known
	case "rename", "renameat", "renameat2":
		sd, sname := m.parent(o.Path)
		dd, dname := m.parent(o.Path2)
		if sd == nil || dd == nil {
			return
		}
		n := m.lookup(o.Path, false)
		if n == nil {
			return
		}
		delete(sd.ents, sname)
		sd.gone[sname] = true
		dd.ents[dname] = n
		delete(dd.gone, dname)
	case "linkat":
		dd, dname := m.parent(o.Path2)
		n := m.lookup(o.Path, false)
		if dd == nil || n == nil {
			return
		}
		dd.ents[dname] = n
		delete(dd.gone, dname)
	case "unlink", "unlinkat":
		d, name := m.parent(o.Path)
		if d == nil {
			return
		}
		m.lookup(o.Path, false) // an untouched name pre-existed durably
		delete(d.ents, name)
		d.gone[name] = true
	case "mkdirat":
		d, name := m.parent(o.Path)
		if d == nil {
			return
		}
		n := m.newInode(true)
		n.fresh = true
		d.ents[name] = n
		delete(d.gone, name)
		if m.NewDirsDurable {
			d.durEnts[name] = n
		}
	}
}

// Durable returns what a reader would find at p after a power cut now:
// exists is false when the name would be gone; known is false when the
// content predates the trace and was not seeded.
func (m *Model) Durable(p string) (data []byte, exists, known bool) {
	n := m.root
	for _, c := range split(p) {
		if !n.dir {
			return nil, false, true
		}
		next, ok := n.durEnts[c]
		if !ok {
			if _, seen := n.ents[c]; !seen && !n.gone[c] && !n.fresh {
				return nil, false, false // never touched: state unknown
			}
			return nil, false, true
		}
		n = next
	}
	if n.dir {
		return nil, true, true
	}
	return n.dur, true, n.durKnown
}

// Volatile returns what a running process sees at p now.
func (m *Model) Volatile(p string) (data []byte, exists, known bool) {
	n := m.root
	for _, c := range split(p) {
		if !n.dir {
			return nil, false, true
		}
		next, ok := n.ents[c]
		if !ok {
			return nil, false, !n.gone[c]
		}
		n = next
	}
	return n.data, true, n.known
}

// AtRisk lists the paths under prefix whose volatile state differs from
// what would survive a power cut now: files whose content or name is not
// yet durable, names whose removal is not yet durable. Sorted.
func (m *Model) AtRisk(prefix string) []string {
	var out []string
	var walk func(vol, dur *inode, p string)
	walk = func(vol, dur *inode, p string) {
		if vol == nil || !vol.dir {
			return
		}
		for name, v := range vol.ents {
			q := path.Join(p, name)
			if !strings.HasPrefix(q, prefix) && !strings.HasPrefix(prefix, q) {
				continue
			}
			var d *inode
			if dur != nil {
				d = dur.durEnts[name]
			}
			switch {
			case d != v:
				if strings.HasPrefix(q, prefix) {
					out = append(out, q+" (name)")
				}
			case !v.dir && v.known && (!v.durKnown || !bytes.Equal(v.data, v.dur)):
				if strings.HasPrefix(q, prefix) {
					out = append(out, q+" (data)")
				}
			}
			if v.dir {
				if d != v {
					d = nil
				}
				walk(v, d, q)
			}
		}
		if dur != nil {
			for name := range dur.durEnts {
				q := path.Join(p, name)
				if _, ok := vol.ents[name]; !ok && strings.HasPrefix(q, prefix) {
					out = append(out, q+" (removal)")
				}
			}
		}
	}
	walk(m.root, m.root, "/")
	sort.Strings(out)
	return out
}
