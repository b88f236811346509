package ssh

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
)

// Defaults applied by Resolve and Dial to zero fields.
const (
	DefaultPort                = 22
	DefaultConnectTimeout      = 15 * time.Second
	DefaultServerAliveInterval = 15 * time.Second
	DefaultServerAliveCountMax = 3
)

// Config says how to reach one host. Resolve fills it from ssh_config; Dial
// uses it as given, applying the defaults above to zero fields.
type Config struct {
	Alias    string // the name the caller used (an ssh_config Host alias or a host name)
	HostName string // where to connect; Alias when empty
	User     string // remote login; the current local user when empty
	Port     int    // DefaultPort when zero

	// IdentityFiles are private key files tried after the agent's keys. When
	// empty, ~/.ssh/id_ed25519, id_ecdsa and id_rsa are tried if present.
	IdentityFiles []string
	// IdentitiesOnly restricts agent keys to those matching IdentityFiles.
	IdentitiesOnly bool
	// IdentitiesOnlySet means the caller decided IdentitiesOnly (the
	// manifest's identities_only), false included: Resolve then leaves
	// ssh_config's IdentitiesOnly aside.
	IdentitiesOnlySet bool
	// KnownHostsFiles hold the trusted host keys; ~/.ssh/known_hosts when
	// empty. A file that does not exist counts as empty.
	KnownHostsFiles []string

	// ProxyJump is a comma-separated chain of [user@]host[:port] jump hosts,
	// each resolved through ssh_config itself; "" or "none" means direct.
	ProxyJump string

	// ConnectTimeout bounds the whole of Dial: TCP connect, jump hosts, key
	// exchange, authentication and SFTP start, for all attempts together.
	ConnectTimeout time.Duration
	// ServerAliveInterval is the keepalive period; ServerAliveCountMax
	// unanswered keepalives in a row close the connection.
	ServerAliveInterval time.Duration
	ServerAliveCountMax int

	SSHConfigPath string // ssh_config to read; "" = ~/.ssh/config
	// SSHConfigFile, when set, is the ssh_config Resolve and the ProxyJump
	// hops look hosts up in, read already: SSHConfigPath is not read.
	SSHConfigFile *ConfigFile
	AgentSocket   string // ssh-agent socket; "" = $SSH_AUTH_SOCK

	// hop is what Resolve's caller set of the settings that every
	// ProxyJump hop takes too, over the hop's own ssh_config.
	hop hopSettings
}

// hopSettings are the caller's (the manifest's) identity and known_hosts
// settings, which apply to the jump hosts as much as to the target.
type hopSettings struct {
	identityFiles, knownHostsFiles    []string
	identitiesOnly, identitiesOnlySet bool
}

