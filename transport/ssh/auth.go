package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keyring is what one Dial authenticates with: the agent's keys first, then
// the identity files'. It also remembers the encrypted identity files it had
// to skip, so that a failure can say why.
type keyring struct {
	signers   []ssh.Signer
	encrypted []string // identity files that are encrypted and not in the agent
	agentConn net.Conn // closed when Dial is done
}

func (k *keyring) close() {
	if k.agentConn != nil {
		k.agentConn.Close()
	}
}

// identity is one identity file as far as we could read it.
type identity struct {
	path   string
	pub    ssh.PublicKey // nil if neither the key nor a .pub file told us
	signer ssh.Signer    // nil if the key is encrypted
}

// loadKeyring gathers the signers for cfg. ctx bounds the agent connection.
// It fails only on a configured identity file it cannot read or parse, or
// when nothing at all can be tried.
func loadKeyring(ctx context.Context, cfg Config, log *slog.Logger) (*keyring, error) {
	k := &keyring{}
	ids, err := loadIdentities(cfg)
	if err != nil {
		return nil, err
	}

	var agentSigners []ssh.Signer
	sock := cfg.AgentSocket
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock != "" {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			log.Debug("ssh-agent unavailable", "socket", sock, "err", err)
		} else {
			k.agentConn = conn
			if dl, ok := ctx.Deadline(); ok {
				// Bounds listing keys now and signing during the handshake.
				conn.SetDeadline(dl)
			}
			agentSigners, err = agent.NewClient(conn).Signers()
			if err != nil {
				log.Debug("ssh-agent: listing keys failed", "socket", sock, "err", err)
				agentSigners = nil
			}
		}
	}

	inAgent := func(pub ssh.PublicKey) bool {
		if pub == nil {
			return false
		}
		for _, s := range agentSigners {
			if bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
				return true
			}
		}
		return false
	}
	for _, s := range agentSigners {
		if cfg.IdentitiesOnly && !matchesIdentity(s.PublicKey(), ids) {
			continue
		}
		k.signers = append(k.signers, s)
	}
	for _, id := range ids {
		switch {
		case inAgent(id.pub):
			// The agent's copy was offered above (or filtered out on purpose).
		case id.signer != nil:
			k.signers = append(k.signers, id.signer)
		default:
			k.encrypted = append(k.encrypted, id.path)
		}
	}
	if len(k.signers) == 0 {
		k.close()
		if len(k.encrypted) > 0 {
			return nil, encryptedKeyError(k.encrypted[0])
		}
		return nil, fmt.Errorf("ssh: %s: %w: no ssh-agent key and no identity file to offer; hint: set IdentityFile in ~/.ssh/config or identity_file in the manifest",
			cfg.Alias, ErrAuth)
	}
	return k, nil
}

func encryptedKeyError(path string) error {
	return fmt.Errorf("ssh: %w: identity file %s is encrypted and no ssh-agent holds it; hint: ssh-add it or use an unencrypted key dedicated to handoff",
		ErrAuth, path)
}

func matchesIdentity(pub ssh.PublicKey, ids []identity) bool {
	for _, id := range ids {
		if id.pub != nil && bytes.Equal(id.pub.Marshal(), pub.Marshal()) {
			return true
		}
	}
	return false
}

