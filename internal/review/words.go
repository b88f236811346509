package review

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/receipts"
)

// The words of the person's side: how an item, a detail, a decision and
// its outcome read on a terminal. cmd/handoff wires flags, JSON and exit
// codes around them.

// WriteList prints items one line each (review list; with all, their
// states), and a line for each item rewritten in place naming its
// versions.
func WriteList(w io.Writer, its []Item, all bool, now time.Time) error {
	if len(its) == 0 {
		if all {
			fmt.Fprintln(w, "nothing waits for review, and nothing was decided")
		} else {
			fmt.Fprintln(w, "nothing waits for review")
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "ID\tAGE\tREASON\tHOST\tACTION → TARGET\tTITLE"
	if all {
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
		if it.ParseError != "" && it.Result == receipts.ResultMalformed {
			what, title = "(malformed)", it.ParseError
		}
		if it.Action == "" && it.Target == "" && what != "(malformed)" {
			what = "-"
		}
		if n := len(it.Versions) + 1; n > 1 {
			title = fmt.Sprintf("[version %d of %d] %s", versionIndex(its, it), n, title)
		}
		line := strings.Join([]string{it.ID, AgeOf(now, it.Since), it.Reason, SafeLine(it.Host), SafeLine(what), SafeLine(clipText(title, 60))}, "\t")
		if all {
			line += "\t" + StateOf(it)
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
		fmt.Fprintf(w, "%s from %s was rewritten in place: %d versions (%s) are one item; accepting or editing one records the others that wait as superseded\n",
			SafeLine(it.Name), SafeLine(it.Host), len(ids), strings.Join(ids, ", "))
	}
	return nil
}

// WriteDetail prints one item as review show does: where it came from,
// why it waits and what resolves it, its target and decisions, its
// problems, the diff, for a revision what the earlier version did, and
// the exact bytes (safe for a terminal).
func WriteDetail(w io.Writer, d *Detail, now time.Time) {
	it := d.Item
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-10s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	state := it.State
	if state == "waiting" {
		state = "waiting " + AgeOf(now, it.Since)
	}
	fmt.Fprintf(w, "%s  %s (%s)\n", it.ID, it.Result, state)
	line("from", "%s:%s", SafeLine(it.Host), SafeLine(filepath.Join(it.Inbox, it.Name)))
	line("sha256", "%s (%d bytes)", it.SHA256, it.Size)
	line("reason", "%s: %s", it.Reason, SafeLine(d.Why))
	line("resolve", "%s", SafeLine(d.Resolve))
	pr := d.Proposal
	if it.Action != "" || it.Target != "" {
		line("action", "%s → %s", SafeLine(it.Action), SafeLine(it.Target))
	}
	if pr.Target != "" {
		now := "(absent)"
		if pr.Exists {
			now = pr.Before
		}
		line("target", "%s, now %s", pr.Target, now)
		if pr.Handoff != nil && pr.Handoff.Card != nil && pr.Handoff.Card.ExpectedSHA256 != "" {
			line("expected", "%s (what the writer read)", SafeLine(pr.Handoff.Card.ExpectedSHA256))
		}
	}
	if it.Draft != "" && it.State == "waiting" {
		note := ""
		if it.DraftEdited {
			note = " (edited by hand: accept applies the handoff as stored; edit starts from your edited draft)"
		}
		line("draft", "%s%s", SafeLine(it.Draft), note)
	}
	for _, x := range d.Decisions {
		line("decision", "%s", DescribeDecision(x))
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
			fmt.Fprintf(w, "  %s: %s%s\n", p.Reason, SafeLine(p.Message), need)
		}
	}
	switch {
	case pr.Identical:
		fmt.Fprintf(w, "\n%s already holds exactly this content: accepting it writes nothing.\n", pr.Target)
	case d.Diff != "" && pr.Replaces != "":
		fmt.Fprintf(w, "\nWould replace the text version %s appended to %s with this version's, in place (backed up first):\n", pr.Replaces[:12], pr.Target)
		fmt.Fprint(w, Safe(d.Diff))
	case d.Diff != "" && pr.Kind == "document":
		fmt.Fprintf(w, "\nWould append %d line(s) to the end of %s", d.Added, pr.Target)
		if pr.AppendOnly != "" {
			fmt.Fprintf(w, " (it cannot replace the earlier version's text: %s)", SafeLine(pr.AppendOnly))
		}
		fmt.Fprintln(w, ":")
		fmt.Fprint(w, Safe(d.Diff))
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
		fmt.Fprint(w, Safe(d.Diff))
	}
	if e := d.Earlier; e != nil {
		fmt.Fprintf(w, "\nA revision: its writer rewrote %s after version %s, which was %s", SafeLine(it.Name), e.ID, e.Result)
		switch e.Result {
		case receipts.ResultPromoted:
			fmt.Fprintf(w, ": it already wrote %s (to sha256 %s)", SafeLine(e.Target), e.After)
		case receipts.ResultRouted:
			fmt.Fprintf(w, ": it already appended its text to the end of %s (then sha256 %s)", SafeLine(e.Target), e.After)
		}
		fmt.Fprintln(w, ".")
		for _, x := range it.Versions {
			fmt.Fprintf(w, "Another version waits too: %s (%s); accepting or editing one records the others as superseded.\n", x.ID, x.State)
		}
		if e.Diff != "" {
			fmt.Fprintln(w, "What the revision changed:")
			fmt.Fprint(w, Safe(e.Diff))
		}
	}
	fmt.Fprintf(w, "\nThe handoff, exact bytes (control and invisible characters shown as escapes):\n")
	text := Safe(string(d.Data))
	for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(w, "│ %s", strings.TrimSuffix(l, "\n"))
		fmt.Fprintln(w)
	}
}

// DetailJSON is what review show --json prints.
func DetailJSON(d *Detail) any {
	type problem struct {
		Reason  string `json:"reason"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	}
	pr := d.Proposal
	out := struct {
		Item      Item       `json:"item"`
		Why       string     `json:"why"`
		Resolve   string     `json:"resolve"`
		Problems  []problem  `json:"problems"`
		Needs     []string   `json:"needs"`
		NeedsEdit bool       `json:"needs_edit"`
		Target    string     `json:"target,omitempty"`
		Before    string     `json:"before_sha256,omitempty"`
		After     string     `json:"after_sha256,omitempty"`
		Diff      string     `json:"diff"`
		Content   string     `json:"content"`
		Decisions []Decision `json:"decisions"`
		Earlier   *Earlier   `json:"earlier,omitempty"`
		// Replaces: the earlier version whose appended text accept
		// replaces in place; AppendOnly: why accept can only append.
		Replaces   string `json:"replaces,omitempty"`
		AppendOnly string `json:"append_only,omitempty"`
	}{Item: d.Item, Why: d.Why, Resolve: d.Resolve, Problems: []problem{}, Needs: []string{}, NeedsEdit: pr.NeedsEdit(),
		Target: pr.Target, Before: pr.Before, After: pr.After, Diff: d.Diff, Content: string(d.Data), Decisions: d.Decisions,
		Earlier: d.Earlier, Replaces: pr.Replaces, AppendOnly: pr.AppendOnly}
	for _, p := range pr.Problems {
		out.Problems = append(out.Problems, problem{p.Reason, p.Field, p.Message})
	}
	if f := pr.Flags(); f != nil {
		out.Needs = f
	}
	if out.Decisions == nil {
		out.Decisions = []Decision{}
	}
	return out
}

// WriteApplied prints an accept's or an edit's applied entry, the
// versions it superseded and the receipt.
func WriteApplied(w io.Writer, verb string, out *Outcome) {
	e := out.Entry
	what := verb + " " + out.Item.ID
	if out.Edited != "" {
		what += " into " + out.Edited[:12]
	}
	fmt.Fprintf(w, "%s: %s %s (%s)\n", what, e.Result, e.Target, Hashes(e.BeforeSHA256, e.AfterSHA256))
	if pr := out.Proposal; pr != nil && pr.Replaces != "" && e.Result != ingest.ResultReview {
		fmt.Fprintf(w, "the text version %s appended was replaced in place; the document as it was is kept in .handoff/backups\n", pr.Replaces[:12])
	}
	for _, id := range out.Superseded {
		fmt.Fprintf(w, "%s, another version of it, waits no more: recorded as superseded (its bytes stay; `handoff review show %s`)\n", id, id)
	}
	if out.Receipt != "" {
		fmt.Fprintf(w, "receipt: %s\n", out.Receipt)
	}
}

// WriteRejected prints a reject's outcome: where the item went, that its
// bytes stay, and what prune keeps.
func WriteRejected(w io.Writer, out *Outcome) {
	where := "its draft " + out.Item.Draft + " is removed"
	if out.Item.Draft == "" {
		where = "it leaves the quarantine"
	}
	fmt.Fprintf(w, "rejected %s: %s; its bytes stay stored (`handoff where --bytes %s` prints them)\n", out.Item.ID, SafeLine(where), out.Item.ID)
	fmt.Fprintf(w, "`handoff prune` keeps them at least until the rejection is older than its --older-than; meanwhile `handoff review show %s` shows them\n", out.Item.ID)
	if out.Receipt != "" {
		fmt.Fprintf(w, "receipt: %s\n", out.Receipt)
	}
}

// versionIndex is it's place (from 1) among its versions in its, which
// come oldest first.
func versionIndex(its []Item, it Item) int {
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

// StateOf is an item's state as review list --all shows it: waiting, or
// the decision with who and when.
func StateOf(it Item) string {
	d := it.Decision
	if d == nil || it.State == "waiting" {
		return it.State
	}
	return fmt.Sprintf("%s by %s %s", it.State, SafeLine(d.By), d.At.UTC().Format(time.RFC3339))
}

// AgeOf renders how long ago t was as a person reads an age.
func AgeOf(now, t time.Time) string {
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

// DescribeDecision is one decision in a line.
func DescribeDecision(x Decision) string {
	s := fmt.Sprintf("%s by %s at %s", x.Decision, SafeLine(x.By), x.At.UTC().Format(time.RFC3339))
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

// Change says what applying would do to target.
func Change(kind, target, before, after string, identical bool) string {
	switch {
	case identical:
		return target + " already holds exactly this content: nothing would be written"
	case kind == "document":
		return "append to " + target + " (" + Hashes(before, after) + ")"
	case kind == "document-replace":
		return "replace the earlier version's text in " + target + ", in place (" + Hashes(before, after) + ")"
	case before == "":
		return "create " + target + " (" + Hashes(before, after) + ")"
	}
	return "replace " + target + " (" + Hashes(before, after) + ")"
}

// Hashes is "before → after", each as 12 hex digits.
func Hashes(before, after string) string {
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

// MergeFlags returns the allow flags given, then the others flags names,
// each once: the flags the next command needs.
func MergeFlags(a Allow, flags []string) []string {
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

// WithProblems adds the problems to err's message, one an indented line,
// safe for a terminal.
func WithProblems(err error, ps []ingest.Problem) error {
	msg := err.Error()
	for _, p := range ps {
		msg += fmt.Sprintf("\n  %s: %s", p.Reason, SafeLine(p.Message))
	}
	return fmt.Errorf("%s", msg)
}

// Kind says how a review error ends a command; cmd/handoff maps it to an
// exit code.
type Kind int

const (
	KindOther  Kind = iota // the error as it is
	KindUsage              // a bad id: exit 2
	KindFailed             // exit 1
	KindLocked             // another run holds the lock: exit 75
)

// Advise says what a person does about err from review's commands on
// workspace ws: its kind, the hint, and the error to print (with an
// item's problems added). a is the allow flags the command was given, so
// that a hint names every flag the next command needs.
func Advise(err error, ws string, a Allow) (Kind, string, error) {
	var amb *AmbiguousError
	var bad *BadIDError
	var dec *DecidedError
	var blk *BlockedError
	var lnt *LintError
	var nk *NoKeptError
	var unc *UnchangedError
	switch {
	case errors.Is(err, ErrLocked):
		return KindLocked, "a sync or another `handoff review` is using the workspace; try again when it is done (`handoff doctor` names the holder)", err
	case errors.Is(err, ErrNoLedger):
		return KindFailed, "run `handoff sync`, or name the workspace the timer uses with --workspace (or --manifest)",
			fmt.Errorf("no ledger in %s: no sync has stored anything in this workspace, so nothing waits", ws)
	case errors.As(err, &amb), errors.As(err, &bad):
		return KindUsage, "`handoff review --all` lists every item with its id", err
	case errors.Is(err, ErrNotFound):
		return KindFailed, "`handoff review --all` lists every item; `handoff where NAME` finds any handoff", err
	case errors.As(err, &dec):
		return KindFailed, "`handoff where " + dec.Item.ID + "` shows the decision", err
	case errors.As(err, &blk):
		err = WithProblems(err, blk.Proposal.Blocking)
		if flags := blk.Proposal.Flags(); len(flags) > 0 && !blk.Proposal.NeedsEdit() {
			return KindFailed, "if it is meant, `" + AcceptCommand(blk.Item.ID, MergeFlags(a, flags)) + "`; or `handoff review edit " + blk.Item.ID + "` to change it", err
		}
		return KindFailed, "it cannot be accepted as it is: `handoff review edit " + blk.Item.ID + "` to fix it, or `handoff review reject " + blk.Item.ID + " --note TEXT`", err
	case errors.As(err, &lnt):
		err = WithProblems(err, lnt.Problems)
		if len(lnt.Flags) > 0 {
			return KindFailed, fmt.Sprintf("your edited text is kept in %s; if it is meant, `handoff review edit %s --resume --%s` applies it; else `handoff review edit %s --resume` to change it further",
				lnt.Kept, lnt.Item.ID, strings.Join(lnt.Flags, " --"), lnt.Item.ID), err
		}
		return KindFailed, fmt.Sprintf("your edited text is kept in %s; `handoff review edit %s --resume` starts from it (or `handoff lint` your copy)", lnt.Kept, lnt.Item.ID), err
	case errors.As(err, &unc):
		id := unc.Item.ID
		if unc.NeedsEdit {
			return KindFailed, "it cannot be accepted as it is: `handoff review edit " + id + "` and change it, or `handoff review reject " + id + " --note TEXT`", err
		}
		hint := "`" + AcceptCommand(id, unc.Flags) + "` applies it as it is"
		if len(unc.Flags) > 0 {
			hint += " (if its content is meant)"
		}
		return KindFailed, hint + "; `handoff review edit " + id + "` to change it", err
	case errors.As(err, &nk):
		return KindFailed, "`handoff review edit " + nk.Item.ID + "` starts from the handoff", err
	}
	return KindOther, "", err
}
