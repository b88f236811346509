package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/layout"
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
themselves wait in memory/handoff-inbox (review) or in the quarantine
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
		Short: "Take a waiting item out of the review inbox (its bytes stay in the spool, kept by prune for --older-than)",
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

// fail maps review's errors to the exit-code contract.
func (c *reviewCmd) fail(ws string, err error) error {
	var amb *review.AmbiguousError
	var bad *review.BadIDError
	var dec *review.DecidedError
	var blk *review.BlockedError
	var lnt *review.LintError
	var nk *review.NoKeptError
	var unc *review.UnchangedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, review.ErrLocked):
		return &exitError{code: exitLocked, err: err,
			hint: "a sync or another `handoff review` is using the workspace; try again when it is done (`handoff doctor` names the holder)"}
	case errors.Is(err, review.ErrNoLedger):
		return &exitError{code: exitFailed, err: fmt.Errorf("no ledger in %s: no sync has stored anything in this workspace, so nothing waits", ws),
			hint: "run `handoff sync`, or name the workspace the timer uses with --workspace (or --manifest)"}
	case errors.As(err, &amb), errors.As(err, &bad):
		return &exitError{code: exitUsage, err: err, hint: "`handoff review --all` lists every item with its id"}
	case errors.Is(err, review.ErrNotFound):
		return &exitError{code: exitFailed, err: err, hint: "`handoff review --all` lists every item; `handoff where NAME` finds any handoff"}
	case errors.As(err, &dec):
		return &exitError{code: exitFailed, err: err, hint: "`handoff where " + dec.Item.ID + "` shows the decision"}
	case errors.As(err, &blk):
		err = withProblems(err, blk.Proposal.Blocking)
		hint := ""
		if flags := blk.Proposal.Flags(); len(flags) > 0 && !blk.Proposal.NeedsEdit() {
			hint = "if it is meant, `" + review.AcceptCommand(blk.Item.ID, mergeFlags(c.allow, flags)) + "`; or `handoff review edit " + blk.Item.ID + "` to change it"
		} else {
			hint = "it cannot be accepted as it is: `handoff review edit " + blk.Item.ID + "` to fix it, or `handoff review reject " + blk.Item.ID + " --note TEXT`"
		}
		return &exitError{code: exitFailed, err: err, hint: hint}
	case errors.As(err, &lnt):
		err = withProblems(err, lnt.Problems)
		if len(lnt.Flags) > 0 {
			return &exitError{code: exitFailed, err: err,
				hint: fmt.Sprintf("your edited text is kept in %s; if it is meant, `handoff review edit %s --resume --%s` applies it; else `handoff review edit %s --resume` to change it further",
					lnt.Kept, lnt.Item.ID, strings.Join(lnt.Flags, " --"), lnt.Item.ID)}
		}
		return &exitError{code: exitFailed, err: err,
			hint: fmt.Sprintf("your edited text is kept in %s; `handoff review edit %s --resume` starts from it (or `handoff lint` your copy)", lnt.Kept, lnt.Item.ID)}
	case errors.As(err, &unc):
		id := unc.Item.ID
		if unc.NeedsEdit {
			return &exitError{code: exitFailed, err: err,
				hint: "it cannot be accepted as it is: `handoff review edit " + id + "` and change it, or `handoff review reject " + id + " --note TEXT`"}
		}
		hint := "`" + review.AcceptCommand(id, unc.Flags) + "` applies it as it is"
		if len(unc.Flags) > 0 {
			hint += " (if its content is meant)"
		}
		return &exitError{code: exitFailed, err: err, hint: hint + "; `handoff review edit " + id + "` to change it"}
	case errors.As(err, &nk):
		return &exitError{code: exitFailed, err: err,
			hint: "`handoff review edit " + nk.Item.ID + "` starts from the handoff"}
	}
	return err
}