// loadIdentities reads cfg.IdentityFiles, or the default key files that
// exist when none is configured. A configured file that cannot be read is
// an error; a missing default is not.
func loadIdentities(cfg Config) ([]identity, error) {
	files := cfg.IdentityFiles
	explicit := len(files) > 0
	if !explicit {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil
		}
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			files = append(files, filepath.Join(home, ".ssh", n))
		}
	}
	var ids []identity
	for _, path := range files {
		pem, err := readPrivateKey(path)
		var loose *UnprotectedKeyError
		if err != nil {
			if !explicit && (errors.Is(err, os.ErrNotExist) || errors.As(err, &loose)) {
				continue // OpenSSH, too, passes over such a default key
			}
			if errors.As(err, &loose) {
				return nil, err
			}
			return nil, fmt.Errorf("ssh: identity file: %w", err)
		}
		id := identity{path: path}
		signer, err := ssh.ParsePrivateKey(pem)
		var missing *ssh.PassphraseMissingError
		switch {
		case err == nil:
			id.signer = signer
			id.pub = signer.PublicKey()
		case errors.As(err, &missing):
			id.pub = missing.PublicKey
		default:
			if !explicit {
				continue
			}
			return nil, fmt.Errorf("ssh: identity file %s: %w", path, err)
		}
		if id.pub == nil {
			id.pub = readPublicKey(path + ".pub")
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// UnprotectedKeyError is an identity file that its group or others may
// read or write (mode & 0o077 != 0). OpenSSH refuses such a key
// ("UNPROTECTED PRIVATE KEY FILE!"), and so does handoff: it is never
// offered, and Dial fails before it connects.
type UnprotectedKeyError struct {
	Path string
	Mode fs.FileMode // the permission bits found
}

func (e *UnprotectedKeyError) Error() string {
	return fmt.Sprintf("ssh: identity file %s is accessible by group or others (mode %04o): refused, as OpenSSH refuses an unprotected private key",
		e.Path, e.Mode.Perm())
}

// Hint says how to fix it.
func (e *UnprotectedKeyError) Hint() string {
	return fmt.Sprintf("chmod 600 %s (a private key must be readable by its owner alone)", e.Path)
}

// readPrivateKey reads an identity file, refusing one whose mode lets
// group or others at it. The mode is that of the open file.
func readPrivateKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, &UnprotectedKeyError{Path: path, Mode: st.Mode().Perm()}
	}
	return io.ReadAll(io.LimitReader(f, maxKeyFile))
}

// maxKeyFile bounds what is read of an identity file; real keys are a few
// KiB.
const maxKeyFile = 1 << 20

// CheckIdentityFiles refuses, before anything connects, an identity file
// of cfg or of its ProxyJump hops that group or others may read (an
// *UnprotectedKeyError). Files that do not exist are left to Dial.
func CheckIdentityFiles(cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	hops, err := resolveJumps(cfg)
	if err != nil {
		return err
	}
	for _, c := range append(hops, cfg) {
		for _, path := range c.IdentityFiles {
			st, err := os.Stat(path)
			if err != nil {
				continue
			}
			if st.Mode().Perm()&0o077 != 0 {
				return &UnprotectedKeyError{Path: path, Mode: st.Mode().Perm()}
			}
		}
	}
	return nil
}

// readPublicKey reads an OpenSSH .pub file; nil if there is none usable.
func readPublicKey(path string) ssh.PublicKey {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	return pub
}

// AuthError is an authentication the server refused during the
// handshake. It matches ErrAuth (errors.Is) and is never retried.
type AuthError struct {
	msg  string
	hint string
}

func (e *AuthError) Error() string { return e.msg }
func (e *AuthError) Unwrap() error { return ErrAuth }

// Hint names the likely cause and the fix.
func (e *AuthError) Hint() string { return e.hint }

// authFailure wraps an authentication error from the handshake as an
// *AuthError, naming the encrypted identity files that could not be
// offered, or a server that accepts no key at all.
func authFailure(cfg Config, k *keyring, err error) error {
	hint := "check that the key is in the remote account's authorized_keys"
	switch {
	case offeredNoKeyMethod(err): // no key was looked at, so none is to blame
		hint = fmt.Sprintf("%s@%s takes no public-key login (the server offered no method a key can use, so none was tried); "+
			"handoff logs in with keys only: set PubkeyAuthentication yes for that account in the host's sshd_config "+
			"(check AuthenticationMethods and Match blocks too), or fix the user name", cfg.User, cfg.HostName)
	case len(k.encrypted) > 0:
		hint = fmt.Sprintf("identity file %s is encrypted and no ssh-agent holds it; ssh-add it or use an unencrypted key dedicated to handoff",
			strings.Join(k.encrypted, ", "))
	}
	return &AuthError{msg: fmt.Sprintf("ssh: %s (%s@%s): %v: %v", cfg.Alias, cfg.User, cfg.addr(), ErrAuth, err), hint: hint}
}

// offeredNoKeyMethod reports that x/crypto gave up after the "none"
// method alone: the server's list of methods held no publickey, so no key
// was offered at all.
func offeredNoKeyMethod(err error) bool {
	return strings.Contains(err.Error(), "attempted methods [none],")
}
