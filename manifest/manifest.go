package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Built-in defaults, used wherever neither the host nor the manifest's
// defaults block says otherwise.
const (
	DefaultWorkspace   = "~/.openclaw/workspace"
	DefaultMaxDepth    = 3
	DefaultMaxFileSize = 1 * MiB
	DefaultSettle      = 10 * time.Second
	DefaultTimeout     = 5 * time.Minute
	// DefaultStaleAfter is how long a reachable host may send no handoff
	// before doctor warns that its agents' closeout may have stopped.
	DefaultStaleAfter = 7 * 24 * time.Hour
	// DefaultReviewMaxAge is how long a handoff may wait for a person
	// before doctor warns.
	DefaultReviewMaxAge = 7 * 24 * time.Hour
	// DefaultReceiptsKeep is how long sync keeps the receipt of a run that
	// did something (docs/receipts.md#retention).
	DefaultReceiptsKeep = 90 * 24 * time.Hour
	// DefaultReceiptsKeepIdle is how long sync keeps the receipt of a run
	// that said nothing new.
	DefaultReceiptsKeepIdle = 7 * 24 * time.Hour
	// DefaultBackupsKeep is how long sync keeps a backup of a target's
	// prior content once its plan is done (docs/receipts.md#retention).
	DefaultBackupsKeep = 90 * 24 * time.Hour
)

// DefaultHarnesses returns the harness directories searched by default:
// .claude, .codex, .grok and .hermes.
func DefaultHarnesses() []string {
	return []string{".claude", ".codex", ".grok", ".hermes"}
}

// Transports a host may use.
const (
	TransportLocal = "local"
	TransportSSH   = "ssh"
)

// Manifest is a parsed writers manifest.
type Manifest struct {
	Version int `json:"version"`
	// Workspace is the durable-memory workspace, expanded against the
	// local home directory.
	Workspace string   `json:"workspace,omitempty"`
	Defaults  Defaults `json:"defaults,omitzero"`
	Notify    Notify   `json:"notify,omitzero"`
	// OpenClaw says how the workspace's reader, OpenClaw, is treated.
	OpenClaw OpenClaw `json:"openclaw,omitzero"`
	// Receipts says how long sync keeps receipts and what they list.
	Receipts Receipts `json:"receipts,omitzero"`
	// Backups says how long sync keeps the backups of targets' prior
	// contents.
	Backups Backups `json:"backups,omitzero"`
	Hosts   []Host  `json:"hosts"`
	// Repos names repositories, joins clones that have no common origin,
	// and keeps repositories private to their hosts (repos.go).
	Repos []Repo `json:"repos,omitempty"`

	// WorkspaceRaw is the workspace as written (or the default), before
	// "~" expansion.
	WorkspaceRaw string `json:"-"`
	// Path is the file the manifest was read from.
	Path string `json:"-"`
	// SHA256 is the hex SHA-256 of the file's bytes.
	SHA256 string `json:"-"`
}

// Defaults holds the settings every host inherits unless it overrides
// them. After [Load] or [Parse], every field is set.
type Defaults struct {
	// Harnesses are the directories (such as .claude) that discovery looks
	// for memory-handoffs inboxes in.
	Harnesses []string `json:"harnesses,omitempty"`
	// MaxDepth is how many directory levels below a discovery root are
	// searched for repositories (the root itself is level 0).
	MaxDepth *int `json:"max_depth,omitempty"`
	// MaxFileSize is the largest handoff that is read; bigger files are
	// rejected.
	MaxFileSize *Size `json:"max_file_size,omitempty"`
	// Settle is how old a file must be before it is claimed.
	Settle *Duration `json:"settle,omitempty"`
	// Timeout bounds one host's whole pull.
	Timeout *Duration `json:"timeout,omitempty"`
	// Mirror is the mirror every ssh host gets unless it sets its own.
	Mirror *Mirror `json:"mirror,omitempty"`
	// StaleAfter is how long a reachable host may send no handoff before
	// doctor warns; 0 turns the check off.
	StaleAfter *Duration `json:"stale_after,omitempty"`
	// ReviewMaxAge is how long a handoff may wait for a person (`handoff
	// review`) before doctor warns. It belongs to the workspace, not to a
	// host: only the defaults block has it.
	ReviewMaxAge *Duration `json:"review_max_age,omitempty"`
	// ShareNotes false keeps every host's handoffs out of the other
	// hosts' repos/ unless the host sets share_notes: true (nil: true).
	ShareNotes *bool `json:"share_notes,omitempty"`
}

