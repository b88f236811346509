package ssh

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/handoff-sync/handoff/internal/testkit/hostile"
)

// wireCount sits on the SFTP stream between an FS and a server and counts
// the handles the server holds, from the wire alone: a HANDLE reply to an
// OPEN or OPENDIR opens one, the server's own answer to its CLOSE ends it.
type wireCount struct {
	mu      sync.Mutex
	opening map[uint32]bool // OPEN/OPENDIR ids awaiting their reply
	closing map[uint32]bool // CLOSE ids awaiting the server's reply
	open    int
	peak    int
}

func (w *wireCount) requests(from io.Reader, to io.WriteCloser) {
	defer to.Close()
	for {
		frame, err := readSFTPFrame(from)
		if err != nil {
			return
		}
		if typ := frame[4]; typ == fxpOpendir || typ == 3 || typ == fxpClose {
			id := binary.BigEndian.Uint32(frame[5:9])
			w.mu.Lock()
			if typ == fxpClose {
				w.closing[id] = true
			} else {
				w.opening[id] = true
			}
			w.mu.Unlock()
		}
		if _, err := to.Write(frame); err != nil {
			return
		}
	}
}

func (w *wireCount) replies(from io.Reader, to io.WriteCloser) {
	defer to.Close()
	for {
		frame, err := readSFTPFrame(from)
		if err != nil {
			return
		}
		if frame[4] != 2 { // VERSION has no id
			id := binary.BigEndian.Uint32(frame[5:9])
			w.mu.Lock()
			switch {
			case w.opening[id]:
				delete(w.opening, id)
				if frame[4] == fxpHandle {
					w.open++
					w.peak = max(w.peak, w.open)
				}
			case w.closing[id]:
				delete(w.closing, id)
				w.open--
			}
			w.mu.Unlock()
		}
		if _, err := to.Write(frame); err != nil {
			return
		}
	}
}

func (w *wireCount) stats() (open, peak int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open, w.peak
}

