package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/transport"
)

func init() { commands = append(commands, newContextCmd) }

// defaultMirror is where a host's mirror is unless the manifest says
// otherwise (docs/mirror.md).
const defaultMirror = "~/.openclaw/mirror"

func newContextCmd(g *globals) *cobra.Command {
	var mirrorDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "context [--mirror DIR] [--json]",
		Short: "Print what the last agents in this repository left, from the host's mirror",
		Long: `context runs on a writer host, inside a repository. It works out which
repository this is from the repository's own git config (its origin remote,
normalized, else this host and the repository's path), exactly as the
canonical host does, and prints the repository's repos/<slug>/RECENT.md from
the host's mirror of canonical memory: its newest handoffs from every host
and harness, newest first, with their summaries, durable facts, open
questions and next steps, and what became of each.

Run it when a session starts. When a session stops, write a handoff with
## Open questions and ## Next steps (and ## Continues to carry a thread on):
the next agent here, on this host or another, gets it after the next sync.

It reads only the repository's .git and the mirror, each read bounded. When
there is nothing to print it says why, exits 1 and gives a hint: not inside
a repository, no mirror at DIR, a mirror without repos/ (the host's mirror
include must list repos), or a repository the mirror does not list.`,
		Example: `  cd ~/code/app && handoff context
  handoff context --mirror /srv/handoff-mirror --json | jq -r .text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.Getwd()
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("context: %w", err), hint: "run it from a directory that still exists"}
			}
			m := mirrorDir
			if m == "" || m == "~" || len(m) > 1 && m[:2] == "~/" {
				if m == "" {
					m = defaultMirror
				}
				home, err := os.UserHomeDir()
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("context: cannot expand %s: %w", m, err), hint: "set $HOME, or give --mirror an absolute path"}
				}
				m = filepath.Join(home, m[1:])
			}
			if m, err = filepath.Abs(m); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("context: %w", err), hint: "give --mirror an absolute path"}
			}
			res, err := continuity.Context(cmd.Context(), transport.NewLocal(), dir, m)
			if res != nil && res.Repo.Problem != "" {
				fmt.Fprintf(g.stderr, "handoff: warning: context: %s; the repository is known by this host and its path\n", printable(res.Repo.Problem))
			}
			var ce *continuity.ContextError
			if errors.As(err, &ce) {
				return &exitError{code: exitFailed, err: ce, hint: ce.Hint}
			}
			if err != nil {
				return err
			}
			if !res.Complete {
				fmt.Fprintf(g.stderr, "handoff: warning: context: a publish to %s was under way while it was read; run handoff context again for a consistent copy\n", m)
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprint(g.stdout, res.Text)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&mirrorDir, "mirror", "", "the host's mirror directory (default "+defaultMirror+")")
	f.BoolVar(&asJSON, "json", false, "print the repository, its slug, the mirror's generation and the text as JSON")
	return cmd
}
