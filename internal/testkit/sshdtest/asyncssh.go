package sshdtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// asyncsshServer is the AsyncSSH server StartAsyncSSH runs: SFTP on the
// real file system (sftp_factory=True), no shell, no forwarding, keys
// from the files named on its command line. It prints its port once it
// listens and exits when its stdin closes (the test has ended or died).
const asyncsshServer = `import warnings
warnings.simplefilter("ignore")

import asyncio
import os
import sys
import threading

import asyncssh


def exit_on_stdin_eof():
    sys.stdin.buffer.read()
    os._exit(0)


async def main():
    host_keys, authorized = sys.argv[1].split(","), sys.argv[2]
    server = await asyncssh.listen(
        "127.0.0.1", 0,
        server_host_keys=host_keys,
        authorized_client_keys=authorized,
        sftp_factory=True,
        allow_scp=False,
        agent_forwarding=False,
        allow_pty=False,
        x11_forwarding=False,
    )
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    await asyncio.Event().wait()


threading.Thread(target=exit_on_stdin_eof, daemon=True).start()
asyncio.run(main())
`

// StartAsyncSSH runs AsyncSSH's SFTP server (Debian's python3-asyncssh,
// under Debian's /usr/bin/python3, not whatever python3 is first on PATH)
// on a port of 127.0.0.1 that it picks and prints, with ed25519 and ECDSA
// P-256 host keys and the generated client key as its only authorized
// key. Python's warnings (cryptography's deprecations) are silenced; its
// output is shown when the test fails. AsyncSSH takes any user name: User
// is the current user, whose rights the server has.
func StartAsyncSSH(t testing.TB, opts Options) *Server {
	t.Helper()
	need(t, "Debian's python3", PythonPath)
	need(t, "python3-asyncssh", asyncsshProbe)
	dir := t.TempDir()
	u := currentUser(t)
	srv := &Server{User: u.Username}
	newClientKey(t, srv, dir)
	edPath, ecPath := writeHostKeys(t, srv, dir, false)
	authKeys := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authKeys, ssh.MarshalAuthorizedKey(srv.ClientKey), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "asyncssh_server.py")
	if err := os.WriteFile(script, []byte(asyncsshServer), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(PythonPath, "-W", "ignore", script, edPath+","+ecPath, authKeys)
	cmd.Dir = u.HomeDir
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon("asyncssh", cmd)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("cannot start AsyncSSH: %v", err))
	}
	t.Cleanup(func() {
		stdin.Close()
		d.stop()
		if t.Failed() {
			t.Logf("asyncssh output:\n%s", d.log.String())
		}
	})
	line, err := readFirstLine(bufio.NewReader(stdout), 20*time.Second)
	port, perr := strconv.Atoi(line)
	if err != nil || perr != nil || port <= 0 {
		d.stop()
		t.Fatalf("sshdtest: AsyncSSH did not say its port (%q, %v); it said:\n%s", line, err, d.log.String())
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitBanner(addr, d.exited, 10*time.Second); err != nil {
		t.Fatalf("sshdtest: AsyncSSH: %v; it said:\n%s", err, d.log.String())
	}
	srv.finish(t, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	return srv
}
