package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/review"
	"github.com/handoff-sync/handoff/receipts"
)

func init() { commands = append(commands, newReviewCmd) }

type reviewCmd struct {
	g            *globals
	manifestPath string
	workspace    string
	json, all    bool
	note         string
	dryRun       bool
	resume       bool
	allow        review.Allow
}

func newReviewCmd(g *globals) *cobra.Command {
	c := &reviewCmd{g: g}
	cmd := &cobra.Command{
		Use:   "review [list|show|accept|edit|reject]",
		Short: "List what waits for a person; show, accept, edit or reject it",
		Long: `review is the human's side: handoffs that were not safe to apply by
themselves wait in .handoff/review (review) or in the quarantine
(malformed). With no subcommand, or with list, it prints one line per waiting
item: its id (the first 12 hex digits of its SHA-256), age, reason code,
host, action and target, and title (a malformed one's parse error).

  handoff review show ID       the handoff (safe for a terminal), why it waits,
                               what resolves it, and a diff from the card as it
                               is now to what the handoff would leave
  handoff review accept ID     apply it now, through the ingester
  handoff review edit ID       change it in $VISUAL or $EDITOR, then apply it
  handoff review reject ID --note TEXT

accept, edit and reject hold the workspace lock (exit 75 while a sync holds
it) and record who decided, when, the note and the target's hashes in the
ledger, in a receipt of mode review, and in ` + "`handoff where`" + `.`,
		Example: "  handoff review\n  handoff review show 3f2a9c81d0e4\n  handoff review accept 3f2a9c81d0e4 --note 'merged by hand'\n  handoff review reject 3f2a9c81d0e4 --note 'obsolete'",
		Args:    cobra.NoArgs,
		RunE:    c.list,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&c.manifestPath, "manifest", "", "writers manifest, for its workspace (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	pf.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest; no manifest needed)")
	listFlags := func(cmd *cobra.Command) {
		cmd.Flags().BoolVar(&c.json, "json", false, "print the items as a JSON array")
		cmd.Flags().BoolVar(&c.all, "all", false, "include decided items, with their decision")
	}
	listFlags(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "One line per waiting item (the default)",
		Args:  cobra.NoArgs,
		RunE:  c.list,
	}
	listFlags(list)
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one item: the handoff, why it waits, what resolves it, the diff",
		Args:  cobra.ExactArgs(1),
		RunE:  c.show,
	}
	show.Flags().BoolVar(&c.json, "json", false, "print the item as JSON")
	allowFlags := func(cmd *cobra.Command) {
		f := cmd.Flags()
		f.BoolVar(&c.allow.Secret, "allow-secret", false, "let secret-like content through (it is not a secret)")
		f.BoolVar(&c.allow.Hidden, "allow-hidden", false, "let hidden or control characters through (they are meant)")
		f.BoolVar(&c.allow.Injection, "allow-injection", false, "let injection-like instructions to agents through (they are meant)")
	}
	accept := &cobra.Command{
		Use:   "accept ID",
		Short: "Apply a waiting item now, through the ingester",
		Long: `accept applies a waiting handoff now, through the ingester's own plan and
commit (backup, before and after hash, crash recovery, receipt). Your word
overrides exactly the rule that stopped it: a stale update applies to the
card as it is now, a create over an existing card replaces it, an update of a
missing card creates it; secret-like, hidden-character and injection-like
content needs --allow-secret, --allow-hidden or --allow-injection. What can
never be accepted as it is (an unsafe target, card and document in one, a
parse error, …) says so: use edit. --dry-run shows what would happen and
writes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: c.accept,
	}
	accept.Flags().StringVar(&c.note, "note", "", "why, for the record")
	accept.Flags().BoolVar(&c.dryRun, "dry-run", false, "show what accepting would do; write nothing")
	allowFlags(accept)
	edit := &cobra.Command{
		Use:   "edit ID",
		Short: "Change a waiting item in $VISUAL or $EDITOR, then apply it",
		Long: `edit opens a copy of the waiting handoff in $VISUAL (or $EDITOR) and holds
the workspace lock meanwhile. Once you save and quit, the edited text is
linted as ` + "`handoff lint`" + ` does; if clean, it is applied as a new handoff whose
source names the original (` + "`handoff where`" + ` shows both), with the same word
on the card's state as accept. If not, nothing is applied, the item still
waits, the problems are printed, and your text is kept in $TMPDIR. The next
edit of the item starts from that kept text with --resume; without it, on a
terminal it asks whether to, and otherwise it starts from the handoff and
says where your text is.`,
		Args: cobra.ExactArgs(1),
		RunE: c.edit,
	}
	edit.Flags().StringVar(&c.note, "note", "", "why, for the record")
	edit.Flags().BoolVar(&c.resume, "resume", false, "start from the text a failed edit of this item kept, not from the handoff")
	allowFlags(edit)
	reject := &cobra.Command{
		Use:   "reject ID --note TEXT",
		Short: "Take a waiting item out of the review inbox (its bytes stay stored, kept by prune for --older-than)",
		Args:  cobra.ExactArgs(1),
		RunE:  c.reject,
	}
	reject.Flags().StringVar(&c.note, "note", "", "why (required)")
	cmd.AddCommand(list, show, accept, edit, reject)
	return cmd
}

// where resolves the workspace (and the manifest, for the receipt).
func (c *reviewCmd) where() (review.Options, error) {
	var o review.Options
	ws := c.workspace
	if ws == "" || c.manifestPath != "" {
		m, err := loadManifest(c.manifestPath)
		if err != nil {
			return o, err
		}
		o.Manifest = receipts.Manifest{Path: m.Path, SHA256: m.SHA256}
		o.OpenClaw = ingest.OpenClawOptions{Layout: m.OpenClaw.Layout, Config: m.OpenClaw.Config, CardIndex: m.OpenClaw.CardIndexOn()}
		if ws == "" {
			ws = m.Workspace
		}
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return o, err
	}
	o.Workspace = ws
	o.Log = c.g.logger()
	return o, nil
}

// fail maps review's errors to the exit-code contract; the hints are
// review's (review.Advise).
func (c *reviewCmd) fail(ws string, err error) error {
	if err == nil {
		return nil
	}
	kind, hint, err := review.Advise(err, ws, c.allow)
	code := map[review.Kind]int{review.KindLocked: exitLocked, review.KindUsage: exitUsage, review.KindFailed: exitFailed}[kind]
	if code == 0 {
		return err
	}
	return &exitError{code: code, err: err, hint: hint}
}
