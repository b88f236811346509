package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"

	"github.com/handoff-sync/handoff/transport"
)

// ErrAuth matches (errors.Is) every authentication failure: the server
// refused all our keys, or no usable key was found. It is never retried.
var ErrAuth = errors.New("authentication failed")

// ErrChanged: ReadFile found that the open handle no longer describes the
// file it had just Lstat'ed (size or modification time differ). The caller
// should treat the file as still being written and try again later.
// It is transport.ErrChanged, so callers need not know the transport.
var ErrChanged = transport.ErrChanged

// HostKeyError reports a host key that known_hosts does not vouch for. It is
// never retried, and the key is never accepted.
type HostKeyError struct {
	Host        string        // the name dialed: Config.Alias, else HostName
	Addr        string        // the known_hosts form of the address: host, or [host]:port
	Fingerprint string        // SHA256:... of the key the server presented
	KeyType     string        // e.g. ssh-ed25519
	Key         ssh.PublicKey // the key the server presented
	Changed     bool          // known_hosts holds a different key for Addr
	// KnownHosts names where we looked: the files consulted, or for a
	// changed key the file:line holding the key that no longer matches.
	KnownHosts string

	err error // what the known_hosts check said
}

func (e *HostKeyError) Error() string {
	if e.Changed {
		return fmt.Sprintf("ssh: host key for %s (%s) has changed: the server presented %s %s, which does not match %s",
			e.Host, e.Addr, e.KeyType, e.Fingerprint, e.KnownHosts)
	}
	return fmt.Sprintf("ssh: host key for %s (%s) is unknown: the server presented %s %s, not trusted by %s",
		e.Host, e.Addr, e.KeyType, e.Fingerprint, e.KnownHosts)
}

// Unwrap returns the known_hosts check's own error.
func (e *HostKeyError) Unwrap() error { return e.err }

// Hint says what the user should do about it.
func (e *HostKeyError) Hint() string {
	if e.Changed {
		return fmt.Sprintf("the host may have been reinstalled, or someone may be intercepting the connection; "+
			"check %s with the host's owner, then run `handoff hosts trust %s`, which replaces the old key (%s)",
			e.Fingerprint, e.Host, e.KnownHosts)
	}
	return fmt.Sprintf("check that %s is the host's key out of band (on the host: ssh-keygen -lf %s), "+
		"then run `handoff hosts trust %s`", e.Fingerprint, hostKeyFile(e.KeyType), e.Host)
}

// hostKeyFile is where OpenSSH keeps the public host key of that type.
func hostKeyFile(keyType string) string {
	switch {
	case strings.Contains(keyType, "ed25519"):
		return "/etc/ssh/ssh_host_ed25519_key.pub"
	case strings.Contains(keyType, "ecdsa"):
		return "/etc/ssh/ssh_host_ecdsa_key.pub"
	case strings.Contains(keyType, "rsa"):
		return "/etc/ssh/ssh_host_rsa_key.pub"
	}
	return "/etc/ssh/ssh_host_*_key.pub"
}

// RefusedError is a TCP connection refused at every attempt: nothing
// listens at Addr. It unwraps to the dial error (syscall.ECONNREFUSED).
type RefusedError struct {
	Host string // the ssh alias dialled (the first jump host, if any)
	Addr string // host:port
	err  error
}

func (e *RefusedError) Error() string { return e.err.Error() }
func (e *RefusedError) Unwrap() error { return e.err }

// Hint names the likely cause and the fix.
func (e *RefusedError) Hint() string {
	host, port, _ := net.SplitHostPort(e.Addr)
	return fmt.Sprintf("nothing accepts connections at %s: check that sshd runs on %s and listens on port %s "+
		"(ssh.port in the manifest, or Port in ~/.ssh/config), then try `ssh -p %s %s`", e.Addr, e.Host, port, port, host)
}

// IsRetryable reports whether err is a transient connection failure worth
// another attempt: connection refused or reset, a timeout, or the peer
// hanging up before authentication. Host key and authentication failures,
// and a done context, are never retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var hk *HostKeyError
	if errors.As(err, &hk) || errors.Is(err, ErrAuth) {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, errAttemptTimeout) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT, syscall.EPIPE,
		io.EOF, io.ErrUnexpectedEOF, os.ErrDeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errAttemptTimeout marks a connection attempt cut off by the dial deadline.
var errAttemptTimeout = errors.New("no answer before the connect deadline")
