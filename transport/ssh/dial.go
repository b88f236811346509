package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// maxAttempts is how many times Dial tries to connect; retryBackoff is the
// wait before the second attempt, doubled before each later one.
const (
	maxAttempts  = 3
	retryBackoff = 250 * time.Millisecond
)

// testHookDialTCP, when set by a test, replaces the TCP dial of the first hop.
var testHookDialTCP func(ctx context.Context, addr string) (net.Conn, error)

// Dial connects to the host cfg describes (through its ProxyJump chain, if
// any), verifies its host key, authenticates and starts SFTP. Everything up
// to a working SFTP session happens before cfg.ConnectTimeout (and before
// ctx ends), retries included. log may be nil.
func Dial(ctx context.Context, cfg Config, log *slog.Logger) (*FS, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hops, err := resolveJumps(cfg)
	if err != nil {
		return nil, err
	}
	run := startRun(ctx, cfg)
	defer run.release()

	var eps []*endpoint
	for _, c := range append(hops, cfg) {
		ep, err := run.prepare(c, log)
		if err != nil {
			return nil, run.failure(err)
		}
		eps = append(eps, ep)
	}
	client, jumps, err := run.connect(eps, log, nil)
	if err != nil {
		return nil, err
	}
	fsys, err := startSFTP(client, jumps, cfg, log)
	if err != nil {
		closeClients(client, jumps)
		return nil, run.failure(fmt.Errorf("sftp: %s: start: %w", cfg.Alias, err))
	}
	if err := run.done(); err != nil {
		fsys.abort(err)
		return nil, err
	}
	go fsys.keepalive(cfg.ServerAliveInterval, cfg.ServerAliveCountMax)
	return fsys, nil
}

// ScanHostKey connects to cfg's host (through its jump hosts, which are
// verified and authenticated as usual) and returns the host key the server
// presents, without authenticating to it and without trusting the key. It
// is what `handoff hosts trust` shows the user before writing
// KnownHostsLine to known_hosts.
func ScanHostKey(ctx context.Context, cfg Config) (ssh.PublicKey, error) {
	log := slog.New(slog.DiscardHandler)
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hops, err := resolveJumps(cfg)
	if err != nil {
		return nil, err
	}
	run := startRun(ctx, cfg)
	defer run.release()
	var eps []*endpoint
	for _, c := range hops {
		ep, err := run.prepare(c, log)
		if err != nil {
			return nil, run.failure(err)
		}
		eps = append(eps, ep)
	}
	algos, err := scanAlgorithms(cfg)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var key ssh.PublicKey
	eps = append(eps, &endpoint{cfg: cfg, ccfg: &ssh.ClientConfig{
		User:              cfg.User,
		HostKeyAlgorithms: algos,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			mu.Lock()
			key = k
			mu.Unlock()
			return errScanned
		},
	}, hostKeyOK: new(atomic.Bool)})
	client, jumps, err := run.connect(eps, log, errScanned)
	if err == nil {
		closeClients(client, jumps)
		return nil, errors.New("ssh: scan: handshake finished without showing a host key")
	}
	if !errors.Is(err, errScanned) {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	return key, nil
}