// mergeFlags returns the allow flags given, then the others flags names,
// each once: the flags the next command needs.
func mergeFlags(a review.Allow, flags []string) []string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{a.Secret, "allow-secret"}, {a.Hidden, "allow-hidden"}, {a.Injection, "allow-injection"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	for _, f := range flags {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// withProblems adds the problems to err's message, one an indented line,
// safe for a terminal.
func withProblems(err error, ps []ingest.Problem) error {
	msg := err.Error()
	for _, p := range ps {
		msg += fmt.Sprintf("\n  %s: %s", p.Reason, review.SafeLine(p.Message))
	}
	return fmt.Errorf("%s", msg)
}

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
	if len(its) == 0 {
		if c.all {
			fmt.Fprintln(c.g.stdout, "nothing waits for review, and nothing was decided")
		} else {
			fmt.Fprintln(c.g.stdout, "nothing waits for review")
		}
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.g.stdout, 0, 0, 2, ' ', 0)
	head := "ID\tAGE\tREASON\tHOST\tACTION → TARGET\tTITLE"
	if c.all {
		head += "\tSTATE"
	}
	fmt.Fprintln(tw, head)
	for _, it := range its {
		target := it.Target
		if target == "" {
			target = "(none)"
		}
		what := it.Action + " → " + target
		title := it.Title
		if it.ParseError != "" && it.Result == ingest.ResultMalformed {
			what, title = "(malformed)", it.ParseError
		}
		if it.Action == "" && it.Target == "" && what != "(malformed)" {
			what = "-"
		}
		if n := len(it.Versions) + 1; n > 1 {
			title = fmt.Sprintf("[version %d of %d] %s", versionIndex(its, it), n, title)
		}
		line := strings.Join([]string{it.ID, ageOf(now, it.Since), it.Reason, review.SafeLine(it.Host), review.SafeLine(what), review.SafeLine(clipText(title, 60))}, "\t")
		if c.all {
			line += "\t" + stateOf(it)
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	said := map[string]bool{}
	for _, it := range its {
		if len(it.Versions) == 0 || said[it.ID] {
			continue
		}
		ids := []string{it.ID}
		for _, v := range it.Versions {
			ids = append(ids, v.ID)
			said[v.ID] = true
		}
		fmt.Fprintf(c.g.stdout, "%s from %s was rewritten in place: %d versions (%s) are one item; accepting or editing one records the others that wait as superseded\n",
			review.SafeLine(it.Name), review.SafeLine(it.Host), len(ids), strings.Join(ids, ", "))
	}
	return nil
}

// versionIndex is it's place (from 1) among its versions in its, which
// come oldest first.
func versionIndex(its []review.Item, it review.Item) int {
	n := 1
	for _, o := range its {
		if o.ID == it.ID {
			return n
		}
		for _, v := range it.Versions {
			if o.ID == v.ID {
				n++
			}
		}
	}
	return n
}

func stateOf(it review.Item) string {
	d := it.Decision
	if d == nil || it.State == "waiting" {
		return it.State
	}
	return fmt.Sprintf("%s by %s %s", it.State, review.SafeLine(d.By), d.At.UTC().Format(time.RFC3339))
}

// ageOf renders how long ago t was as a person reads an age.
func ageOf(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (c *reviewCmd) show(cmd *cobra.Command, args []string) error {
	o, err := c.where()
	if err != nil {
		return err
	}
	d, err := review.Show(cmd.Context(), o.Workspace, args[0])
	if err != nil {
		return c.fail(o.Workspace, err)
	}
	if c.json {
		return c.showJSON(d)
	}
	w := c.g.stdout
	it := d.Item
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-10s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	state := it.State
	if state == "waiting" {
		state = "waiting " + ageOf(time.Now(), it.Since)
	}
	fmt.Fprintf(w, "%s  %s (%s)\n", it.ID, it.Result, state)
	line("from", "%s:%s", review.SafeLine(it.Host), review.SafeLine(filepath.Join(it.Inbox, it.Name)))
	line("sha256", "%s (%d bytes)", it.SHA256, it.Size)
	line("reason", "%s: %s", it.Reason, review.SafeLine(d.Why))
	line("resolve", "%s", review.SafeLine(d.Resolve))
	pr := d.Proposal
	if it.Action != "" || it.Target != "" {
		line("action", "%s → %s", review.SafeLine(it.Action), review.SafeLine(it.Target))
	}
	if pr.Target != "" {
		now := "(absent)"
		if pr.Exists {
			now = pr.Before
		}
		line("target", "%s, now %s", pr.Target, now)
		if pr.Handoff != nil && pr.Handoff.Card != nil && pr.Handoff.Card.ExpectedSHA256 != "" {
			line("expected", "%s (what the writer read)", review.SafeLine(pr.Handoff.Card.ExpectedSHA256))
		}
	}
	if it.Draft != "" && it.State == "waiting" {
		note := ""
		if it.DraftEdited {
			note = " (edited by hand: accept applies the handoff as stored; edit starts from your edited draft)"
		}
		line("draft", "%s%s", review.SafeLine(it.Draft), note)
	}
	for _, x := range d.Decisions {
		line("decision", "%s", describeDecision(x))
	}
	if len(pr.Problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range pr.Problems {
			need := ""
			switch {
			case ingest.ScreenFlag(p.Reason) != "":
				need = " [accept needs --" + ingest.ScreenFlag(p.Reason) + "]"
			case ingest.IsWorkspaceReason(p.Reason):
				need = " [accept overrides this]"
			default:
				need = " [needs an edit]"
			}
			fmt.Fprintf(w, "  %s: %s%s\n", p.Reason, review.SafeLine(p.Message), need)
		}
	}
	switch {
	case pr.Identical:
		fmt.Fprintf(w, "\n%s already holds exactly this content: accepting it writes nothing.\n", pr.Target)
	case d.Diff != "" && pr.Kind == "document":
		fmt.Fprintf(w, "\nWould append %d line(s) to the end of %s:\n", len(strings.Split(strings.TrimRight(string(pr.Handoff.Document.Content), "\n"), "\n")), pr.Target)
		fmt.Fprint(w, review.Safe(d.Diff))
	case d.Diff != "":
		if pr.Exists {
			fmt.Fprintf(w, "\nThe handoff replaces the whole card")
			if d.Lost > 0 {
				fmt.Fprintf(w, ": %d line(s) of the card as it is now are not in it (marked -)", d.Lost)
			}
			fmt.Fprintln(w, ":")
		} else {
			fmt.Fprintf(w, "\nThe handoff creates %s:\n", pr.Target)
		}
		fmt.Fprint(w, review.Safe(d.Diff))
	}
	if e := d.Earlier; e != nil {
		fmt.Fprintf(w, "\nA revision: its writer rewrote %s after version %s, which was %s", review.SafeLine(it.Name), e.ID, e.Result)
		switch e.Result {
		case receipts.ResultPromoted:
			fmt.Fprintf(w, ": it already wrote %s (to sha256 %s)", review.SafeLine(e.Target), e.After)
		case receipts.ResultRouted:
			fmt.Fprintf(w, ": it already appended its text to the end of %s (then sha256 %s)", review.SafeLine(e.Target), e.After)
		}
		fmt.Fprintln(w, ".")
		for _, x := range it.Versions {
			fmt.Fprintf(w, "Another version waits too: %s (%s); accepting or editing one records the others as superseded.\n", x.ID, x.State)
		}
		if e.Diff != "" {
			fmt.Fprintln(w, "What the revision changed:")
			fmt.Fprint(w, review.Safe(e.Diff))
		}
	}
	fmt.Fprintf(w, "\nThe handoff, exact bytes (control and invisible characters shown as escapes):\n")
	text := review.Safe(string(d.Data))
	for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(w, "│ %s", strings.TrimSuffix(l, "\n"))
		fmt.Fprintln(w)
	}
	return nil
}

func describeDecision(x review.Decision) string {
	s := fmt.Sprintf("%s by %s at %s", x.Decision, review.SafeLine(x.By), x.At.UTC().Format(time.RFC3339))
	switch x.State {
	case "started":
		s += " (interrupted; the next review command or sync finishes it)"
	case "abandoned":
		s += " (abandoned: the target changed while it was written)"
	}
	if x.Note != "" {
		s += fmt.Sprintf(", note %q", x.Note)
	}
	if len(x.Overrides) > 0 {
		s += ", overriding " + strings.Join(x.Overrides, ", ")
	}
	if x.EditedSHA256 != "" {
		s += ", into " + x.EditedSHA256[:12]
	}
	return s
}

func (c *reviewCmd) showJSON(d *review.Detail) error {
	type problem struct {
		Reason  string `json:"reason"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	}
	pr := d.Proposal
	out := struct {
		Item      review.Item       `json:"item"`
		Why       string            `json:"why"`
		Resolve   string            `json:"resolve"`
		Problems  []problem         `json:"problems"`
		Needs     []string          `json:"needs"`
		NeedsEdit bool              `json:"needs_edit"`
		Target    string            `json:"target,omitempty"`
		Before    string            `json:"before_sha256,omitempty"`
		After     string            `json:"after_sha256,omitempty"`
		Diff      string            `json:"diff"`
		Content   string            `json:"content"`
		Decisions []review.Decision `json:"decisions"`
		Earlier   *review.Earlier   `json:"earlier,omitempty"`
	}{Item: d.Item, Why: d.Why, Resolve: d.Resolve, Problems: []problem{}, Needs: []string{}, NeedsEdit: pr.NeedsEdit(),
		Target: pr.Target, Before: pr.Before, After: pr.After, Diff: d.Diff, Content: string(d.Data), Decisions: d.Decisions,
		Earlier: d.Earlier}
	for _, p := range pr.Problems {
		out.Problems = append(out.Problems, problem{p.Reason, p.Field, p.Message})
	}
	if f := pr.Flags(); f != nil {
		out.Needs = f
	}
	if out.Decisions == nil {
		out.Decisions = []review.Decision{}
	}
	enc := json.NewEncoder(c.g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
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
		fmt.Fprintf(w, "%s was accepted already (%s); nothing to do\n", out.Item.ID, stateOf(out.Item))
		return nil
	}
	if out.DryRun {
		pr := out.Proposal
		fmt.Fprintf(w, "[dry-run] would accept %s: %s\n", out.Item.ID, change(pr.Kind, pr.Target, pr.Before, pr.After, pr.Identical))
		fmt.Fprint(w, review.Safe(out.Diff))
		fmt.Fprintln(w, "[dry-run] nothing was written")
		return nil
	}
	return c.applied(w, "accepted", out)
}

// applied reports an accept's or an edit's applied entry.
func (c *reviewCmd) applied(w io.Writer, verb string, out *review.Outcome) error {
	e := out.Entry
	if e.Result == ingest.ResultReview {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s was not applied: its target changed while it was being written; it waits again (%s)", out.Item.ID, e.Reason),
			hint: "`handoff review show " + out.Item.ID + "` shows the target as it is now; accept again to apply it to that"}
	}
	what := verb + " " + out.Item.ID
	if out.Edited != "" {
		what += " into " + out.Edited[:12]
	}
	fmt.Fprintf(w, "%s: %s %s (%s)\n", what, e.Result, e.Target, hashes(e.BeforeSHA256, e.AfterSHA256))
	for _, id := range out.Superseded {
		fmt.Fprintf(w, "%s, another version of it, waits no more: recorded as superseded (its bytes stay; `handoff review show %s`)\n", id, id)
	}
	if out.Receipt != "" {
		fmt.Fprintf(w, "receipt: %s\n", out.Receipt)
	}
	return nil
}

func change(kind, target, before, after string, identical bool) string {
	switch {
	case identical:
		return target + " already holds exactly this content: nothing would be written"
	case kind == "document":
		return "append to " + target + " (" + hashes(before, after) + ")"
	case before == "":
		return "create " + target + " (" + hashes(before, after) + ")"
	}
	return "replace " + target + " (" + hashes(before, after) + ")"
}

func hashes(before, after string) string {
	b := "new file"
	if before != "" {
		b = before[:12]
	}
	a := ""
	if after != "" {
		a = after[:12]
	}
	return b + " → " + a
}

func (c *reviewCmd) reject(cmd *cobra.Command, args []string) error {
	if strings.TrimSpace(c.note) == "" {
		return usageError{errors.New("reject needs --note TEXT: say why, for the record")}
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
		fmt.Fprintf(c.g.stdout, "%s was rejected already (%s); nothing to do\n", out.Item.ID, stateOf(out.Item))
		return nil
	}
	where := "its draft " + out.Item.Draft + " is removed"
	if out.Item.Draft == "" {
		where = "it leaves the quarantine"
	}
	fmt.Fprintf(c.g.stdout, "rejected %s: %s; its bytes stay in %s/%s.md\n", out.Item.ID, review.SafeLine(where), layout.SpoolDir, out.Item.SHA256)
	fmt.Fprintf(c.g.stdout, "`handoff prune` keeps them at least until the rejection is older than its --older-than; meanwhile `handoff review show %s` shows them\n", out.Item.ID)
	if out.Receipt != "" {
		fmt.Fprintf(c.g.stdout, "receipt: %s\n", out.Receipt)
	}
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