// Notify configures the heartbeat.
type Notify struct {
	// PingURL is a healthchecks.io-style ping URL.
	PingURL string `json:"ping_url,omitempty"`
}

// OpenClaw settings: which layout of OpenClaw reads the workspace, and
// whether MEMORY.md carries an index of the cards (docs/openclaw.md).
type OpenClaw struct {
	// Layout is "auto" (detected; the default), "2026.9" or "pre-2026.9".
	Layout string `json:"layout,omitempty"`
	// CardIndex keeps a bounded index of the cards in MEMORY.md; on
	// unless set to false.
	CardIndex *bool `json:"card_index,omitempty"`
	// Config is OpenClaw's config file, when it is not where OpenClaw
	// itself looks ($OPENCLAW_CONFIG_PATH, $OPENCLAW_STATE_DIR,
	// ~/.openclaw/openclaw.json); "~" is expanded.
	Config string `json:"config,omitempty"`
}

// CardIndexOn reports whether MEMORY.md carries the card index.
func (o OpenClaw) CardIndexOn() bool { return o.CardIndex == nil || *o.CardIndex }

// Receipts settings: how long sync keeps per-run receipts, and whether
// they list the inboxes that had nothing to say (docs/receipts.md).
type Receipts struct {
	// Keep is how long the receipt of a run that did something stays;
	// 0 keeps every receipt.
	Keep *Duration `json:"keep,omitempty"`
	// KeepIdle is how long the receipt of an idle run stays (ok, nothing
	// pulled, applied or published); 0 keeps it as long as the others.
	KeepIdle *Duration `json:"keep_idle,omitempty"`
	// ListQuietInboxes lists every inbox in every per-run receipt, in
	// place of a count of those with nothing to say.
	ListQuietInboxes bool `json:"list_quiet_inboxes,omitempty"`
}

// Retention returns how long a busy and an idle run's receipt stay: the
// settings or their defaults, 0 for forever. An idle run's receipt never
// outlives a busy one's, and keep 0 keeps every receipt.
func (r Receipts) Retention() (keep, keepIdle time.Duration) {
	keep, keepIdle = DefaultReceiptsKeep, DefaultReceiptsKeepIdle
	if r.Keep != nil {
		keep = r.Keep.Duration
	}
	if r.KeepIdle != nil {
		keepIdle = r.KeepIdle.Duration
	}
	if keep == 0 || keepIdle == 0 || keepIdle > keep {
		keepIdle = keep
	}
	return keep, keepIdle
}

// Backups settings: how long sync keeps .handoff/backups' copies of what
// a target held before a plan changed it (docs/receipts.md#retention).
type Backups struct {
	// Keep is how long a done plan's backup stays; 0 keeps every backup.
	Keep *Duration `json:"keep,omitempty"`
}

// Retention returns how long a done plan's backup stays: the setting or
// its default, 0 for forever.
func (b Backups) Retention() time.Duration {
	if b.Keep != nil {
		return b.Keep.Duration
	}
	return DefaultBackupsKeep
}

// Host is one writer host as written in the manifest. Nil settings are
// inherited from [Manifest.Defaults]; see [Manifest.Effective].
type Host struct {
	Name string `json:"name"`
	// Transport is [TransportLocal] or [TransportSSH].
	Transport string `json:"transport"`
	// Inboxes are memory-handoffs directories to read, in path.Clean form,
	// possibly starting with "~".
	Inboxes []string `json:"inboxes,omitempty"`
	// Discover lists directories to search for repositories holding
	// <harness>/memory-handoffs inboxes.
	Discover []Discover `json:"discover,omitempty"`

	Harnesses   []string  `json:"harnesses,omitempty"`
	MaxDepth    *int      `json:"max_depth,omitempty"`
	MaxFileSize *Size     `json:"max_file_size,omitempty"`
	Settle      *Duration `json:"settle,omitempty"`
	Timeout     *Duration `json:"timeout,omitempty"`
	Mirror      *Mirror   `json:"mirror,omitempty"`
	StaleAfter  *Duration `json:"stale_after,omitempty"`
	// ShareNotes false keeps the host's handoffs out of every other
	// host's repos/ (nil: the defaults block's, else true).
	ShareNotes *bool `json:"share_notes,omitempty"`

	// SSH is set for, and only for, ssh hosts.
	SSH *SSH `json:"ssh,omitempty"`
}