// scanAlgorithms is the order ScanHostKey asks for a host key in: the
// plain key types known_hosts already holds for the host first, so that
// a server that still has such a key shows it (and a changed one is seen
// as changed, not as a new type), then the rest in OpenSSH's preference.
func scanAlgorithms(cfg Config) ([]string, error) {
	db, err := loadKnownHosts(cfg.KnownHostsFiles)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range append(db.HostKeyAlgorithms(cfg.addr()), unknownHostAlgorithms...) {
		if !strings.Contains(a, "-cert-") && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// JumpHosts resolves cfg's ProxyJump chain: the config of each hop, in the
// order they are dialled (none for a direct connection). A hop whose key a
// ScanHostKey or Dial refused (a *HostKeyError whose Host is the hop's
// Alias) is trusted with PlanTrust on its config.
func JumpHosts(cfg Config) ([]Config, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return resolveJumps(cfg)
}

// errScanned ends a ScanHostKey handshake once the key is in hand.
var errScanned = errors.New("host key captured")

// KnownHostsLine is the known_hosts line that trusts key for cfg's host:
// the host name alone on port 22, "[host]:port" otherwise.
func KnownHostsLine(cfg Config, key ssh.PublicKey) string {
	port := cfg.Port
	if port == 0 {
		port = DefaultPort
	}
	host := cfg.HostName
	if host == "" {
		host = cfg.Alias
	}
	return knownhosts.Line([]string{net.JoinHostPort(host, strconv.Itoa(port))}, key)
}

// endpoint is one SSH server to pass through: a jump host or the target.
type endpoint struct {
	cfg       Config
	ccfg      *ssh.ClientConfig
	keys      *keyring
	hostKeyOK *atomic.Bool // the host key check passed in the current attempt
}

// run is one Dial or ScanHostKey: the deadline and everything to close when
// it passes.
type run struct {
	cfg     Config
	ctx     context.Context // the caller's
	dctx    context.Context // ctx bounded by cfg.ConnectTimeout
	cancel  context.CancelFunc
	disarm  func() bool
	mu      sync.Mutex
	fired   bool
	attempt []io.Closer // connections of the current attempt
	keep    []io.Closer // agent connections, closed when the run ends
}

func startRun(ctx context.Context, cfg Config) *run {
	r := &run{cfg: cfg, ctx: ctx}
	r.dctx, r.cancel = context.WithTimeout(ctx, cfg.ConnectTimeout)
	// One timer for every kind of connection: closing them unblocks a TCP
	// read, a channel through a stuck jump host and an agent request alike.
	r.disarm = context.AfterFunc(r.dctx, r.closeAll)
	return r
}

func (r *run) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fired = true
	for _, c := range r.attempt {
		c.Close()
	}
	for _, c := range r.keep {
		c.Close()
	}
	r.attempt, r.keep = nil, nil
}

// track registers c to be closed if the deadline passes. If it already
// has, c is closed at once.
func (r *run) track(c io.Closer, keep bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fired {
		c.Close()
		return
	}
	if keep {
		r.keep = append(r.keep, c)
	} else {
		r.attempt = append(r.attempt, c)
	}
}

// abandon closes the current attempt's connections.
func (r *run) abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.attempt) - 1; i >= 0; i-- {
		r.attempt[i].Close()
	}
	r.attempt = nil
}

// done disarms the deadline once the connection is fully set up; it fails
// if the deadline had already passed.
func (r *run) done() error {
	if !r.disarm() {
		return r.failure(errAttemptTimeout)
	}
	r.mu.Lock()
	r.attempt = nil // now owned by the FS
	r.mu.Unlock()
	return nil
}

// release ends the run: agent connections are closed, and so is anything a
// failed run left open.
func (r *run) release() {
	r.disarm()
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.attempt {
		c.Close()
	}
	for _, c := range r.keep {
		c.Close()
	}
	r.attempt, r.keep = nil, nil
}

// failure turns err into what the caller sees: the caller's own context
// error if that ended, a deadline error if the connect deadline passed.
func (r *run) failure(err error) error {
	var hk *HostKeyError
	if errors.As(err, &hk) || errors.Is(err, ErrAuth) {
		return err
	}
	if cerr := r.ctx.Err(); cerr != nil {
		return fmt.Errorf("ssh: %s: connect: %w", r.cfg.Alias, cerr)
	}
	if r.dctx.Err() != nil {
		return fmt.Errorf("ssh: %s (%s): %w (%s for connect, handshake and login): %w",
			r.cfg.Alias, r.cfg.addr(), errAttemptTimeout, r.cfg.ConnectTimeout, os.ErrDeadlineExceeded)
	}
	return err
}

