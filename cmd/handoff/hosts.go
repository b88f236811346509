package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

func newHostsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "hosts", Short: "Manage writer hosts"}
	var yes bool
	var manifestPath string
	trust := &cobra.Command{
		Use:   "trust NAME",
		Short: "Show a host's SSH key fingerprint and, once confirmed, add it to known_hosts",
		Long: "trust connects to the host, shows the key it presents, and appends it to the\n" +
			"known_hosts file the manifest names for that host. This is the only way handoff\n" +
			"ever trusts a new key: a sync never does. Check the fingerprint out of band\n" +
			"(for example `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := loadManifest(manifestPath)
			if err != nil {
				return err
			}
			h, ok := m.Host(args[0])
			if !ok {
				return &exitError{code: exitUsage, err: fmt.Errorf("unknown host %q; the manifest has: %s", args[0], strings.Join(m.HostNames(), ", "))}
			}
			if h.Transport != manifest.TransportSSH {
				return &exitError{code: exitUsage, err: fmt.Errorf("host %s uses transport %s; only ssh hosts have keys", h.Name, h.Transport)}
			}
			cfg, err := setup.SSHConfig(h)
			if err != nil {
				return err
			}
			key, err := sshfs.ScanHostKey(cmd.Context(), cfg)
			if err != nil {
				return fmt.Errorf("host %s: %w", h.Name, err)
			}
			line := sshfs.KnownHostsLine(cfg, key)
			file := cfg.KnownHostsFiles[0]
			fmt.Fprintf(g.stdout, "host %s (%s) presents %s key %s\n", h.Name, strings.Fields(line)[0], key.Type(), ssh.FingerprintSHA256(key))
			if known(file, line) {
				fmt.Fprintf(g.stdout, "already trusted in %s\n", file)
				return nil
			}
			if !yes {
				f, isFile := g.stdin.(*os.File)
				if !isFile || !term.IsTerminal(int(f.Fd())) {
					return &exitError{code: exitUsage, err: errors.New("not on a terminal; refusing to trust a key without --yes"),
						hint: "check the fingerprint with the host's owner, then run again with --yes"}
				}
				fmt.Fprintf(g.stdout, "Trust this key and add it to %s? [y/N] ", file)
				answer, _ := bufio.NewReader(g.stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return &exitError{code: exitFailed, err: errors.New("not trusted; known_hosts unchanged")}
				}
			}
			if err := appendLine(file, line); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "added to %s\n", file)
			return nil
		},
	}
	trust.Flags().BoolVar(&yes, "yes", false, "trust without asking (after checking the fingerprint out of band)")
	trust.Flags().StringVar(&manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	cmd.AddCommand(trust)
	return cmd
}

// known reports whether file already holds exactly this line.
func known(file, line string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// appendLine adds line to file (0600, created with its directory if
// missing) and fsyncs it.
func appendLine(file, line string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	prefix := ""
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		if b, err := os.ReadFile(file); err == nil && !strings.HasSuffix(string(b), "\n") {
			prefix = "\n"
		}
	}
	if _, err := f.WriteString(prefix + line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
