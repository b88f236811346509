// Command sftpcount sits between sshd and an SFTP server as its Subsystem
// command and counts the server's open handles exactly.
//
//	sftpcount -stats DIR -- /usr/libexec/gesftpserver [ARGS...]
//
// It starts the server with pipes for its stdin and stdout, copies the
// SFTP stream both ways unchanged, and parses each packet on the way: an
// OPEN or OPENDIR request whose answer is a HANDLE opens that handle, a
// CLOSE request whose answer is STATUS OK closes it. After every change,
// and before the answer that caused it is passed on to the client, it
// writes DIR/<pid>.stats (one "key value" line each: peak, current, opens,
// closes, failed_opens, failed_closes), so that a client that has seen a
// handle can rely on the file counting it. sshdtest's Server.Handles reads
// those files.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// SFTP packet types (draft-ietf-secsh-filexfer-02, version 3).
const (
	fxpOpen    = 3
	fxpClose   = 4
	fxpOpendir = 11
	fxpStatus  = 101
	fxpHandle  = 102
)

// maxPacket bounds a packet's length, far above what any client or server
// sends (pkg/sftp and OpenSSH stay near 256 KiB).
const maxPacket = 4 << 20

func main() {
	statsDir := flag.String("stats", "", "directory for the <pid>.stats file")
	flag.Parse()
	if *statsDir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: sftpcount -stats DIR -- SERVER [ARGS...]")
		os.Exit(2)
	}
	os.Exit(run(*statsDir, flag.Args()))
}

// logw gets the server's stderr and sftpcount's own complaints: the
// session's stderr (sshd passes it to the client, which may drop it) and
// DIR/<pid>.log, which the test shows when it fails.
var logw io.Writer = os.Stderr

// counter is the handle bookkeeping shared by both directions.
type counter struct {
	mu            sync.Mutex
	path          string
	pendingOpen   map[uint32]bool   // request id -> an OPEN/OPENDIR awaits its answer
	pendingClose  map[uint32]string // request id -> the handle a CLOSE names
	open          map[string]bool
	peak          int
	opens, closes int
	failedOpens   int
	failedCloses  int
	err           error // the first stats write that failed
}

func run(statsDir string, server []string) int {
	c := &counter{
		path:         filepath.Join(statsDir, fmt.Sprintf("%d.stats", os.Getpid())),
		pendingOpen:  map[uint32]bool{},
		pendingClose: map[uint32]string{},
		open:         map[string]bool{},
	}
	if f, err := os.Create(filepath.Join(statsDir, fmt.Sprintf("%d.log", os.Getpid()))); err == nil {
		defer f.Close()
		logw = io.MultiWriter(f, os.Stderr)
	}
	c.mu.Lock()
	c.write()
	c.mu.Unlock()

	cmd := exec.Command(server[0], server[1:]...)
	cmd.Stderr = logw
	toServer, err := cmd.StdinPipe()
	if err != nil {
		fmt.Fprintln(logw, "sftpcount:", err)
		return 1
	}
	fromServer, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(logw, "sftpcount:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(logw, "sftpcount:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() {
		err := pump(os.Stdin, toServer, c.request)
		toServer.Close() // the client is gone: let the server see EOF
		done <- err
	}()
	errOut := pump(fromServer, os.Stdout, c.answer)
	os.Stdout.Close()
	waitErr := cmd.Wait()
	select {
	case errIn := <-done:
		if errIn != nil {
			fmt.Fprintln(logw, "sftpcount: client side:", errIn)
		}
	default:
		// The client still holds its end open; the server has gone.
	}
	if errOut != nil {
		fmt.Fprintln(logw, "sftpcount: server side:", errOut)
	}
	c.mu.Lock()
	c.write()
	err = c.err
	c.mu.Unlock()
	if err != nil {
		fmt.Fprintln(logw, "sftpcount: writing stats:", err)
		return 1
	}
	if waitErr != nil {
		fmt.Fprintln(logw, "sftpcount: server:", waitErr)
		return 1
	}
	return 0
}

// pump copies whole packets from r to w, showing each to see first. It
// returns nil at a clean EOF between packets.
func pump(r io.Reader, w io.Writer, see func(typ byte, body []byte)) error {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 || n > maxPacket {
			return fmt.Errorf("packet length %d", n)
		}
		pkt := make([]byte, 4+n)
		copy(pkt, hdr[:])
		if _, err := io.ReadFull(r, pkt[4:]); err != nil {
			return err
		}
		see(pkt[4], pkt[5:])
		if _, err := w.Write(pkt); err != nil {
			return err
		}
	}
}

// request notes the OPEN, OPENDIR and CLOSE requests on their way to the
// server.
func (c *counter) request(typ byte, body []byte) {
	if typ != fxpOpen && typ != fxpOpendir && typ != fxpClose {
		return
	}
	id, rest, ok := u32(body)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch typ {
	case fxpOpen, fxpOpendir:
		c.pendingOpen[id] = true
	case fxpClose:
		if h, _, ok := str(rest); ok {
			c.pendingClose[id] = h
		}
	}
}

// answer settles the pending requests that a HANDLE or STATUS answers.
func (c *counter) answer(typ byte, body []byte) {
	if typ != fxpHandle && typ != fxpStatus {
		return
	}
	id, rest, ok := u32(body)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	if c.pendingOpen[id] {
		delete(c.pendingOpen, id)
		changed = true
		if h, _, ok := str(rest); typ == fxpHandle && ok {
			c.open[h] = true
			c.opens++
			c.peak = max(c.peak, len(c.open))
		} else {
			c.failedOpens++
		}
	}
	if h, ok := c.pendingClose[id]; ok {
		delete(c.pendingClose, id)
		changed = true
		if code, _, ok := u32(rest); typ == fxpStatus && ok && code == 0 {
			delete(c.open, h)
			c.closes++
		} else {
			c.failedCloses++
		}
	}
	if changed {
		c.write()
	}
}

// write replaces the stats file; the caller holds c.mu.
func (c *counter) write() {
	s := fmt.Sprintf("peak %d\ncurrent %d\nopens %d\ncloses %d\nfailed_opens %d\nfailed_closes %d\n",
		c.peak, len(c.open), c.opens, c.closes, c.failedOpens, c.failedCloses)
	tmp := c.path + ".tmp"
	err := os.WriteFile(tmp, []byte(s), 0o644)
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil && c.err == nil {
		c.err = err
	}
}

func u32(b []byte) (uint32, []byte, bool) {
	if len(b) < 4 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint32(b), b[4:], true
}

func str(b []byte) (string, []byte, bool) {
	n, rest, ok := u32(b)
	if !ok || uint64(n) > uint64(len(rest)) {
		return "", nil, false
	}
	return string(rest[:n]), rest[n:], true
}
