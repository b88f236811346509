// Package sshserve is the one embedded SSH server behind the demo's laptop
// (demo), the in-process test server (internal/testkit/sshdtest) and the
// servers that lie (internal/testkit/hostile). It is
// golang.org/x/crypto/ssh on a TCP listener; each SFTP session is handed
// to a function the caller gives, which decides what the "files" are.
//
// Guarantees:
//
//   - It listens only where told: Config.Addr, or 127.0.0.1:0 when that is
//     empty. It never dials anywhere unless Config.Forwarding is set, and
//     then only for direct-tcpip channels a client opens.
//   - A connection has Config.HandshakeTimeout (default 10s) for its key
//     exchange and authentication, counted on the raw connection: a client
//     that connects and says nothing is closed when it runs out.
//   - Nothing but the "sftp" subsystem is served. A session channel grants
//     one "sftp" subsystem request and refuses every other request (exec,
//     shell, pty-req, env, agent forwarding, a second subsystem). Channels
//     other than "session" are rejected, direct-tcpip too unless
//     Config.Forwarding is set. Global requests (tcpip-forward,
//     keepalive@openssh.com) are refused, which tells a client sending
//     keepalives that the peer is alive, or left unanswered with
//     Config.IgnoreKeepalives, as a dead peer would.
//   - When an SFTP session ends, the client gets exit-status 0 and the
//     channel is closed.
//   - The context given to Config.SFTP ends when the session's channel
//     closes (the client closed it, or a read or write on it failed) or the
//     server stops, so a session blocked on purpose can return.
//   - When Close returns, the listener and every connection are closed and
//     every goroutine the server started has returned, provided each
//     Config.SFTP call returns once its context ends. Close is safe to call
//     more than once and from many goroutines.
//   - Ending the context given to Start stops the server as Close does.
package sshserve
