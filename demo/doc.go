// Package demo is `handoff demo`: a self-contained tour in which an
// embedded SSH server plays a laptop and a real sync pulls from it.
//
// Guarantees:
//
//   - Everything happens inside one temporary directory, named
//     handoff-demo-* under [os.TempDir], whose path Run prints first: the
//     laptop's repositories, the client key, known_hosts, the writers
//     manifest and the workspace. Run removes it at the end unless
//     Options.Keep is set, and says which it did.
//   - Nothing outside that directory is written. Every path the manifest
//     names is absolute and inside it; the SSH client authenticates with a
//     key generated for the run, trusts only the host key in the run's own
//     known_hosts, reads no ~/.ssh/config and uses no ssh-agent (see
//     Options.Isolate for pulls in worker processes). Run does not change
//     the process environment.
//   - The embedded server listens on 127.0.0.1 only, accepts exactly one
//     client key (the one generated for the run), serves nothing but the
//     "sftp" subsystem (no shell, no exec, no pty, no forwarding of ports
//     or agents), and stops before Run returns.
//
// The server serves the real file system with the permissions of the
// process, as a laptop's sshd would; the demo only ever points it at the
// laptop directory inside the temporary directory.
package demo