// Resolve looks alias up in the ssh_config file (Config.SSHConfigFile of
// override, else the file at its SSHConfigPath, else ~/.ssh/config) and
// returns the settings to dial it with.
// Non-zero fields of override win over ssh_config; defaults fill the rest.
// HostName, User, Port, IdentityFile, IdentitiesOnly, UserKnownHostsFile,
// ProxyJump, ConnectTimeout, ServerAliveInterval and ServerAliveCountMax are
// read; "~" and the %d %h %n %r %u %% tokens are expanded locally. A missing
// ~/.ssh/config is not an error; a missing explicit SSHConfigPath is.
func Resolve(alias string, override Config) (Config, error) {
	if alias == "" {
		return Config{}, errors.New("ssh: resolve: empty host alias")
	}
	sc, err := override.sshConfig()
	if err != nil {
		return Config{}, err
	}
	get := func(key string) (string, error) {
		if sc == nil {
			return "", nil
		}
		v, err := sc.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("ssh: ssh_config %s for %q: %w", key, alias, err)
		}
		return strings.TrimSpace(v), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Config{}, fmt.Errorf("ssh: resolve %q: %w", alias, err)
	}
	// Looked up only if a setting needs it: with cgo, a lookup reads
	// nsswitch.conf and /etc/passwd and tries nscd.
	localUser := sync.OnceValue(lookupUser)

	cfg := override
	cfg.Alias = alias
	cfg.IdentityFiles = append([]string(nil), override.IdentityFiles...)
	cfg.KnownHostsFiles = append([]string(nil), override.KnownHostsFiles...)
	cfg.hop = hopSettings{
		identityFiles:   append([]string(nil), override.IdentityFiles...),
		knownHostsFiles: append([]string(nil), override.KnownHostsFiles...),
		identitiesOnly:  override.IdentitiesOnly, identitiesOnlySet: override.IdentitiesOnlySet,
	}
	if cfg.HostName == "" {
		v, err := get("HostName")
		if err != nil {
			return Config{}, err
		}
		cfg.HostName = expandTokens(v, tokens{alias: alias, host: alias, localUser: localUser, home: home})
		if cfg.HostName == "" {
			cfg.HostName = alias
		}
	}
	if cfg.User == "" {
		v, err := get("User")
		if err != nil {
			return Config{}, err
		}
		cfg.User = v
		if cfg.User == "" {
			cfg.User = localUser()
		}
	}
	if cfg.Port == 0 {
		v, err := get("Port")
		if err != nil {
			return Config{}, err
		}
		if v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p <= 0 || p > 65535 {
				return Config{}, fmt.Errorf("ssh: ssh_config Port for %q: %q is not a port number", alias, v)
			}
			cfg.Port = p
		}
	}
	tok := tokens{alias: alias, host: cfg.HostName, remoteUser: cfg.User, localUser: localUser, home: home}
	if len(cfg.IdentityFiles) == 0 && sc != nil {
		vs, err := sc.GetAll(alias, "IdentityFile")
		if err != nil {
			return Config{}, fmt.Errorf("ssh: ssh_config IdentityFile for %q: %w", alias, err)
		}
		for _, v := range vs {
			v = strings.TrimSpace(v)
			if v == "" || strings.EqualFold(v, "none") {
				continue
			}
			cfg.IdentityFiles = append(cfg.IdentityFiles, v)
		}
	}
	for i, f := range cfg.IdentityFiles {
		cfg.IdentityFiles[i] = expandPath(expandTokens(f, tok), home)
	}
	if !cfg.IdentitiesOnly && !cfg.IdentitiesOnlySet {
		v, err := get("IdentitiesOnly")
		if err != nil {
			return Config{}, err
		}
		cfg.IdentitiesOnly = strings.EqualFold(v, "yes")
	}
	if len(cfg.KnownHostsFiles) == 0 {
		v, err := get("UserKnownHostsFile")
		if err != nil {
			return Config{}, err
		}
		cfg.KnownHostsFiles = strings.Fields(v)
	}
	for i, f := range cfg.KnownHostsFiles {
		cfg.KnownHostsFiles[i] = expandPath(expandTokens(f, tok), home)
	}
	if cfg.ProxyJump == "" {
		v, err := get("ProxyJump")
		if err != nil {
			return Config{}, err
		}
		cfg.ProxyJump = v
	}
	if strings.EqualFold(cfg.ProxyJump, "none") {
		cfg.ProxyJump = ""
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{
		{"ConnectTimeout", &cfg.ConnectTimeout},
		{"ServerAliveInterval", &cfg.ServerAliveInterval},
	} {
		if *d.dst != 0 {
			continue
		}
		v, err := get(d.key)
		if err != nil {
			return Config{}, err
		}
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Config{}, fmt.Errorf("ssh: ssh_config %s for %q: %q is not a number of seconds", d.key, alias, v)
		}
		*d.dst = time.Duration(n) * time.Second
	}
	if cfg.ServerAliveCountMax == 0 {
		v, err := get("ServerAliveCountMax")
		if err != nil {
			return Config{}, err
		}
		if v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Config{}, fmt.Errorf("ssh: ssh_config ServerAliveCountMax for %q: %q is not a number", alias, v)
			}
			cfg.ServerAliveCountMax = n
		}
	}
	return cfg.withDefaults()
}

