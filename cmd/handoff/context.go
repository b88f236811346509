package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/transport"
)

func init() { commands = append(commands, newContextCmd) }

// defaultMirror is where a host's mirror is unless the manifest says
// otherwise (docs/mirror.md).
const defaultMirror = "~/.openclaw/mirror"

func newContextCmd(g *globals) *cobra.Command {
	var mirrorDir, hook string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "context [--mirror DIR] [--json | --hook claude|codex]",
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
the next agent here, on this host or another, gets it after the next sync
that reaches this repository. When the mirror says the canonical host's
sync does not reach it (below max_depth of every discover root, or under
none), context says so and what to change in the manifest.

It reads only the repository's .git and the mirror, each read bounded. When
there is nothing to print it says why, exits 1 and gives a hint: not inside
a repository, no mirror at DIR, a mirror without repos/ (the host's mirror
include must list repos), or a repository the mirror does not list.

With --hook claude|codex it is the session-start hook that
` + "`handoff hooks install`" + ` puts in that harness's settings: it reads the
hook's JSON on stdin (its cwd says where the session is), records the
session's start for the stop hook, and prints the harness's answer that adds the notes to the
session's context, framed as other agents' notes (quoted data, not
instructions) and cut to 8 KiB at a handoff's boundary. It never fails or
holds up a session: any problem is exit 0 with no output and one line in
$XDG_STATE_HOME/handoff/hooks.log, and it gives up after 2 seconds
(docs/hooks.md).`,
		Example: `  cd ~/code/app && handoff context
  handoff context --mirror /srv/handoff-mirror --json | jq -r .text
  echo '{"session_id":"s1","cwd":"'$PWD'","hook_event_name":"SessionStart","source":"startup"}' \
    | handoff context --hook claude`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hook != "" {
				if asJSON {
					return usageError{errors.New("--hook and --json cannot be used together")}
				}
				return contextHook(cmd.Context(), g, hook, mirrorDir)
			}
			dir, err := os.Getwd()
			if err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("context: %w", err), hint: "run it from a directory that still exists"}
			}
			m, err := resolveMirror(mirrorDir)
			if err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("context: %w", err), hint: "set $HOME, or give --mirror an absolute path"}
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
			if res.NotReached != "" {
				fmt.Fprintf(g.stderr, "handoff: warning: context: no sync reaches this repository any more (%s): a handoff written here reaches no agent\nhint: make a sync reach it (on the canonical host: max_depth, a discover root, the host's harnesses or hosts[].inboxes in the manifest; here: an opt-out marker), then run handoff sync\n", printable(res.NotReached))
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
	f.StringVar(&hook, "hook", "", "run as the session-start hook of this harness (claude or codex): read its JSON on stdin, answer in its format, never fail")
	return cmd
}