// prepare loads what the handshake with one endpoint needs: the known_hosts
// database, the host key algorithms to offer, and the keys to log in with.
func (r *run) prepare(cfg Config, log *slog.Logger) (*endpoint, error) {
	db, err := loadKnownHosts(cfg.KnownHostsFiles)
	if err != nil {
		return nil, err
	}
	keys, err := loadKeyring(r.dctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if keys.agentConn != nil {
		r.track(keys.agentConn, true)
	}
	ep := &endpoint{cfg: cfg, keys: keys, hostKeyOK: new(atomic.Bool)}
	ep.ccfg = &ssh.ClientConfig{
		User: cfg.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			return keys.signers, nil
		})},
		HostKeyCallback:   verifyHostKey(cfg, db, ep.hostKeyOK),
		HostKeyAlgorithms: hostKeyAlgorithms(db, cfg.addr()),
		BannerCallback: func(msg string) error {
			if len(msg) > 512 {
				msg = msg[:512]
			}
			log.Debug("ssh: server banner", "host", cfg.Alias, "banner", msg)
			return nil
		},
	}
	return ep, nil
}

// unknownHostAlgorithms is the order in which a host that known_hosts does
// not know is asked for its key: OpenSSH's preference (ed25519 first), so
// that the fingerprint shown is the one an administrator is likely to
// check, and the one ScanHostKey reports.
var unknownHostAlgorithms = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// hostKeyAlgorithms offers only the algorithms known_hosts holds keys (or
// CAs) for, so that a server with several host keys shows the one we can
// check (golang/go#29286).
func hostKeyAlgorithms(db *knownhosts.HostKeyDB, addr string) []string {
	if algos := db.HostKeyAlgorithms(addr); len(algos) > 0 {
		return algos
	}
	return unknownHostAlgorithms
}

// loadKnownHosts opens the known_hosts files that exist; a missing file
// holds no keys.
func loadKnownHosts(files []string) (*knownhosts.HostKeyDB, error) {
	var existing []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("ssh: known_hosts: %w", err)
		}
		existing = append(existing, f)
	}
	db, err := knownhosts.NewDB(existing...)
	if err != nil {
		return nil, fmt.Errorf("ssh: known_hosts: %w", err)
	}
	return db, nil
}

// verifyHostKey checks the server's key against known_hosts and turns every
// refusal into a *HostKeyError.
func verifyHostKey(cfg Config, db *knownhosts.HostKeyDB, ok *atomic.Bool) ssh.HostKeyCallback {
	check := db.HostKeyCallback()
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		if err == nil {
			ok.Store(true)
			return nil
		}
		he := &HostKeyError{
			Host:        cfg.Alias,
			Addr:        knownhosts.Normalize(hostname),
			Fingerprint: ssh.FingerprintSHA256(key),
			KeyType:     key.Type(),
			Key:         key,
			KnownHosts:  strings.Join(cfg.KnownHostsFiles, ", "),
			err:         err,
		}
		var ke *xknownhosts.KeyError
		if errors.As(err, &ke) && len(ke.Want) > 0 {
			he.Changed = true
			he.KnownHosts = fmt.Sprintf("%s:%d", ke.Want[0].Filename, ke.Want[0].Line)
		}
		return he
	}
}

// connect makes up to maxAttempts attempts. An attempt that fails with
// stopAt (ScanHostKey's errScanned) ends the loop with that error. A
// connection the first hop refused every time is a *RefusedError.
func (r *run) connect(eps []*endpoint, log *slog.Logger, stopAt error) (*ssh.Client, []*ssh.Client, error) {
	client, jumps, err := r.connectAttempts(eps, log, stopAt)
	var hk *HostKeyError
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) && !errors.As(err, &hk) {
		err = &RefusedError{Host: eps[0].cfg.Alias, Addr: eps[0].cfg.addr(), err: err}
	}
	return client, jumps, err
}

func (r *run) connectAttempts(eps []*endpoint, log *slog.Logger, stopAt error) (*ssh.Client, []*ssh.Client, error) {
	for attempt := 1; ; attempt++ {
		client, jumps, err := r.attemptOnce(eps)
		if err == nil {
			return client, jumps, nil
		}
		r.abandon()
		if stopAt != nil && errors.Is(err, stopAt) {
			return nil, nil, err
		}
		err = r.failure(err)
		if r.dctx.Err() != nil || attempt == maxAttempts || !IsRetryable(err) {
			return nil, nil, err
		}
		wait := retryBackoff << (attempt - 1)
		log.Info("ssh: connection attempt failed; retrying", "host", r.cfg.Alias, "attempt", attempt, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.dctx.Done():
			t.Stop()
			return nil, nil, r.failure(err)
		}
	}
}