// withDefaults fills zero fields and checks what Dial relies on.
func (c Config) withDefaults() (Config, error) {
	if c.HostName == "" {
		c.HostName = c.Alias
	}
	if c.Alias == "" {
		c.Alias = c.HostName
	}
	if c.HostName == "" {
		return c, errors.New("ssh: config has neither Alias nor HostName")
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Port < 0 || c.Port > 65535 {
		return c, fmt.Errorf("ssh: %s: port %d out of range", c.Alias, c.Port)
	}
	if c.User == "" {
		c.User = lookupUser()
	}
	if len(c.KnownHostsFiles) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return c, fmt.Errorf("ssh: %s: known_hosts: %w", c.Alias, err)
		}
		c.KnownHostsFiles = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ServerAliveInterval <= 0 {
		c.ServerAliveInterval = DefaultServerAliveInterval
	}
	if c.ServerAliveCountMax <= 0 {
		c.ServerAliveCountMax = DefaultServerAliveCountMax
	}
	if strings.EqualFold(c.ProxyJump, "none") {
		c.ProxyJump = ""
	}
	// Copy the slices so that a caller's later edits cannot race with Dial.
	c.IdentityFiles = append([]string(nil), c.IdentityFiles...)
	c.KnownHostsFiles = append([]string(nil), c.KnownHostsFiles...)
	return c, nil
}

// addr is the host:port to dial, also the name known_hosts is searched for.
func (c Config) addr() string {
	return net.JoinHostPort(c.HostName, strconv.Itoa(c.Port))
}

// sshConfig parses the ssh_config c names; nil means there is none.
func (c Config) sshConfig() (*ssh_config.Config, error) {
	if c.SSHConfigFile != nil {
		return c.SSHConfigFile.config()
	}
	f, err := ReadConfigFile(c.SSHConfigPath)
	if err != nil {
		return nil, err
	}
	return f.config()
}

// ConfigFile is an ssh_config file as ReadConfigFile read it. Given to
// Resolve as Config.SSHConfigFile, it is what the host and its ProxyJump
// hops are looked up in, without reading the file again, so that a run
// resolving many hosts reads its ssh_config once; it is JSON, for a run
// to hand to its workers. The files it Includes are read when it is first
// parsed, once per process.
type ConfigFile struct {
	Path    string `json:"path"`
	Data    []byte `json:"data,omitempty"`
	Missing bool   `json:"missing,omitempty"` // no ~/.ssh/config: no settings

	once   sync.Once
	parsed *ssh_config.Config
	err    error
}

// openConfigFile opens an ssh_config file (a variable for the tests).
var openConfigFile = func(name string) (io.ReadCloser, error) { return os.Open(name) }

// UserConfigPath is ~/.ssh/config, the ssh_config read when none is named;
// "" without a home directory.
func UserConfigPath() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ssh", "config")
}

// ReadConfigFile reads the ssh_config at path, ~/.ssh/config when path is
// "". A missing ~/.ssh/config (or no home directory) is a ConfigFile with
// no settings; a missing explicit path is an error.
func ReadConfigFile(path string) (*ConfigFile, error) {
	explicit := path != ""
	if !explicit {
		if path = UserConfigPath(); path == "" {
			return &ConfigFile{Missing: true}, nil
		}
	}
	f, err := openConfigFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return &ConfigFile{Path: path, Missing: true}, nil
		}
		return nil, fmt.Errorf("ssh: ssh_config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("ssh: ssh_config: %w", err)
	}
	return &ConfigFile{Path: path, Data: data}, nil
}

// config parses the file, once; nil when it is Missing.
func (f *ConfigFile) config() (*ssh_config.Config, error) {
	if f.Missing {
		return nil, nil
	}
	f.once.Do(func() {
		f.parsed, f.err = ssh_config.DecodeBytes(f.Data)
		if f.err != nil {
			f.err = fmt.Errorf("ssh: ssh_config %s: %w", f.Path, f.err)
		}
	})
	return f.parsed, f.err
}

