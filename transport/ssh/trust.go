package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"github.com/handoff-sync/handoff/internal/durable"
)

// TrustPlan is what trusting a host's key changes in its known_hosts file
// (the first of Config.KnownHostsFiles): nothing when the key is already
// trusted, else the new line, in place of the lines that held another key
// for the same host. Apply writes it.
type TrustPlan struct {
	File    string // the known_hosts file written
	Line    string // the line that trusts the key
	Trusted bool   // the key is trusted already; Apply writes nothing
	// Replaced are the lines that held another key for this host: the host
	// key changed. Apply drops them (or, on a line naming other hosts
	// too, only this host's name) and puts Line where the first was.
	Replaced []OldKey

	data   []byte // the file as read; nil if it does not exist
	edited []byte // the file as Apply writes it
	mode   fs.FileMode
}

// TrustError is a known_hosts that PlanTrust will not edit: the key is
// revoked there, or a line it does not edit trusts another key.
type TrustError struct{ msg, hint string }

func (e *TrustError) Error() string { return e.msg }

// Hint says what to do.
func (e *TrustError) Hint() string { return e.hint }

// OldKey is a known_hosts line that a changed key replaces.
type OldKey struct {
	Line        int    // 1-based
	Type        string // e.g. ssh-ed25519
	Fingerprint string // SHA256:...
}

// Changed reports whether the plan replaces another key: the host's key
// changed since it was trusted.
func (p *TrustPlan) Changed() bool { return len(p.Replaced) > 0 }

// PlanTrust works out how known_hosts must change so that it trusts key
// (a key ScanHostKey returned) for cfg's host, and only that key of its
// type. Keys of other types, which the server may still have, stay, unless
// none of key's type was known: then the server has none of them any
// more. Lines for other hosts, comments and blank lines are kept byte for
// byte. A key that is trusted or refused through a line PlanTrust does
// not edit (a wildcard pattern, @revoked, another known_hosts file) is an
// error naming that line.
func PlanTrust(cfg Config, key ssh.PublicKey) (*TrustPlan, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &TrustPlan{File: cfg.KnownHostsFiles[0], Line: KnownHostsLine(cfg, key), mode: 0o600}
	if real, err := filepath.EvalSymlinks(p.File); err == nil {
		p.File = real // a symlinked known_hosts (dotfiles) stays a symlink
	}
	addr := net.JoinHostPort(cfg.HostName, strconv.Itoa(cfg.Port))
	known := checkKnown(cfg.KnownHostsFiles, addr, key)
	if known != nil && !errors.As(known, new(*xknownhosts.KeyError)) {
		return nil, known // unreadable, or the key is @revoked
	}

	data, err := os.ReadFile(p.File)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("ssh: known_hosts: %w", err)
	default:
		p.data = data
		if st, err := os.Stat(p.File); err == nil {
			p.mode = st.Mode().Perm()
		}
	}
	p.edited = p.edit(xknownhosts.Normalize(addr), key)
	if known == nil && len(p.Replaced) == 0 {
		p.Trusted = true
		return p, nil
	}
	// What is left must trust the key and no other of its type.
	if err := checkEdited(p, cfg, addr, key); err != nil {
		return nil, err
	}
	return p, nil
}

// edit returns the file with the lines naming host (plainly or hashed)
// that hold another key of key's type (of any type, when none of key's
// type was there) taken out, and the new line in the first one's place
// (at the end when there was none, and not at all when a line holds key).
func (p *TrustPlan) edit(host string, key ssh.PublicKey) []byte {
	var out bytes.Buffer
	lines := bytes.SplitAfter(p.data, []byte("\n"))
	placed := false    // a line trusting the key is in out, or will be
	typeKnown := false // some line holds a key of key's type for host
	for _, raw := range lines {
		if _, old, ok := matchLine(raw, host); ok {
			placed = placed || bytes.Equal(old.Marshal(), key.Marshal())
			typeKnown = typeKnown || old.Type() == key.Type()
		}
	}
	for i, raw := range lines {
		if len(raw) == 0 {
			continue
		}
		// A key of another type is replaced only when none of key's type
		// was known: ScanHostKey asks for the known types first, so the
		// server has none of them any more.
		others, old, ok := matchLine(raw, host)
		if !ok || bytes.Equal(old.Marshal(), key.Marshal()) || (typeKnown && old.Type() != key.Type()) {
			out.Write(raw)
			continue
		}
		p.Replaced = append(p.Replaced, OldKey{Line: i + 1, Type: old.Type(), Fingerprint: ssh.FingerprintSHA256(old)})
		if others != nil {
			out.Write(others) // the line still trusts the old key for its other hosts
		}
		if !placed {
			out.WriteString(p.Line + "\n")
			placed = true
		}
	}
	if !placed {
		if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			out.WriteByte('\n')
		}
		out.WriteString(p.Line + "\n")
	}
	return out.Bytes()
}

