package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/transport"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// DialHost opens the transport a manifest host names: the local file system,
// or SSH/SFTP with ~/.ssh/config applied under the manifest's settings.
func DialHost(ctx context.Context, h manifest.HostConfig, log *slog.Logger) (transport.FS, error) {
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
			named.Host = h.Name // the hint names the manifest host, not the ssh alias
			return nil, fmt.Errorf("%w\nhint: %s", err, named.Hint())
		}
		if err != nil {
			return nil, err
		}
		return fsys, nil
	}
	return nil, fmt.Errorf("unknown transport %q", h.Transport)
}

// SSHConfig resolves a manifest host's SSH settings: ~/.ssh/config for the
// alias in ssh.host, overridden by whatever the manifest sets.
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
		o.IdentitiesOnly = *s.IdentitiesOnly
	}
	if s.ConnectTimeout != nil {
		o.ConnectTimeout = s.ConnectTimeout.Duration
	}
	if s.ServerAliveInterval != nil {
		o.ServerAliveInterval = s.ServerAliveInterval.Duration
	}
	cfg, err := sshfs.Resolve(s.Host, o)
	if err != nil {
		return sshfs.Config{}, fmt.Errorf("host %s: %w", h.Name, err)
	}
	return cfg, nil
}