// Discover is a discovery root.
type Discover struct {
	// Root is the directory to search, in path.Clean form, possibly
	// starting with "~".
	Root string `json:"root"`
	// MaxDepth overrides the host's max_depth for this root.
	MaxDepth *int `json:"max_depth,omitempty"`
	// Private keeps every repository found under this root private to
	// its host: none of its handoffs is published to another host's
	// mirror.
	Private bool `json:"private,omitempty"`
}

// SSH says how to reach an ssh host. Empty fields are left to ssh_config
// and then to OpenSSH's defaults.
type SSH struct {
	// Host is a host name, an address or an alias from ~/.ssh/config.
	Host string `json:"host"`
	User string `json:"user,omitempty"`
	// Port is 0 when unset, meaning ssh_config's Port or 22.
	Port int `json:"port,omitempty"`
	// IdentityFile and KnownHosts are local paths, expanded against the
	// local home directory.
	IdentityFile        string    `json:"identity_file,omitempty"`
	KnownHosts          string    `json:"known_hosts,omitempty"`
	ProxyJump           string    `json:"proxy_jump,omitempty"`
	ConnectTimeout      *Duration `json:"connect_timeout,omitempty"`
	ServerAliveInterval *Duration `json:"server_alive_interval,omitempty"`
	IdentitiesOnly      *bool     `json:"identities_only,omitempty"`
}

// HostConfig is a host with every setting resolved: the host's own value,
// else the manifest's default, else the built-in default.
type HostConfig struct {
	Name      string
	Transport string
	// Inboxes and the discovery roots keep their "~"; expand them with
	// [ExpandHome] and the transport's home directory.
	Inboxes     []string
	Discover    []DiscoverRoot
	Harnesses   []string
	MaxDepth    int
	MaxFileSize int64
	Settle      time.Duration
	Timeout     time.Duration
	StaleAfter  time.Duration // 0: doctor does not check
	// KeepNotes: the host's share_notes is false, so its handoffs are
	// in no other host's repos/.
	KeepNotes bool
	// SSH is a copy of the host's ssh block, nil for a local host.
	SSH *SSH
	// Mirror is nil when the host has no mirror.
	Mirror *MirrorConfig
}

// DiscoverRoot is a discovery root with its depth resolved.
type DiscoverRoot struct {
	Root     string
	MaxDepth int
	Private  bool
}

// DefaultPath returns where the manifest lives by default:
// $XDG_CONFIG_HOME/handoff/writers.yaml, or ~/.config/handoff/writers.yaml
// when XDG_CONFIG_HOME is unset or not absolute. If the home directory is
// unknown, the result starts with a literal "~".
func DefaultPath() string {
	if dir := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "handoff", "writers.yaml")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "~"
	}
	return filepath.Join(home, ".config", "handoff", "writers.yaml")
}

// Load reads, parses and validates the manifest at path; see [Parse].
// A file that cannot be read gives an error wrapping the [os.ReadFile]
// error, so errors.Is(err, fs.ErrNotExist) works.
func Load(path string) (*Manifest, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return Parse(data, path)
}

// Parse parses and validates a manifest read from path, which is used in
// error messages and recorded in [Manifest.Path] as given. It applies the
// defaults and expands the local paths against the home directory from
// [os.UserHomeDir]. Every problem is a [*FieldError]; see the package
// documentation for the rules.
func Parse(data []byte, path string) (*Manifest, error) {
	m, err := decode(data, path)
	if err != nil {
		return nil, err
	}
	home, homeErr := os.UserHomeDir()
	v := &validator{file: path, home: home, homeErr: homeErr}
	v.manifest(m)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	m.applyDefaults()
	sum := sha256.Sum256(data)
	m.Path, m.SHA256 = path, hex.EncodeToString(sum[:])
	return m, nil
}

