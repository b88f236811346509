package ssh

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
)

// errNoSubsystem is the server's "no" to the sftp subsystem request.
var errNoSubsystem = errors.New(`the server refused the "sftp" subsystem (hint: is "Subsystem sftp" set in its sshd_config?)`)

// sendWatch is the connection under the last hop's SSH client. It tells
// startSFTP when a packet has gone out, so that SFTP's INIT can follow the
// subsystem request without waiting for the server's reply to it.
type sendWatch struct {
	net.Conn
	next atomic.Pointer[chan struct{}]
}

// arm returns a channel that is closed once the next Write has returned.
func (c *sendWatch) arm() <-chan struct{} {
	ch := make(chan struct{})
	c.next.Store(&ch)
	return ch
}

func (c *sendWatch) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.next.Load() != nil {
		if p := c.next.Swap(nil); p != nil {
			close(*p)
		}
	}
	return n, err
}

// channelWriter is a session channel's stdin: Close sends EOF, as
// ssh.Session's StdinPipe does, and leaves the channel to the client.
type channelWriter struct{ ssh.Channel }

func (w channelWriter) Close() error { return w.CloseWrite() }

// startSFTP opens a session, asks for the "sftp" subsystem (never a shell
// command) and starts pkg/sftp on it with the list guard in between.
//
// The subsystem request and SFTP's INIT share a round trip: the request is
// sent, with a reply wanted, and INIT follows as soon as the request is on
// the wire (sent tells when), before the reply. The server reads them in
// order, so INIT reaches the subsystem; a refusal still fails the start,
// with its own error. sent may be nil (no watch): then INIT waits for the
// reply.
func startSFTP(client *ssh.Client, jumps []*ssh.Client, sent *sendWatch, cfg Config, log *slog.Logger) (*FS, error) {
	ch, reqs, err := client.OpenChannel("session", nil)
	if err != nil {
		return nil, err
	}
	go ssh.DiscardRequests(reqs)
	go io.Copy(io.Discard, ch.Stderr())

	var wrote <-chan struct{}
	if sent != nil {
		wrote = sent.arm()
	}
	replied := make(chan error, 1)
	go func() {
		ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(&struct{ Name string }{"sftp"}))
		if err == nil && !ok {
			err = errNoSubsystem
		}
		replied <- err
	}()
	select {
	case <-wrote: // never, without a watch
	case err := <-replied:
		if err != nil {
			ch.Close()
			return nil, err
		}
		replied = nil
	}

	closers := []io.Closer{client}
	for i := len(jumps) - 1; i >= 0; i-- {
		closers = append(closers, jumps[i])
	}
	type started struct {
		f   *FS
		err error
	}
	fsDone := make(chan started, 1)
	go func() {
		f, err := newFS(ch, channelWriter{ch}, cfg, log, isOpenSSH(string(client.ServerVersion())), closers...)
		fsDone <- started{f, err}
	}()
	// The reply comes before the VERSION: the server answers the request
	// before its subsystem reads INIT.
	if replied != nil {
		if err := <-replied; err != nil {
			ch.Close() // newFS would wait for a VERSION that never comes
			if st := <-fsDone; st.f != nil {
				st.f.sftp.Close()
			}
			return nil, err
		}
	}
	st := <-fsDone
	if st.err != nil {
		return nil, st.err
	}
	f := st.f
	f.client = client
	f.openSSH = isOpenSSH(string(client.ServerVersion())) && isOpenSSHSFTP(f.sftp)
	return f, nil
}
