package demo

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/setup"
	"github.com/handoff-sync/handoff/manifest"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/receipts"
	"github.com/handoff-sync/handoff/transport"
	sshfs "github.com/handoff-sync/handoff/transport/ssh"
)

// ErrNotOK means the demo's sync ran but its outcome was not ok; the
// output says which host failed and why.
var ErrNotOK = errors.New("the demo sync did not finish ok")

// Options configure Run.
type Options struct {
	// Binary is the handoff binary to run each host's pull in, as `handoff
	// sync` does; "" pulls in this process.
	Binary string
	// Keep leaves the temporary directory in place for inspection.
	Keep bool
	// Log receives the sync's progress and diagnostics; nil discards them.
	Log *slog.Logger
	// Isolate, when set, is called after the temporary directory is laid
	// out and before anything dials, with an empty directory inside it
	// meant to be HOME. Pull workers resolve their SSH settings the way
	// `handoff sync` does, reading ~/.ssh/config and $SSH_AUTH_SOCK from
	// the environment they inherit; the handoff CLI uses Isolate to point
	// HOME at that directory and unset SSH_AUTH_SOCK in its own process so
	// that the user's ssh configuration and agent play no part. In-process
	// pulls need no help: Run dials them with an explicit empty ssh_config
	// and no agent. Run itself never changes the environment.
	Isolate func(home string) error
}

// Layout of the temporary directory, relative to it.
const (
	laptopHome = "laptop/home" // the embedded server's login directory
	laptopCode = "laptop/home/code"
	// laptopMirror is where the laptop gets canonical memory back.
	laptopMirror = "laptop/home/.openclaw/mirror"
	canonHome    = "canonical/home" // for Options.Isolate; stays empty
	sshDir       = "ssh"            // client key, known_hosts, an empty ssh_config
	workspace    = "workspace"
	manifestRel  = "writers.yaml"
)

// Run lays out a laptop with two repositories and a canonical host in a
// new temporary directory, starts an embedded SSH server that plays the
// laptop, runs a real sync against both hosts, and prints what happened:
// the summary, the receipt's path, every handoff's result and the
// workspace it produced. It returns [ErrNotOK] (wrapped) when the sync's
// outcome is not ok. See the package documentation for what it promises.
func Run(ctx context.Context, w io.Writer, opts Options) (err error) {
	dir, err := os.MkdirTemp("", "handoff-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() {
		if opts.Keep {
			fmt.Fprintf(w, "\nKept %s; remove it with: rm -rf %s\n", dir, dir)
			return
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("demo: remove %s: %w", dir, rmErr))
			return
		}
		fmt.Fprintf(w, "\nRemoved %s (run with --keep to look around).\n", dir)
	}()
	// Discovery never follows a symlink, so work below the real path.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(w, "handoff demo: everything happens in %s\n", dir)
	return run(ctx, w, dir, opts)
}