// lookupUser is currentUser, a variable for the tests.
var lookupUser = currentUser

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// tokens are the values ssh_config's percent tokens stand for.
type tokens struct {
	alias, host, remoteUser, home string
	localUser                     func() string
}

// expandTokens replaces %d (local home), %h (remote host name), %n (the
// alias as given), %r (remote user), %u (local user) and %%. Other tokens
// are left as written.
func expandTokens(s string, t tokens) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			b.WriteString(t.home)
		case 'h':
			b.WriteString(t.host)
		case 'n':
			b.WriteString(t.alias)
		case 'r':
			b.WriteString(t.remoteUser)
		case 'u':
			b.WriteString(t.localUser())
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// expandPath expands a leading "~" against the local home directory.
func expandPath(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

// jumpSpec is one hop of a ProxyJump chain.
type jumpSpec struct {
	user, host string
	port       int
}

// parseProxyJump splits "a,user@b:2222,[::1]:22,ssh://c" into hops.
func parseProxyJump(s string) ([]jumpSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return nil, nil
	}
	var hops []jumpSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		part = strings.TrimPrefix(part, "ssh://")
		part = strings.TrimSuffix(part, "/")
		if part == "" {
			return nil, fmt.Errorf("ssh: ProxyJump %q: empty hop", s)
		}
		var h jumpSpec
		if i := strings.LastIndex(part, "@"); i >= 0 {
			h.user, part = part[:i], part[i+1:]
			if h.user == "" {
				return nil, fmt.Errorf("ssh: ProxyJump %q: empty user", s)
			}
		}
		host, port := part, ""
		switch {
		case strings.HasPrefix(part, "["):
			end := strings.Index(part, "]")
			if end < 0 {
				return nil, fmt.Errorf("ssh: ProxyJump %q: unterminated [", s)
			}
			host, rest := part[1:end], part[end+1:]
			if rest != "" {
				if !strings.HasPrefix(rest, ":") {
					return nil, fmt.Errorf("ssh: ProxyJump %q: junk after ]", s)
				}
				port = rest[1:]
			}
			h.host = host
		case strings.Count(part, ":") == 1:
			i := strings.Index(part, ":")
			host, port = part[:i], part[i+1:]
			h.host = host
		default:
			h.host = host
		}
		if h.host == "" {
			return nil, fmt.Errorf("ssh: ProxyJump %q: empty host", s)
		}
		if port != "" {
			p, err := strconv.Atoi(port)
			if err != nil || p <= 0 || p > 65535 {
				return nil, fmt.Errorf("ssh: ProxyJump %q: bad port %q", s, port)
			}
			h.port = p
		}
		hops = append(hops, h)
	}
	return hops, nil
}

// resolveJumps turns cfg.ProxyJump into the configs of the hops, in the
// order they are dialed. Each hop is resolved through the same ssh_config;
// a hop's own ProxyJump is ignored (the chain is spelled out in full).
// The identity files, known_hosts files and IdentitiesOnly that Resolve's
// caller set (the manifest's) apply to every hop, over its ssh_config.
func resolveJumps(cfg Config) ([]Config, error) {
	specs, err := parseProxyJump(cfg.ProxyJump)
	if err != nil {
		return nil, err
	}
	var hops []Config
	for _, s := range specs {
		hc, err := Resolve(s.host, Config{
			User:              s.user,
			Port:              s.port,
			IdentityFiles:     cfg.hop.identityFiles,
			KnownHostsFiles:   cfg.hop.knownHostsFiles,
			IdentitiesOnly:    cfg.hop.identitiesOnly,
			IdentitiesOnlySet: cfg.hop.identitiesOnlySet,
			ConnectTimeout:    cfg.ConnectTimeout,
			SSHConfigPath:     cfg.SSHConfigPath,
			SSHConfigFile:     cfg.SSHConfigFile,
			AgentSocket:       cfg.AgentSocket,
		})
		if err != nil {
			return nil, fmt.Errorf("ssh: ProxyJump hop %q: %w", s.host, err)
		}
		hc.ProxyJump = ""
		hops = append(hops, hc)
	}
	return hops, nil
}
