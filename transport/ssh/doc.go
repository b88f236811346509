// Package ssh is the SSH transport: a transport.FS over SFTP
// (golang.org/x/crypto/ssh and github.com/pkg/sftp).
//
// What it promises, beyond the transport.FS contract:
//
//   - Host keys are always verified against known_hosts (skeema/knownhosts,
//     @cert-authority lines included). Only the key algorithms known_hosts
//     holds for the host are offered, so a server with several host keys is
//     checked against the one we know. An unknown or changed key fails with
//     *HostKeyError carrying the fingerprint; nothing is ever accepted
//     blindly, and such a failure is never retried.
//   - TCP connect, every ProxyJump hop, key exchange, authentication and the
//     start of SFTP all run under one deadline (Config.ConnectTimeout, and the
//     caller's context). Dial returns by then, retries included.
//   - Transient connection failures (refused, reset, timeout, EOF before
//     authentication) are retried, three attempts in all; a bad host key or
//     failed authentication (ErrAuth) never is.
//   - Authentication uses ssh-agent first, then identity files. The agent is
//     never forwarded and no remote command is ever run: only the "sftp"
//     subsystem is requested, so ForceCommand internal-sftp and restrict
//     accounts work.
//   - Every FS method returns promptly once its context is done: the whole
//     connection is closed and every later call fails. A keepalive
//     (keepalive@openssh.com) closes the connection when the peer stops
//     answering, so no call waits on a dead host.
//   - Reads are bounded whatever the server claims: ReadFile never reads more
//     than limit+1 bytes, and ReadDir never holds more than maxEntries (plus
//     "." and "..") entries in memory, even if the server never ends the
//     listing. Each listing has its own budget, however many run at once on
//     one connection: a listing cut off leaves the others untouched.
//   - The handles a session holds open on the server (files being read,
//     directories being listed, handles whose CLOSE is unanswered) stay
//     within a bound: the server's own limit where it says it
//     (limits@openssh.com, capped at 512), else 64. An OPEN that fails, or
//     a handle the server does not know, while many are open lowers the
//     bound and is tried again, so a server's handle limit never fails a
//     call that fewer handles would let through.
//   - Every FS method may be called from any number of goroutines at once;
//     their requests share the one SFTP session (pkg/sftp matches replies
//     to requests by id), so calls made at once wait out their round trips
//     together rather than in turn.
//   - Few round trips per call: ReadFile waits for five (LSTAT, OPEN,
//     FSTAT, its READs sent together, FSTAT) whatever the file's size up to
//     2 MiB (64 READs of 32 KiB in flight; larger files stream at that
//     rate), and does not wait for its CLOSE. ReadDir waits for three
//     (OPENDIR, READDIR, the READDIR that says the listing is over): the
//     guard answers its CLOSE at once and drops the server's answer.
//     Rename on OpenSSH of a file ReadFile just read takes one (see
//     FS.Rename for why only then), two otherwise.
package ssh
