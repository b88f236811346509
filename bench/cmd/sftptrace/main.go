// Command sftptrace is an SFTP subsystem that logs every request and reply
// it passes on, for naming a client's round trips (bench/waves.py). sshd
// starts it in place of the SFTP server:
//
//	Subsystem sftp /srv/hbench/bin/sftptrace /srv/hbench/trace
//
// It runs OpenSSH's sftp-server as a child, copies both streams unchanged,
// and writes DIR/sftp-<pid>.log: one line a packet, the wall time in
// nanoseconds, ">" for a request (client to server) or "<" for a reply,
// the packet type, its id (0 for INIT and VERSION) and its length.
// bench/run.sh uses it only with SFTP_TRACE=1 (bench/setup.sh): the extra
// process costs CPU that internal-sftp does not.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

const server = "/usr/lib/openssh/sftp-server"

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: sftptrace DIR")
	}
	f, err := os.Create(filepath.Join(os.Args[1], "sftp-"+strconv.Itoa(os.Getpid())+".log"))
	if err != nil {
		log.Fatal(err)
	}
	// Each line is written at once: sshd may kill the subsystem when the
	// client drops the connection, and a buffer would be lost with it.
	var mu sync.Mutex
	note := func(dir string, typ byte, id uint32, n int) {
		mu.Lock()
		fmt.Fprintf(f, "%d %s %d %d %d\n", time.Now().UnixNano(), dir, typ, id, n)
		mu.Unlock()
	}

	cmd := exec.Command(server)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	rep, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		pass(rep, os.Stdout, "<", note)
		close(done)
	}()
	pass(os.Stdin, in, ">", note)
	in.Close()
	<-done
	_ = cmd.Wait()
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// pass copies SFTP packets from r to w, noting each one before it goes on.
func pass(r io.Reader, w io.Writer, dir string, note func(string, byte, uint32, int)) {
	br := bufio.NewReaderSize(r, 256<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		pkt := make([]byte, 4+n)
		copy(pkt, hdr[:])
		if _, err := io.ReadFull(br, pkt[4:]); err != nil {
			return
		}
		var typ byte
		var id uint32
		if n >= 1 {
			typ = pkt[4]
		}
		if n >= 5 && typ != 1 && typ != 2 { // INIT and VERSION carry no id
			id = binary.BigEndian.Uint32(pkt[5:])
		}
		note(dir, typ, id, n)
		if _, err := w.Write(pkt); err != nil {
			return
		}
	}
}
