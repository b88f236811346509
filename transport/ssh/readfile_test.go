package ssh

import (
	"bytes"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-sync/handoff/internal/testkit/sshdtest"
	"github.com/handoff-sync/handoff/transport"
)

// Invariant: a server that answers reads short in the middle of a file
// (the protocol allows it) still has the whole file read, exactly, and
// never sends more than twice its size in all.
func TestReadFileShortRepliesMidFile(t *testing.T) {
	t.Parallel()
	const size = 200 << 10
	content := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), size/32)
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return size, 0o600 },
		read: func(off uint64, n uint32) []byte {
			if off >= size {
				return nil
			}
			end := min(off+uint64(n), size)
			if off%(96<<10) == 0 { // some chunks come back short
				end = min(end, off+1000)
			}
			return content[off:end]
		},
	}
	f := fk.start(t)
	data, fi, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1<<20)
	if err != nil || !bytes.Equal(data, content) || fi.Size != size {
		t.Fatalf("ReadFile: %d bytes (equal %v), %+v, %v", len(data), bytes.Equal(data, content), fi, err)
	}
	if got := fk.served.Load(); got > 2*(size+1) {
		t.Fatalf("the server sent %d bytes of a %d-byte file", got, size)
	}
}

// Invariant: a large file that holds more than its stat says fails with
// ErrChanged, and the server is asked for no more than its size plus one
// byte (the chunks of the size, and the probe after it).
func TestReadFileLongerThanStat(t *testing.T) {
	t.Parallel()
	const size = 300 << 10
	fk := &fakeSFTP{
		attrs: func(byte) (uint64, fs.FileMode) { return size, 0o600 },
		read:  func(_ uint64, n uint32) []byte { return bytes.Repeat([]byte("x"), int(n)) },
	}
	f := fk.start(t)
	data, _, err := f.ReadFile(ctxT(t), "/inbox/a.md", 1<<20)
	if !errors.Is(err, transport.ErrChanged) || data != nil {
		t.Fatalf("ReadFile: %d bytes, %v; want ErrChanged and no data", len(data), err)
	}
	if got := fk.served.Load(); got > size+1 {
		t.Fatalf("served %d bytes for a %d-byte file", got, size)
	}
}

// Invariant: a CLOSE the server never answers blocks neither ReadFile nor
// Close, and no closing goroutine outlives Close.
func TestReadFileUnansweredClose(t *testing.T) {
	t.Parallel()
	srv := sshdtest.StartEmbedded(t, sshdtest.Options{
		Stall: func(typ byte) bool { return typ == sshdtest.PacketClose },
	})
	f := dialT(t, configFor(srv))
	name := filepath.Join(t.TempDir(), "a.md")
	if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server stalls from this ReadFile's CLOSE on.
	if data, _, err := f.ReadFile(ctxT(t), name, 100); err != nil || string(data) != "hello" {
		t.Fatalf("ReadFile: %q, %v", data, err)
	}
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting for an unanswered CLOSE after 5s")
	}
	if n := len(f.closeSem); n != 0 {
		t.Fatalf("%d CLOSEs still in flight after Close returned", n)
	}
}

// Invariant: unanswered CLOSEs do not pile up: once the bound on CLOSEs
// in flight is reached, a ReadFile waits for its own.
func TestReadFileCloseBound(t *testing.T) {
	t.Parallel()
	r := &relay{readGate: time.Millisecond, holdCloses: true}
	f := startRelayed(t, r, pkgSFTPServer)
	f.closeSem = make(chan struct{}, 2) // before any call: a bound of two
	name := filepath.Join(t.TempDir(), "a.md")
	if err := os.WriteFile(name, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := f.ReadFile(ctxT(t), name, 100); err != nil {
			t.Fatal(err)
		}
	}
	third := make(chan error, 1)
	go func() {
		_, _, err := f.ReadFile(ctxT(t), name, 100)
		third <- err
	}()
	if unanswered := r.sentOf(t, reqClose, 3); unanswered != 3 {
		t.Fatalf("%d of 3 CLOSEs unanswered, want all: the relay holds them", unanswered)
	}
	select {
	case err := <-third:
		t.Fatalf("a third ReadFile returned (%v) with two CLOSEs in flight already and its own unanswered", err)
	case <-time.After(200 * time.Millisecond):
	}
	r.releaseCloses()
	if err := <-third; err != nil {
		t.Fatalf("third ReadFile: %v", err)
	}
}

// Invariant: with concurrent reads on, pkg/sftp sizes the work of
// File.Read, File.WriteTo and File.ReadFrom (and of io.Copy, io.ReadAll …
// given a File) from what the server claims. This package only calls
// File.ReadAt, into buffers it sized itself, Stat, Close and Name (and,
// to publish a mirror, WriteAt, Sync and Chmod, none of which read), and
// never hands a File to anything that takes an interface (but
// reflect.ValueOf, with which fileHandle reads the handle field).
func TestNoServerSizedReads(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check("sshfs", fset, files, info); err != nil {
		t.Fatal(err)
	}
	isFile := func(typ types.Type) bool {
		p, ok := typ.(*types.Pointer)
		if !ok {
			return false
		}
		n, ok := p.Elem().(*types.Named)
		return ok && n.Obj().Name() == "File" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/pkg/sftp"
	}
	allowed := map[string]bool{"ReadAt": true, "Stat": true, "Close": true, "Name": true, "WriteAt": true, "Sync": true, "Chmod": true}
	calls := 0
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				if s := info.Selections[sel]; s != nil && isFile(s.Recv()) {
					calls++
					if !allowed[sel.Sel.Name] {
						t.Errorf("%s: File.%s: with concurrent reads pkg/sftp may size it from the server's stat", fset.Position(call.Pos()), sel.Sel.Name)
					}
				}
			}
			sig, ok := info.Types[call.Fun].Type.(*types.Signature)
			if !ok {
				return true
			}
			if isReflectValueOf(info, call) {
				// fileHandle looks up the handle field; a reflect.Value
				// calls no method of the File unless asked to.
				return true
			}
			for i, arg := range call.Args {
				if !isFile(info.Types[arg].Type) || i >= sig.Params().Len() {
					continue
				}
				if types.IsInterface(sig.Params().At(i).Type()) {
					t.Errorf("%s: a File passed as %s", fset.Position(arg.Pos()), sig.Params().At(i).Type())
				}
			}
			return true
		})
	}
	if calls == 0 {
		t.Fatal("no File method calls found: the check is looking at the wrong thing")
	}
}

// isReflectValueOf reports whether call is reflect.ValueOf(...).
func isReflectValueOf(info *types.Info, call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	return ok && fn.Pkg() != nil && fn.Pkg().Path() == "reflect" && fn.Name() == "ValueOf"
}