// startCounted starts serve and an FS on an SFTP stream that w counts.
func startCounted(t *testing.T, serve func(t *testing.T, in io.Reader, out io.WriteCloser)) (*FS, *wireCount) {
	t.Helper()
	w := &wireCount{opening: map[uint32]bool{}, closing: map[uint32]bool{}}
	fsR, relayW := io.Pipe()
	relayR, fsW := io.Pipe()
	srvR, toSrv := io.Pipe()
	fromSrv, srvW := io.Pipe()
	go serve(t, srvR, srvW)
	go w.requests(relayR, toSrv)
	go w.replies(fromSrv, relayW)
	f, err := newFS(fsR, fsW, Config{Alias: "counted"}, slog.New(slog.DiscardHandler), false, closerFunc(func() error {
		fsR.Close()
		relayR.Close()
		toSrv.Close()
		fromSrv.Close()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, w
}

// greenEndServer serves the real file system with the Green End SFTP
// server (Debian's gesftpserver), which keeps at most 128 handles open.
func greenEndServer(t *testing.T) func(t *testing.T, in io.Reader, out io.WriteCloser) {
	return execServer(t, "/usr/libexec/gesftpserver", "gesftpserver")
}

// rawServer serves r over the stream.
func rawServer(r *hostile.Raw) func(t *testing.T, in io.Reader, out io.WriteCloser) {
	return func(t *testing.T, in io.Reader, out io.WriteCloser) {
		r.ServeSFTP(context.Background(), struct {
			io.Reader
			io.WriteCloser
		}{in, out})
		out.Close()
	}
}

// handleTree writes files files and dirs directories (each holding one
// file) under a new directory, and returns it.
func handleTree(t *testing.T, files, dirs int) string {
	t.Helper()
	root := t.TempDir()
	for i := range files {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%03d.md", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range dirs {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "x.md"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readAll reads every file and lists every directory of handleTree at
// once, each call in its own goroutine, and checks what came back.
func readAll(t *testing.T, f *FS, root string, files, dirs int) {
	t.Helper()
	var g errgroup.Group
	for i := range files {
		g.Go(func() error {
			name := fmt.Sprintf("%s/f%03d.md", root, i)
			data, _, err := f.ReadFile(context.Background(), name, 1<<20)
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("file %d\n", i); string(data) != want {
				return fmt.Errorf("%s: read %q, want %q", name, data, want)
			}
			return nil
		})
	}
	for i := range dirs {
		g.Go(func() error {
			name := fmt.Sprintf("%s/d%03d", root, i)
			ents, err := f.ReadDir(context.Background(), name, 100)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if e.Name == "x.md" {
					return nil
				}
			}
			return fmt.Errorf("%s: listing without x.md: %v", name, ents)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A server that keeps at most 128 handles and says nothing of its limit
// serves 300 reads and 200 listings called at once: the session never
// holds more handles than the default bound, so none fails and the host
// is not lost.
func TestHandlesBoundedGreenEnd(t *testing.T) {
	f, w := startCounted(t, greenEndServer(t))
	root := handleTree(t, 300, 200)
	readAll(t, f, root, 300, 200)
	if limit, _ := f.handles.stats(); limit != defaultHandles {
		t.Errorf("bound %d, want the default %d (the server offers no limits@openssh.com)", limit, defaultHandles)
	}
	_, peak := w.stats()
	if peak > defaultHandles || peak > 128 {
		t.Errorf("the server held %d handles at once; want at most %d (its own limit is 128)", peak, defaultHandles)
	}
	if peak < defaultHandles/2 {
		t.Errorf("the server held at most %d handles at once: the calls did not run concurrently", peak)
	}
}

// OpenSSH's sftp-server says its limit (limits@openssh.com): the bound
// rises to it, capped at maxHandles, and the wire never sees more.
func TestHandlesLimitsOpenSSH(t *testing.T) {
	f, w := startCounted(t, openSSHServer(t))
	for f.guard.asking() {
		f.Lstat(context.Background(), "/")
	}
	limit, _ := f.handles.stats()
	if limit <= defaultHandles || limit > maxHandles {
		t.Fatalf("bound %d after limits@openssh.com; want above %d and at most %d", limit, defaultHandles, maxHandles)
	}
	root := handleTree(t, 700, 100)
	readAll(t, f, root, 700, 100)
	if _, peak := w.stats(); peak > limit {
		t.Errorf("the server held %d handles at once, over the bound %d", peak, limit)
	}
}

// A server that hands out handles it does not know past 20 (as Green End's
// does past 128): each read that gets one fails its FSTAT, the bound comes
// down, and the read is tried again. Every file is read with its own bytes
// and every directory listed; none is lost to the server's limit.
func TestHandlesBackpressure(t *testing.T) {
	const files, dirs = 200, 40
	r := &hostile.Raw{Home: "/home/u", Files: map[string]string{}, MaxHandles: 20}
	for i := range files {
		r.Files[fmt.Sprintf("/home/u/f%03d.md", i)] = fmt.Sprintf("file %d\n", i)
	}
	for i := range dirs {
		r.Files[fmt.Sprintf("/home/u/d%03d/x.md", i)] = "x"
	}
	f, _ := startCounted(t, rawServer(r))
	readAll(t, f, "/home/u", files, dirs)
	limit, _ := f.handles.stats()
	if limit > 20 {
		t.Errorf("bound %d after the server ran out at 20", limit)
	}
	if _, phantoms := r.Peak(); phantoms == 0 {
		t.Errorf("the server never ran out of handles: the test proves nothing")
	}
	// Once lowered, a limits@openssh.com answer does not raise it again.
	f.handles.setLimit(500)
	if l, _ := f.handles.stats(); l != limit {
		t.Errorf("bound %d after a late limits answer; want it kept at %d", l, limit)
	}
}

// One file whose OPEN fails while few handles are open is that file's
// error, not taken for the server running out: the bound stays.
func TestHandlesOneFailureIsNotExhaustion(t *testing.T) {
	r := &hostile.Raw{Home: "/home/u", Files: map[string]string{"/home/u/bad.md": "x", "/home/u/good.md": "y"}}
	r.Hook = func(req hostile.Request) []byte {
		if req.Type == hostile.FxpOpen && req.Path == "/home/u/bad.md" {
			return hostile.Frame(hostile.Status(req.ID, hostile.FxFailure, "input/output error"))
		}
		return nil
	}
	f, _ := startCounted(t, rawServer(r))
	if _, _, err := f.ReadFile(context.Background(), "/home/u/bad.md", 100); err == nil || !bytes.Contains([]byte(err.Error()), []byte("input/output error")) {
		t.Fatalf("ReadFile bad.md: %v; want the server's failure", err)
	}
	if data, _, err := f.ReadFile(context.Background(), "/home/u/good.md", 100); err != nil || string(data) != "y" {
		t.Fatalf("ReadFile good.md after a failed one: %q, %v", data, err)
	}
	if limit, _ := f.handles.stats(); limit != defaultHandles {
		t.Errorf("bound %d after one failed OPEN; want %d", limit, defaultHandles)
	}
}

// OpenSSH's sftp-server run with few descriptors (prlimit --nofile=48:
// it allows about 40 handles, below the default bound) serves 300 reads
// and 200 listings called the moment the session starts, before its
// limits@openssh.com answer can have come: the opens past its limit fail,
// the bound comes down below it and they are tried again. Invariant: a
// server with few handles loses no read and no listing to the bound the
// session starts with.
func TestHandlesFewDescriptorsOpenSSH(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) not found: %v", err)
	}
	bin := "/usr/lib/openssh/sftp-server"
	execServer(t, bin, "openssh-sftp-server") // skips or fails without it
	serve := func(t *testing.T, in io.Reader, out io.WriteCloser) {
		cmd := exec.Command(prlimit, "--nofile=48:48", bin)
		cmd.Stdin, cmd.Stdout = in, out
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		cmd.Wait()
		out.Close()
	}
	// Every reply 50 ms late: the burst is out long before the limits
	// answer is in.
	f := startRelayedAsking(t, &relay{rtt: 50 * time.Millisecond, readGate: time.Millisecond}, serve)
	if limit, _ := f.handles.stats(); limit != defaultHandles {
		t.Fatalf("bound %d before the limits answer, want the default %d", limit, defaultHandles)
	}
	root := handleTree(t, 300, 200)
	readAll(t, f, root, 300, 200)
	limit, _ := f.handles.stats()
	if limit > 48 {
		t.Errorf("bound %d after the server ran out, want below its 48 descriptors", limit)
	}
	t.Logf("bound %d at the end", limit)
}

// limitsServer is a scripted SFTP server that answers INIT only once a
// second frame has come or a while has passed, and then answers that
// frame if it is the guard's limits request: with a max-open-handles of
// 300 if supported, else with OP_UNSUPPORTED. early reports whether the
// request came before the VERSION was sent.
func limitsServer(t *testing.T, c net.Conn, supported bool, early chan<- bool) {
	defer c.Close()
	frame := func() ([]byte, error) {
		var lb [4]byte
		if _, err := io.ReadFull(c, lb[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(lb[:]))
		_, err := io.ReadFull(c, body)
		return body, err
	}
	send := func(body []byte) { c.Write(append(u32(nil, uint32(len(body))), body...)) }
	if init, err := frame(); err != nil || init[0] != 1 {
		t.Errorf("first frame %v, %v: want INIT", init, err)
		return
	}
	next := make(chan []byte, 1)
	go func() {
		b, _ := frame()
		next <- b
	}()
	version := u32([]byte{2}, 3)
	if supported {
		version = str(str(version, "limits@openssh.com"), "1")
	}
	var req []byte
	select {
	case req = <-next:
		early <- true
		send(version)
	case <-time.After(5 * time.Second):
		early <- false
		send(version)
		req = <-next
	}
	if len(req) < 5 || req[0] != 200 || binary.BigEndian.Uint32(req[1:5]) != limitsID {
		t.Errorf("second frame %x: want the limits request", req)
		return
	}
	if !supported {
		send(status(limitsID, 8))
	} else {
		reply := u32([]byte{201}, limitsID)
		for _, v := range []uint64{1 << 18, 1 << 15, 1 << 15, 300} {
			reply = binary.BigEndian.AppendUint64(reply, v)
		}
		send(reply)
	}
	for { // LSTATs: a directory
		body, err := frame()
		if err != nil {
			return
		}
		send(attrs(u32([]byte{105}, binary.BigEndian.Uint32(body[1:5])), 0, fs.ModeDir|0o755))
	}
}

// Behind an OpenSSH banner the limits request goes out with INIT: the
// server here sends its VERSION only once a second frame has come, which
// a client that waits for the VERSION first never sends. The bound is
// then the server's before any listing starts; a server without the
// extension answers with an error, which pkg/sftp never sees, and the
// bound stays the default. Saves the round trip in which the first wave
// of listings was bounded to 64.
func TestLimitsAskedWithInit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		supported bool
		want      int
	}{{true, 300}, {false, defaultHandles}} {
		t.Run(fmt.Sprintf("supported=%v", tc.supported), func(t *testing.T) {
			t.Parallel()
			client, server := net.Pipe()
			early := make(chan bool, 1)
			go limitsServer(t, server, tc.supported, early)
			f, err := newFS(client, client, Config{Alias: "limits"}, slog.New(slog.DiscardHandler), true, client)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if !<-early {
				t.Fatal("the limits request waited for the VERSION")
			}
			for deadline := time.Now().Add(5 * time.Second); f.guard.asking() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if limit, _ := f.handles.stats(); limit != tc.want {
				t.Errorf("bound %d, want %d", limit, tc.want)
			}
			if _, err := f.Lstat(ctxT(t), "/x"); err != nil {
				t.Errorf("Lstat after the limits answer: %v", err)
			}
		})
	}
}