// attemptOnce dials the first endpoint over TCP and each later one through
// a channel of the previous, doing the SSH handshake with each.
func (r *run) attemptOnce(eps []*endpoint) (*ssh.Client, []*ssh.Client, error) {
	first := eps[0].cfg
	var conn net.Conn
	var err error
	if testHookDialTCP != nil {
		conn, err = testHookDialTCP(r.dctx, first.addr())
	} else {
		var d net.Dialer
		conn, err = d.DialContext(r.dctx, "tcp", first.addr())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ssh: %s: %w", first.Alias, err)
	}
	r.track(conn, false)
	if dl, ok := r.dctx.Deadline(); ok {
		// The read/write deadline bounds the handshake on the raw socket;
		// x/crypto's ClientConfig.Timeout would only bound the TCP connect.
		conn.SetDeadline(dl)
	}
	tcp := conn
	var clients []*ssh.Client
	for i, ep := range eps {
		ep.hostKeyOK.Store(false)
		if i > 0 {
			conn, err = clients[i-1].DialContext(r.dctx, "tcp", ep.cfg.addr())
			if err != nil {
				return nil, nil, fmt.Errorf("ssh: %s: open a tunnel to %s (%s): %w", eps[i-1].cfg.Alias, ep.cfg.Alias, ep.cfg.addr(), err)
			}
			r.track(conn, false)
		}
		c, chans, reqs, err := ssh.NewClientConn(conn, ep.cfg.addr(), ep.ccfg)
		if err != nil {
			return nil, nil, ep.handshakeError(err)
		}
		client := ssh.NewClient(c, chans, reqs)
		r.track(client, false)
		clients = append(clients, client)
	}
	// The session outlives the handshake: from here on the keepalive and
	// each call's context bound it, not the connect deadline.
	tcp.SetDeadline(time.Time{})
	n := len(clients)
	return clients[n-1], clients[:n-1], nil
}

// handshakeError classifies a failed handshake with ep.
func (ep *endpoint) handshakeError(err error) error {
	var hk *HostKeyError
	if errors.As(err, &hk) {
		return hk
	}
	if errors.Is(err, errScanned) {
		return err
	}
	if ep.hostKeyOK.Load() && looksLikeAuthFailure(err) {
		return authFailure(ep.cfg, ep.keys, err)
	}
	if strings.Contains(err.Error(), "no common algorithm for host key") {
		return fmt.Errorf("ssh: %s (%s): the server offers none of the host key types known_hosts holds for it (has its key changed?): %w",
			ep.cfg.Alias, ep.cfg.addr(), err)
	}
	return fmt.Errorf("ssh: %s (%s): %w", ep.cfg.Alias, ep.cfg.addr(), err)
}

func looksLikeAuthFailure(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unable to authenticate") ||
		strings.Contains(msg, "authentication") ||
		strings.Contains(msg, "no auth passed")
}

func closeClients(client *ssh.Client, jumps []*ssh.Client) {
	if client != nil {
		client.Close()
	}
	for i := len(jumps) - 1; i >= 0; i-- {
		jumps[i].Close()
	}
}

// startSFTP opens the "sftp" subsystem (never a shell command) and starts
// pkg/sftp on it with the list guard in between.
func startSFTP(client *ssh.Client, jumps []*ssh.Client, cfg Config, log *slog.Logger) (*FS, error) {
	session, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	stdin, err := session.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := session.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := session.RequestSubsystem("sftp"); err != nil {
		return nil, err
	}
	closers := []io.Closer{client}
	for i := len(jumps) - 1; i >= 0; i-- {
		closers = append(closers, jumps[i])
	}
	banner := string(client.ServerVersion())
	f, err := newFS(stdout, stdin, cfg, log, isOpenSSH(banner), closers...)
	if err != nil {
		return nil, err
	}
	f.client = client
	f.openSSH = isOpenSSH(banner) && isOpenSSHSFTP(f.sftp)
	f.lstatSafe = f.openSSH && !isWindowsOpenSSH(banner)
	return f, nil
}