func run(ctx context.Context, w io.Writer, dir string, opts Options) error {
	at := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, d := range []string{laptopCode, canonHome, sshDir} {
		if err := os.MkdirAll(at(d), 0o700); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if err := writeFixtures(dir); err != nil {
		return fmt.Errorf("demo: write handoffs: %w", err)
	}
	if err := writeGitRepo(at(apiRepo)); err != nil {
		return fmt.Errorf("demo: git repository: %w", err)
	}
	clientKey, err := writeClientKey(at(sshDir + "/id_ed25519"))
	if err != nil {
		return fmt.Errorf("demo: client key: %w", err)
	}
	srv, err := StartServer(clientKey, at(laptopHome))
	if err != nil {
		return err
	}
	defer srv.Close()
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, srv.HostKey)
	if err := os.WriteFile(at(sshDir+"/known_hosts"), []byte(line+"\n"), 0o600); err != nil {
		return fmt.Errorf("demo: known_hosts: %w", err)
	}
	emptyConfig := at(sshDir + "/config")
	if err := os.WriteFile(emptyConfig, []byte("# The demo reads this empty file instead of ~/.ssh/config.\n"), 0o600); err != nil {
		return fmt.Errorf("demo: ssh_config: %w", err)
	}
	manifestPath := at(manifestRel)
	if err := os.WriteFile(manifestPath, []byte(manifestYAML(dir, srv.Port)), 0o600); err != nil {
		return fmt.Errorf("demo: manifest: %w", err)
	}
	m, err := manifest.Load(manifestPath)
	if err != nil {
		return fmt.Errorf("demo: manifest: %w", err)
	}
	if opts.Isolate != nil {
		if err := opts.Isolate(at(canonHome)); err != nil {
			return fmt.Errorf("demo: isolate: %w", err)
		}
	}

	fmt.Fprintf(w, "  laptop:    an embedded SSH server on %s (sftp only), host key %s\n", srv.Addr, ssh.FingerprintSHA256(srv.HostKey))
	fmt.Fprintf(w, "  canonical: this machine, reading one declared inbox\n")
	fmt.Fprintf(w, "  manifest:  %s\n", manifestPath)
	if opts.Binary != "" {
		fmt.Fprintf(w, "  pulls run in worker processes of %s\n", opts.Binary)
	} else {
		fmt.Fprintf(w, "  pulls run in this process\n")
	}
	fmt.Fprintln(w)

	// The first step of every setup: handoff init gives the workspace its
	// identity; sync refuses a directory without one.
	ws := at(workspace)
	id, _, err := handoff.Init(ctx, ws)
	if err != nil {
		return fmt.Errorf("demo: init: %w", err)
	}
	fmt.Fprintf(w, "handoff init: workspace %s, id %s\n\n", ws, id.ID)
	r, err := handoff.Sync(ctx, handoff.Options{
		Manifest:  m,
		Workspace: ws,
		Log:       opts.Log,
		Worker:    opts.Binary,
		Dial:      isolatedDial(emptyConfig, at(sshDir+"/no-agent"), opts.Log),
	})
	if err != nil {
		return fmt.Errorf("demo: sync: %w", err)
	}

	fmt.Fprint(w, r.Summary())
	fmt.Fprintf(w, "Receipt: %s\n", filepath.Join(ws, filepath.FromSlash(layout.ReceiptsDir), r.RunID+".json"))
	printHosts(w, dir, r)
	printHandoffs(w, r)
	stored := map[string]string{layout.LedgerFile: fmt.Sprintf("(the ledger: runs, results, and the exact bytes of every handoff pulled, %d in this run)", r.Counts.Pulled)}
	if err := printTree(w, "Workspace "+ws, ws, stored); err != nil {
		return err
	}
	if err := printTree(w, "Laptop after the run (sources archived, never deleted) "+at(laptopCode), at(laptopCode), nil); err != nil {
		return err
	}
	if err := printMirror(w, at(laptopMirror), r); err != nil {
		return err
	}
	if r.Outcome != receipts.OutcomeOK {
		return fmt.Errorf("demo: %w: outcome %s", ErrNotOK, r.Outcome)
	}
	return nil
}

// writeClientKey generates the ed25519 key the client logs in with,
// writes it unencrypted to path (0600, OpenSSH format) with its public half
// in path+".pub", and returns the public key.
func writeClientKey(path string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "handoff demo")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		return nil, err
	}
	return sshPub, nil
}

// manifestYAML is the writers manifest of the demo: every path absolute
// and inside dir.
func manifestYAML(dir string, port int) string {
	q := func(rel string) string { return strconv.Quote(filepath.Join(dir, filepath.FromSlash(rel))) }
	return fmt.Sprintf(`# The writers manifest of a handoff demo. Every path is inside the demo's
# temporary directory.
version: 1
workspace: %s
defaults:
  timeout: 1m
hosts:
  - name: canonical
    transport: local
    inboxes: [%s]
  - name: laptop
    transport: ssh
    max_file_size: %s
    ssh:
      host: 127.0.0.1
      port: %d
      user: %s
      identity_file: %s
      known_hosts: %s
      identities_only: true
      connect_timeout: 10s
    discover:
      - {root: %s, max_depth: 2}
    mirror: {path: %s}
`, q(workspace), q(canonicalInbox), laptopMaxFileSize, port, strconv.Quote(localUser()),
		q(sshDir+"/id_ed25519"), q(sshDir+"/known_hosts"), q(laptopCode), q(laptopMirror))
}