// matchLine reports whether a known_hosts line (no marker) names host by
// an exact or hashed pattern, with the key it holds. others is the line
// with host's pattern taken out when it names other hosts too, else nil.
func matchLine(raw []byte, host string) (others []byte, key ssh.PublicKey, ok bool) {
	trimmed := bytes.TrimLeft(raw, " \t")
	if len(trimmed) == 0 || trimmed[0] == '#' || trimmed[0] == '@' {
		return nil, nil, false
	}
	_, hosts, key, _, _, err := ssh.ParseKnownHosts(raw)
	if err != nil || len(hosts) == 0 {
		return nil, nil, false
	}
	var keep []string
	for _, h := range hosts {
		if h == host || hashedMatch(h, host) {
			ok = true
			continue
		}
		keep = append(keep, h)
	}
	if !ok {
		return nil, nil, false
	}
	if len(keep) > 0 {
		// The hosts field is the line's first word; the rest stays as is.
		lead := raw[:len(raw)-len(trimmed)]
		end := bytes.IndexAny(trimmed, " \t")
		others = append(append(append([]byte{}, lead...), strings.Join(keep, ",")...), trimmed[end:]...)
	}
	return others, key, true
}

// hashedMatch reports whether a hashed pattern (|1|salt|hash) names host.
func hashedMatch(pattern, host string) bool {
	rest, ok := strings.CutPrefix(pattern, "|1|")
	if !ok {
		return false
	}
	saltB64, hashB64, ok := strings.Cut(rest, "|")
	if !ok {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(saltB64)
	want, err2 := base64.StdEncoding.DecodeString(hashB64)
	if err1 != nil || err2 != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return hmac.Equal(mac.Sum(nil), want)
}

// checkKnown asks the known_hosts files whether they trust key for addr:
// nil if they do, a *knownhosts.KeyError if they do not.
func checkKnown(files []string, addr string, key ssh.PublicKey) error {
	var existing []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			existing = append(existing, f)
		}
	}
	if len(existing) == 0 {
		return &xknownhosts.KeyError{}
	}
	cb, err := xknownhosts.New(existing...)
	if err != nil {
		return fmt.Errorf("ssh: known_hosts: %w", err)
	}
	var revoked *xknownhosts.RevokedError
	err = cb(addr, &net.TCPAddr{IP: net.IPv4zero, Port: 0}, key)
	if errors.As(err, &revoked) {
		return &TrustError{
			msg:  fmt.Sprintf("ssh: known_hosts %s:%d marks this key @revoked", revoked.Revoked.Filename, revoked.Revoked.Line),
			hint: "find out why it was revoked; remove that line only if the key is trustworthy again, then run this again",
		}
	}
	return err
}

// checkEdited checks the edited file (with the other known_hosts files):
// it must trust key, and no line it could not edit (a pattern, another
// file) may still trust another key of key's type for the host.
func checkEdited(p *TrustPlan, cfg Config, addr string, key ssh.PublicKey) error {
	dir, err := os.MkdirTemp("", "handoff-trust-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(tmp, p.edited, 0o600); err != nil {
		return err
	}
	files := append([]string{tmp}, cfg.KnownHostsFiles[1:]...)
	if err := checkKnown(files, addr, key); err != nil {
		return err
	}
	// A key nobody trusts makes the check list every line for the host.
	probe, err := ssh.NewPublicKey(make(ed25519.PublicKey, ed25519.PublicKeySize))
	if err != nil {
		return err
	}
	var ke *xknownhosts.KeyError
	if err := checkKnown(files, addr, probe); !errors.As(err, &ke) {
		return err
	}
	for _, w := range ke.Want {
		if w.Key.Type() != key.Type() || bytes.Equal(w.Key.Marshal(), key.Marshal()) {
			continue
		}
		where := fmt.Sprintf("%s:%d", w.Filename, w.Line)
		if w.Filename == tmp {
			where = p.File + " (a line with a pattern)"
		}
		return &TrustError{
			msg: fmt.Sprintf("ssh: known_hosts %s also trusts %s key %s for %s, through a line handoff does not edit",
				where, w.Key.Type(), ssh.FingerprintSHA256(w.Key), cfg.Alias),
			hint: "edit or remove that line by hand (it would keep the old key trusted), then run this again",
		}
	}
	return nil
}

// Apply writes the planned known_hosts durably: a temporary file in the
// same directory, fsynced, renamed over the old one, the directory
// fsynced. The file keeps its mode (0600 when new). It does nothing when
// the key was trusted already.
func (p *TrustPlan) Apply() error {
	if p.Trusted {
		return nil
	}
	dir := filepath.Dir(p.File)
	if err := durable.MkdirAllPath(dir, 0o700); err != nil {
		return fmt.Errorf("ssh: known_hosts: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("ssh: known_hosts: %w", err)
	}
	defer root.Close()
	if err := durable.WriteFile(root, filepath.Base(p.File), p.edited, p.mode); err != nil {
		return fmt.Errorf("ssh: known_hosts: %w", err)
	}
	return nil
}
