package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/continuity"
	"github.com/handoff-sync/handoff/internal/harness"
	"github.com/handoff-sync/handoff/internal/harness/claude"
	"github.com/handoff-sync/handoff/internal/harness/codex"
	"github.com/handoff-sync/handoff/internal/harness/session"
	"github.com/handoff-sync/handoff/mirror"
	"github.com/handoff-sync/handoff/transport"
)

func init() { commands = append(commands, newHookCmd) }

// hookDeadline bounds a hook's whole run, reading its input included:
// well inside the shortest cap a harness puts on a hook (Codex's three
// seconds for its end-of-task hook), so a session is never held up.
const hookDeadline = 2 * time.Second

// hookHarnesses are the harnesses a hook answers for.
var hookHarnesses = []string{claude.Name, codex.Name}

func newHookCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Hooks a harness runs (installed by `handoff hooks install`)",
		Long: `hook holds the commands Claude Code and Codex run through the hooks
` + "`handoff hooks install`" + ` puts in their settings. The session-start hook is
` + "`handoff context --hook claude|codex`" + `; the stop hook is ` + "`handoff hook stop`" + `.
See docs/hooks.md.`,
	}
	var harnessName, mirrorDir string
	stop := &cobra.Command{
		Use:   "stop --harness claude|codex [--mirror DIR]",
		Short: "Ask once for a handoff when a session that changed files stops without one",
		Long: `stop is the Stop hook of Claude Code and Codex. It reads the hook's JSON on
stdin (session_id, cwd, stop_hook_active) and, when the session changed files
in a repository with an inbox and no handoff reached that inbox since the
session started (as its session-start hook recorded), answers
{"decision":"block","reason":"…"} once: the agent goes on and writes the
handoff the reason describes. It never asks when stop_hook_active is true,
twice in a session, outside a repository with an inbox, or for a session
that changed nothing. What "changed files" means is in docs/hooks.md.

It never fails a session: any problem is exit 0 with no output and one line
in $XDG_STATE_HOME/handoff/hooks.log, and it gives up after 2 seconds.`,
		Example: `  echo '{"session_id":"s1","cwd":"'$PWD'","hook_event_name":"Stop","stop_hook_active":false}' \
    | handoff hook stop --harness claude`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHook(cmd.Context(), g, "stop", harnessName, func(ctx context.Context, in session.Input, store *session.Store) ([]byte, error) {
				cwdRepo, err := continuity.FindRepo(ctx, transport.NewLocal(), in.Cwd)
				if err != nil {
					cwdRepo = ""
				}
				d, err := store.Stop(ctx, harnessName, in, cwdRepo)
				if err != nil || !d.Ask {
					return nil, err
				}
				store.Log("stop", harnessName, "asked for a handoff in %s (%s)", d.Inbox, d.Why)
				m, _ := resolveMirror(mirrorDir)
				if _, err := os.Stat(filepath.Join(m, mirror.SumsFile)); err != nil {
					m = ""
				}
				reason := session.Reason(d, m)
				if harnessName == codex.Name {
					return codex.BlockAnswer(reason), nil
				}
				return claude.BlockAnswer(reason), nil
			})
		},
	}
	f := stop.Flags()
	f.StringVar(&harnessName, "harness", "", "the harness that runs the hook: claude or codex")
	f.StringVar(&mirrorDir, "mirror", "", "the host's mirror directory, named in the reason (default "+defaultMirror+")")
	cmd.AddCommand(stop)
	return cmd
}

