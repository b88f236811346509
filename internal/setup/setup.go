// Package setup is the wiring every command shares: from a manifest to
// the hosts a command was asked for, the workspace it works in, how each
// host is dialled, and what claim needs to know about it. Sync, doctor,
// prune and the CLI take these from here, so that they select, dial and
// discover hosts the same way.
//
// Guarantees: a host is dialled only as the manifest says (the local file
// system, or SSH with host keys verified, ~/.ssh/config applied under the
// manifest's settings); an unknown host name is a *UsageError naming the
// hosts the manifest has; the workspace is an absolute path.
package setup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/internal/fanout"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// UsageError is a mistake in how a command was called (an unknown host
// name, a missing manifest); the CLI exits 2 for it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Dialer opens a host's transport. Tests replace Dial with their own.
type Dialer func(ctx context.Context, h manifest.HostConfig) (transport.FS, error)

// Or returns d, or when d is nil the real thing: Dial logging to log.
func (d Dialer) Or(log *slog.Logger) Dialer {
	if d != nil {
		return d
	}
	return func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) { return Dial(ctx, h, log) }
}

// Hosts returns the manifest's hosts named in names, in the order named
// and each once; all of them, in manifest order, when names is empty.
func Hosts(m *manifest.Manifest, names []string) ([]manifest.HostConfig, error) {
	all := m.HostConfigs()
	if len(names) == 0 {
		return all, nil
	}
	var out []manifest.HostConfig
	for _, n := range names {
		h, ok := m.Host(n)
		if !ok {
			return nil, &UsageError{fmt.Sprintf("unknown host %q; the manifest has: %s", n, strings.Join(m.HostNames(), ", "))}
		}
		if !slices.ContainsFunc(out, func(x manifest.HostConfig) bool { return x.Name == n }) {
			out = append(out, h)
		}
	}
	return out, nil
}

// Select is what a command over hosts starts from: the hosts named (all
// when names is empty, see Hosts) and the absolute workspace (see
// Workspace).
func Select(m *manifest.Manifest, names []string, workspace string) ([]manifest.HostConfig, string, error) {
	hosts, err := Hosts(m, names)
	if err != nil {
		return nil, "", err
	}
	ws, err := Workspace(m, workspace)
	if err != nil {
		return nil, "", err
	}
	return hosts, ws, nil
}

// Workspace is the absolute workspace directory: dir when set (a
// --workspace flag), else the manifest's.
func Workspace(m *manifest.Manifest, dir string) (string, error) {
	if dir == "" {
		dir = m.Workspace
	}
	return filepath.Abs(dir)
}

// Dial opens the transport a manifest host names: the local file system,
// or SSH/SFTP with ~/.ssh/config applied under the manifest's settings.
func Dial(ctx context.Context, h manifest.HostConfig, log *slog.Logger) (transport.FS, error) {
	switch h.Transport {
	case manifest.TransportLocal:
		return transport.NewLocal(), nil
	case manifest.TransportSSH:
		cfg, err := SSHConfig(h)
		if err != nil {
			return nil, err
		}
		fsys, err := sshfs.Dial(ctx, cfg, log)
		var hk *sshfs.HostKeyError
		if errors.As(err, &hk) {
			named := *hk
			named.Host = h.Name // the hint names the manifest host, not the ssh alias; hosts trust also trusts its jump hosts
			return nil, fmt.Errorf("%w\nhint: %s", err, named.Hint())
		}
		var hinted interface{ Hint() string }
		if errors.As(err, &hinted) {
			return nil, fmt.Errorf("%w\nhint: %s", err, hinted.Hint())
		}
		if err != nil {
			return nil, err
		}
		return fsys, nil
	}
	return nil, fmt.Errorf("unknown transport %q", h.Transport)
}

// KeyError is an identity file CheckKeys refused, with the host whose
// settings name it.
type KeyError struct {
	Host string
	Err  *sshfs.UnprotectedKeyError
}

func (e *KeyError) Error() string { return fmt.Sprintf("host %s: %v", e.Host, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }

// Hint says how to fix it.
func (e *KeyError) Hint() string { return e.Err.Hint() }

// CheckKeys refuses, before a command connects anywhere or writes
// anything, an identity file of an SSH host (or of its jump hosts) that
// group or others may read, as OpenSSH refuses it. Other problems with a
// host's settings are left to Dial, which fails that host alone.
func CheckKeys(hosts []manifest.HostConfig) error {
	for _, h := range hosts {
		if h.Transport != manifest.TransportSSH {
			continue
		}
		cfg, err := SSHConfig(h)
		if err != nil {
			continue
		}
		var loose *sshfs.UnprotectedKeyError
		if err := sshfs.CheckIdentityFiles(cfg); errors.As(err, &loose) {
			return &KeyError{Host: h.Name, Err: loose}
		}
	}
	return nil
}

// SSHConfig resolves a manifest host's SSH settings: ~/.ssh/config for the
// alias in ssh.host, overridden by whatever the manifest sets. The file is
// read once per process (see sshConfigs).
func SSHConfig(h manifest.HostConfig) (sshfs.Config, error) {
	if h.SSH == nil {
		return sshfs.Config{}, fmt.Errorf("host %s: no ssh settings", h.Name)
	}
	s := h.SSH
	o := sshfs.Config{User: s.User, Port: s.Port, ProxyJump: s.ProxyJump}
	if s.IdentityFile != "" {
		o.IdentityFiles = []string{s.IdentityFile}
	}
	if s.KnownHosts != "" {
		o.KnownHostsFiles = []string{s.KnownHosts}
	}
	if s.IdentitiesOnly != nil {
		o.IdentitiesOnly, o.IdentitiesOnlySet = *s.IdentitiesOnly, true
	}
	if s.ConnectTimeout != nil {
		o.ConnectTimeout = s.ConnectTimeout.Duration
	}
	if s.ServerAliveInterval != nil {
		o.ServerAliveInterval = s.ServerAliveInterval.Duration
	}
	o.SSHConfigFile = userSSHConfig()
	cfg, err := sshfs.Resolve(s.Host, o)
	if err != nil {
		return sshfs.Config{}, fmt.Errorf("host %s: %w", h.Name, err)
	}
	return cfg, nil
}

// ClaimConfig is what claim needs to know about a manifest host: sync,
// doctor and prune all discover the same inboxes the same way.
func ClaimConfig(h manifest.HostConfig, log *slog.Logger) claim.Config {
	cfg := claim.Config{
		Host: h.Name, Transport: h.Transport, Harnesses: h.Harnesses, Inboxes: h.Inboxes,
		MaxFileSize: h.MaxFileSize, Settle: h.Settle, Log: log, Repos: true,
	}
	for _, d := range h.Discover {
		cfg.Roots = append(cfg.Roots, claim.Root{Path: d.Root, MaxDepth: d.MaxDepth})
	}
	return cfg
}

// ForEachHost runs fn for every host, at most parallel at once, and
// waits. fn gets the host's index, so results can land in manifest order.
func ForEachHost(hosts []manifest.HostConfig, parallel int, fn func(i int, h manifest.HostConfig)) {
	fanout.Each(context.Background(), len(hosts), parallel, func(_ context.Context, i int) error {
		fn(i, hosts[i])
		return nil
	})
}