// printMirror shows what the laptop got back: its mirror of canonical
// memory, with the SHA256SUMS line an update-card takes its hash from.
func printMirror(w io.Writer, dir string, r *receipts.Receipt) error {
	for _, h := range r.Hosts {
		if m := h.Mirror; m != nil {
			fmt.Fprintf(w, "\nMirror on %s: %s, generation %d, %d file(s) sent\n", h.Name, m.Outcome, m.Generation, len(m.Sent))
			if m.Error != "" {
				fmt.Fprintf(w, "  error: %s\n", m.Error)
			}
		}
	}
	if err := printTree(w, "Laptop's mirror of canonical memory (read-only, with exact hashes) "+dir, dir, nil); err != nil {
		return err
	}
	sums, err := os.ReadFile(filepath.Join(dir, mirror.SumsFile))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s (sha256sum -c passes there; a card's line is its Expected card SHA256)\n", mirror.SumsFile)
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	return nil
}

func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "demo" // the embedded server accepts any user name
}

// isolatedDial dials in-process pulls as setup.Dial does, except
// that SSH hosts are resolved against sshConfig instead of ~/.ssh/config
// and use the agent socket noAgent, a path where no agent listens, instead
// of $SSH_AUTH_SOCK.
func isolatedDial(sshConfig, noAgent string, log *slog.Logger) handoff.Dialer {
	return func(ctx context.Context, h manifest.HostConfig) (transport.FS, error) {
		if h.Transport != manifest.TransportSSH || h.SSH == nil {
			return setup.Dial(ctx, h, log)
		}
		s := h.SSH
		cfg, err := sshfs.Resolve(s.Host, sshfs.Config{
			User:            s.User,
			Port:            s.Port,
			IdentityFiles:   []string{s.IdentityFile},
			KnownHostsFiles: []string{s.KnownHosts},
			IdentitiesOnly:  true,
			SSHConfigPath:   sshConfig,
			AgentSocket:     noAgent,
		})
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		fsys, err := sshfs.Dial(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		return fsys, nil
	}
}

func printHosts(w io.Writer, dir string, r *receipts.Receipt) {
	fmt.Fprintln(w, "\nHosts")
	for _, h := range r.Hosts {
		fmt.Fprintf(w, "  %s (%s): %s\n", h.Name, h.Transport, h.Outcome)
		if h.Error != "" {
			fmt.Fprintf(w, "    error: %s\n", h.Error)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, in := range h.Inboxes {
			p := in.Path
			if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
				p = filepath.ToSlash(rel)
			}
			fmt.Fprintf(tw, "    %s\t%s\t%d pending\t%d tracked by git\n", p, in.State, in.Pending, in.Tracked)
		}
		tw.Flush()
	}
}

func printHandoffs(w io.Writer, r *receipts.Receipt) {
	fmt.Fprintln(w, "\nHandoffs")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOST\tREPOSITORY\tNAME\tRESULT\tREASON\tTARGET OR ARCHIVED AS")
	for _, h := range r.Handoffs {
		where := h.Target
		if where == "" {
			where = h.ArchivedAs
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", h.Host, repoName(h.Inbox), h.Name, h.Result, dash(h.Reason), dash(where))
	}
	tw.Flush()
}

// repoName is the repository an inbox (<repo>/<harness>/memory-handoffs)
// belongs to.
func repoName(inbox string) string {
	return dash(path.Base(path.Dir(path.Dir(filepath.ToSlash(inbox)))))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printTree prints the files under root as sorted relative paths,
// skipping .git directories. A file named in notes (by its slash path
// relative to root) is followed by its note.
func printTree(w io.Writer, title, root string, notes map[string]string) error {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			files = append(files, rel+"/ (git repository, not listed)")
			return filepath.SkipDir
		case !d.IsDir() && notes[rel] != "":
			files = append(files, rel+" "+notes[rel])
		case !d.IsDir():
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demo: list %s: %w", root, err)
	}
	slices.Sort(files)
	fmt.Fprintf(w, "\n%s\n", title)
	for _, f := range files {
		fmt.Fprintf(w, "  %s\n", f)
	}
	return nil
}
