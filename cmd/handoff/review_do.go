package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/review"
)

// The review subcommands: each calls internal/review, prints its words
// (review.Write*) and maps its errors to exit codes (fail).

// list prints what waits (with --all, what was decided too).
func (c *reviewCmd) list(cmd *cobra.Command, _ []string) error {
	o, err := c.where()
	if err != nil {
		return err
	}
	its, err := review.List(cmd.Context(), o.Workspace, c.all)
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	if c.json {
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		if its == nil {
			its = []review.Item{}
		}
		return enc.Encode(its)
	}
	return review.WriteList(c.g.stdout, its, c.all, time.Now())
}

func (c *reviewCmd) show(cmd *cobra.Command, args []string) error {
	o, err := c.where()
	if err != nil {
		return err
	}
	d, err := review.Show(cmd.Context(), o, args[0])
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	if c.json {
		return c.showJSON(d)
	}
	review.WriteDetail(c.g.stdout, d, time.Now())
	return nil
}

func (c *reviewCmd) showJSON(d *review.Detail) error {
	enc := json.NewEncoder(c.g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(review.DetailJSON(d))
}

func (c *reviewCmd) accept(cmd *cobra.Command, args []string) error {
	o, err := c.where()
	if err != nil {
		return err
	}
	out, err := review.Accept(cmd.Context(), o, args[0], review.AcceptOptions{Note: c.note, DryRun: c.dryRun, Allow: c.allow})
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	w := c.g.stdout
	if out.Already {
		fmt.Fprintf(w, "%s was accepted already (%s); nothing to do\n", out.Item.ID, review.StateOf(out.Item))
		return nil
	}
	if out.DryRun {
		pr := out.Proposal
		fmt.Fprintf(w, "[dry-run] would accept %s: %s\n", out.Item.ID, review.Change(pr.Kind, pr.Target, pr.Before, pr.After, pr.Identical))
		fmt.Fprint(w, review.Safe(out.Diff))
		fmt.Fprintln(w, "[dry-run] nothing was written")
		return nil
	}
	return c.applied(w, "accepted", out)
}

// applied reports an accept's or an edit's applied entry; one that went
// back to review (its target changed while it was written) fails.
func (c *reviewCmd) applied(w io.Writer, verb string, out *review.Outcome) error {
	if e := out.Entry; e.Result == ingest.ResultReview {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s was not applied: its target changed while it was being written; it waits again (%s)", out.Item.ID, e.Reason),
			hint: "`handoff review show " + out.Item.ID + "` shows the target as it is now; accept again to apply it to that"}
	}
	review.WriteApplied(w, verb, out)
	return nil
}

func (c *reviewCmd) reject(cmd *cobra.Command, args []string) error {
	if strings.TrimSpace(c.note) == "" {
		return &exitError{code: exitUsage, err: errors.New("reject needs --note TEXT: say why, for the record"),
			hint: fmt.Sprintf("handoff review reject %s --note 'why: obsolete, wrong repository, merged by hand…' (`handoff review show %s` first, to read it)",
				review.SafeLine(args[0]), review.SafeLine(args[0]))}
	}
	o, err := c.where()
	if err != nil {
		return err
	}
	out, err := review.Reject(cmd.Context(), o, args[0], c.note)
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	if out.Already {
		fmt.Fprintf(c.g.stdout, "%s was rejected already (%s); nothing to do\n", out.Item.ID, review.StateOf(out.Item))
		return nil
	}
	review.WriteRejected(c.g.stdout, out)
	return nil
}

func (c *reviewCmd) edit(cmd *cobra.Command, args []string) error {
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if strings.TrimSpace(editor) == "" {
		return usageError{errors.New("edit needs an editor: set $VISUAL or $EDITOR (such as EDITOR=vi)")}
	}
	o, err := c.where()
	if err != nil {
		return err
	}
	run := func(path string) error {
		// As git runs it: through the shell, so that EDITOR may carry
		// arguments ("code --wait").
		e := exec.CommandContext(cmd.Context(), "/bin/sh", "-c", editor+` "$@"`, editor, path)
		e.Stdin, e.Stdout, e.Stderr = c.g.stdin, c.g.stdout, c.g.stderr
		if f, ok := c.g.stdin.(*os.File); ok {
			e.Stdin = f
		}
		return e.Run()
	}
	out, err := review.Edit(cmd.Context(), o, args[0], review.EditOptions{Note: c.note, Allow: c.allow, Editor: run, Resume: c.resume, Offer: c.offerKept})
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	return c.applied(c.g.stdout, "edited", out)
}

// offerKept asks, on a terminal, whether an edit starts from the text an
// earlier failed edit kept; elsewhere it says where that text is and
// starts from the handoff.
func (c *reviewCmd) offerKept(k review.Kept) bool {
	saved := k.Saved.Local().Format("2006-01-02 15:04")
	in, ok := c.g.stdin.(*os.File)
	if !ok || !isTerminal(in) {
		fmt.Fprintf(c.g.stderr, "handoff: starting from the handoff; the text of an earlier edit (saved %s) is kept in %s\nhint: `handoff review edit %s --resume` starts from that text instead\n", saved, k.Path, k.ID)
		return false
	}
	fmt.Fprintf(c.g.stderr, "The text of an earlier edit of this item (saved %s) is kept in %s.\nStart from it? [Y/n] ", saved, k.Path)
	line, _ := bufio.NewReader(in).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "" || answer == "y" || answer == "yes"
}