// applyDefaults fills the unset fields of m.Defaults with the built-in
// values.
func (m *Manifest) applyDefaults() {
	d := &m.Defaults
	if d.Harnesses == nil {
		d.Harnesses = DefaultHarnesses()
	}
	if d.MaxDepth == nil {
		d.MaxDepth = ptr(DefaultMaxDepth)
	}
	if d.MaxFileSize == nil {
		d.MaxFileSize = ptr(DefaultMaxFileSize)
	}
	if d.Settle == nil {
		d.Settle = &Duration{DefaultSettle}
	}
	if d.Timeout == nil {
		d.Timeout = &Duration{DefaultTimeout}
	}
	if d.StaleAfter == nil {
		d.StaleAfter = &Duration{DefaultStaleAfter}
	}
	if d.ReviewMaxAge == nil {
		d.ReviewMaxAge = &Duration{DefaultReviewMaxAge}
	}
	if d.ShareNotes == nil {
		d.ShareNotes = ptr(true)
	}
}

// Effective resolves h's settings against m's defaults and the built-in
// defaults. A discovery root without its own max_depth gets the host's.
func (m *Manifest) Effective(h Host) HostConfig {
	d := m.Defaults
	c := HostConfig{
		Name:        h.Name,
		Transport:   h.Transport,
		Inboxes:     slices.Clone(h.Inboxes),
		Harnesses:   slices.Clone(first(DefaultHarnesses(), h.Harnesses, d.Harnesses)),
		MaxDepth:    deref(DefaultMaxDepth, h.MaxDepth, d.MaxDepth),
		MaxFileSize: int64(deref(DefaultMaxFileSize, h.MaxFileSize, d.MaxFileSize)),
		Settle:      deref(Duration{DefaultSettle}, h.Settle, d.Settle).Duration,
		Timeout:     deref(Duration{DefaultTimeout}, h.Timeout, d.Timeout).Duration,
		StaleAfter:  deref(Duration{DefaultStaleAfter}, h.StaleAfter, d.StaleAfter).Duration,
		KeepNotes:   !deref(true, h.ShareNotes, d.ShareNotes),
	}
	for _, r := range h.Discover {
		c.Discover = append(c.Discover, DiscoverRoot{Root: r.Root, MaxDepth: deref(c.MaxDepth, r.MaxDepth), Private: r.Private})
	}
	if h.SSH != nil {
		s := *h.SSH
		c.SSH = &s
	}
	c.Mirror = effectiveMirror(h, d.Mirror)
	return c
}

// HostConfigs returns every host, resolved, in manifest order.
func (m *Manifest) HostConfigs() []HostConfig {
	cs := make([]HostConfig, len(m.Hosts))
	for i, h := range m.Hosts {
		cs[i] = m.Effective(h)
	}
	return cs
}

// Host returns the named host, resolved, and whether it exists.
func (m *Manifest) Host(name string) (HostConfig, bool) {
	for _, h := range m.Hosts {
		if h.Name == name {
			return m.Effective(h), true
		}
	}
	return HostConfig{}, false
}

// HostNames returns the host names in manifest order.
func (m *Manifest) HostNames() []string {
	names := make([]string, len(m.Hosts))
	for i, h := range m.Hosts {
		names[i] = h.Name
	}
	return names
}

// ExpandHome replaces a leading "~" in p with home: "~" becomes home and
// "~/x" becomes path.Join(home, "x"). Other paths, including "~user/x",
// and every path when home is "", are returned unchanged. Paths use
// forward slashes, as on the remote hosts.
func ExpandHome(p, home string) string {
	if home == "" {
		return p
	}
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return path.Join(home, rest)
	}
	return p
}

// deref returns the value of the first non-nil pointer in ps, else def.
func deref[T any](def T, ps ...*T) T {
	for _, p := range ps {
		if p != nil {
			return *p
		}
	}
	return def
}

// first returns the first non-nil slice in ss, else def.
func first[T any](def []T, ss ...[]T) []T {
	for _, s := range ss {
		if s != nil {
			return s
		}
	}
	return def
}

func ptr[T any](v T) *T { return &v }