// runHook runs a hook's body with its input, within hookDeadline, and
// prints what it returns. It always returns nil: a problem (bad input, a
// panic, the deadline) is one line in the hooks' log and no output, so
// the harness goes on as if there were no hook.
func runHook(parent context.Context, g *globals, hook, harnessName string, body func(context.Context, session.Input, *session.Store) ([]byte, error)) error {
	store := &session.Store{}
	if dir, err := harness.StateDir(); err == nil {
		store.Dir = dir
	}
	valid := false
	for _, h := range hookHarnesses {
		valid = valid || h == harnessName
	}
	if !valid {
		store.Log(hook, harnessName, "unknown harness %q (claude or codex): the hook does nothing", harnessName)
		return nil
	}
	ctx, cancel := context.WithTimeout(parent, hookDeadline)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		in, err := readHookInput(ctx, g.stdin)
		if err != nil {
			done <- result{err: err}
			return
		}
		out, err := body(ctx, in, store)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			store.Log(hook, harnessName, "%v", r.err)
			return nil
		}
		if ctx.Err() != nil {
			store.Log(hook, harnessName, "gave up after %s: no answer", hookDeadline)
			return nil
		}
		if len(r.out) > 0 {
			if _, err := g.stdout.Write(r.out); err != nil {
				store.Log(hook, harnessName, "write the answer: %v", err)
			}
		}
	case <-ctx.Done():
		store.Log(hook, harnessName, "gave up after %s: no answer", hookDeadline)
	}
	return nil
}

// readHookInput reads the hook's JSON from stdin, giving up at ctx's
// deadline (a harness that never closes stdin does not hold the hook).
func readHookInput(ctx context.Context, r io.Reader) (session.Input, error) {
	type result struct {
		in  session.Input
		err error
	}
	ch := make(chan result, 1)
	go func() {
		in, err := session.ReadInput(r)
		ch <- result{in, err}
	}()
	select {
	case res := <-ch:
		return res.in, res.err
	case <-ctx.Done():
		return session.Input{}, fmt.Errorf("no input on stdin within %s", hookDeadline)
	}
}

// contextHook is `handoff context --hook H`: the session-start hook. It
// records the session's start and answers with the repository's notes
// from the mirror, framed and bounded; nothing when there are none.
func contextHook(ctx context.Context, g *globals, harnessName, mirrorFlag string) error {
	return runHook(ctx, g, "context", harnessName, func(ctx context.Context, in session.Input, store *session.Store) ([]byte, error) {
		fsys := transport.NewLocal()
		repo, err := continuity.FindRepo(ctx, fsys, in.Cwd)
		if err != nil {
			repo = ""
		}
		if _, err := store.Start(ctx, harnessName, in, repo); err != nil {
			store.Log("context", harnessName, "record the session's start: %v", err)
		}
		if repo == "" {
			return nil, nil
		}
		m, err := resolveMirror(mirrorFlag)
		if err != nil {
			return nil, err
		}
		res, err := continuity.Context(ctx, fsys, in.Cwd, m)
		if err != nil && (res == nil || res.NotReached == "") {
			return nil, fmt.Errorf("no notes for %s: %w", repo, err)
		}
		var text string
		if err != nil {
			// No notes, and no sync reaches the repository: the agent
			// and its person should know before work is handed off here.
			text = continuity.NotReachedNote(res.NotReached)
		} else {
			text = continuity.HookText(res, continuity.HookBudget)
		}
		if text == "" {
			return nil, nil
		}
		if ibs := session.Inboxes(repo); len(ibs) > 0 && res.NotReached == "" {
			text += fmt.Sprintf("\nWhen you finish (even when told to stop now), write a memory handoff into %s/ (`handoff template`) with ## Open questions and ## Next steps, for the next agent here.\n", session.PickInbox(ibs, harnessName))
		}
		if harnessName == codex.Name {
			return codex.ContextAnswer(text), nil
		}
		return claude.ContextAnswer(text), nil
	})
}

// resolveMirror is the mirror directory a flag names (default
// defaultMirror), with ~ expanded, made absolute.
func resolveMirror(flag string) (string, error) {
	m := flag
	if m == "" {
		m = defaultMirror
	}
	if m == "~" || len(m) > 1 && m[:2] == "~/" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand %s: %w", m, err)
		}
		m = filepath.Join(home, m[1:])
	}
	return filepath.Abs(m)
}
