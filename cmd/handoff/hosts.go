package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
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
		Long: "trust connects to the host, shows the key it presents, and adds it to the\n" +
			"known_hosts file the manifest names for that host. This is the only way handoff\n" +
			"ever trusts a new key: a sync never does. Check the fingerprint out of band\n" +
			"(for example `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host).\n\n" +
			"When known_hosts holds another key for the host, the key has changed: trust\n" +
			"warns, shows the old and new fingerprints, and replaces the old key's line, so\n" +
			"that the old key is no longer trusted. Other lines stay byte for byte; the file\n" +
			"is replaced atomically (a temporary file, fsynced, renamed).\n\n" +
			"A ProxyJump host on the way whose key is unknown or changed is shown and\n" +
			"trusted the same way first (in the known_hosts it uses: the manifest's, when set).",
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
			t := &trustCmd{g: g, host: h.Name, yes: yes}
			return t.run(cmd.Context(), cfg)
		},
	}
	trust.Flags().BoolVar(&yes, "yes", false, "trust without asking (after checking the fingerprint out of band)")
	trust.Flags().StringVar(&manifestPath, "manifest", "", "writers manifest (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	cmd.AddCommand(trust, newHostsListCmd(g))
	return cmd
}

// trustCmd is one `hosts trust`: the jump hosts whose keys need trusting,
// then the host itself.
type trustCmd struct {
	g    *globals
	host string // the manifest host
	yes  bool
}

func (t *trustCmd) run(ctx context.Context, cfg sshfs.Config) error {
	hops, err := sshfs.JumpHosts(cfg)
	if err != nil {
		return fmt.Errorf("host %s: %w", t.host, err)
	}
	// Each pass trusts one more hop whose key stopped the scan.
	for pass := 0; ; pass++ {
		key, err := sshfs.ScanHostKey(ctx, cfg)
		var hk *sshfs.HostKeyError
		if errors.As(err, &hk) && hk.Key != nil && pass < len(hops) {
			if hop := hopNamed(hops, hk.Host); hop != nil {
				if err := t.trust(fmt.Sprintf("jump host %s (for %s)", hop.Alias, t.host), *hop, hk.Key); err != nil {
					return err
				}
				continue
			}
		}
		if err != nil {
			return hintedError(fmt.Errorf("host %s: %w", t.host, err))
		}
		return t.trust("host "+t.host, cfg, key)
	}
}

func hopNamed(hops []sshfs.Config, alias string) *sshfs.Config {
	for i := range hops {
		if hops[i].Alias == alias {
			return &hops[i]
		}
	}
	return nil
}

// trust shows key, warns when it replaces another, asks (unless --yes),
// and writes known_hosts.
func (t *trustCmd) trust(who string, cfg sshfs.Config, key ssh.PublicKey) error {
	g := t.g
	plan, err := sshfs.PlanTrust(cfg, key)
	if err != nil {
		return hintedError(fmt.Errorf("%s: %w", who, err))
	}
	fp := ssh.FingerprintSHA256(key)
	fmt.Fprintf(g.stdout, "%s (%s) presents %s key %s\n", who, strings.Fields(plan.Line)[0], key.Type(), fp)
	if plan.Trusted {
		fmt.Fprintf(g.stdout, "already trusted in %s\n", plan.File)
		return nil
	}
	question := fmt.Sprintf("Trust this key and add it to %s? [y/N] ", plan.File)
	if plan.Changed() {
		fmt.Fprintf(g.stderr, "handoff: warning: the host key of %s has CHANGED since it was trusted\n", strings.TrimPrefix(who, "host "))
		for _, o := range plan.Replaced {
			fmt.Fprintf(g.stderr, "  old: %s %s (%s:%d)\n", o.Type, o.Fingerprint, plan.File, o.Line)
		}
		fmt.Fprintf(g.stderr, "  new: %s %s\n", key.Type(), fp)
		fmt.Fprintf(g.stderr, "hint: the host may have been reinstalled, or someone may be intercepting the connection; "+
			"confirm %s with the host's owner before trusting it: the old key is then removed\n", fp)
		question = fmt.Sprintf("Replace the old key with this one in %s? [y/N] ", plan.File)
	}
	if !t.yes {
		f, isFile := g.stdin.(*os.File)
		if !isFile || !term.IsTerminal(int(f.Fd())) {
			return &exitError{code: exitUsage, err: errors.New("not on a terminal; refusing to trust a key without --yes"),
				hint: "check the fingerprint with the host's owner, then run again with --yes"}
		}
		fmt.Fprint(g.stdout, question)
		answer, _ := bufio.NewReader(g.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return &exitError{code: exitFailed, err: errors.New("not trusted; known_hosts unchanged")}
		}
	}
	if err := plan.Apply(); err != nil {
		return err
	}
	if plan.Changed() {
		var lines []string
		for _, o := range plan.Replaced {
			lines = append(lines, strconv.Itoa(o.Line))
		}
		fmt.Fprintf(g.stdout, "replaced the old key (line %s) in %s\n", strings.Join(lines, ", "), plan.File)
		return nil
	}
	fmt.Fprintf(g.stdout, "added to %s\n", plan.File)
	return nil
}

// hintedError gives err the hint the transport attached to it, if any.
func hintedError(err error) error {
	var hinted interface{ Hint() string }
	if errors.As(err, &hinted) {
		return &exitError{code: exitFailed, err: err, hint: hinted.Hint()}
	}
	return err
}
