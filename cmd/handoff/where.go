package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/where"
	"github.com/handoff-sync/handoff/receipts"
)

func init() { commands = append(commands, newWhereCmd) }

type whereCmd struct {
	g            *globals
	json         bool
	manifestPath string
	workspace    string
}

func newWhereCmd(g *globals) *cobra.Command {
	c := &whereCmd{g: g}
	cmd := &cobra.Command{
		Use:   "where NAME|SHA256-PREFIX|WORKSPACE-PATH",
		Short: "Say where a handoff came from, what became of it, and in which run",
		Long: "where looks a handoff up in the workspace's ledger by the name it had in its\n" +
			"inbox (with or without .md), its archived name (<stem>.<sha12>.md), its full\n" +
			"path (or host:path), or the start of its SHA-256 (at least 4 hex digits), and\n" +
			"prints every match, oldest first: host and path, when it was stored and by which\n" +
			"run, its result and reason, its target, where the host's copy was archived, and\n" +
			"for a duplicate the copy that was applied. Rejected files are found by name.\n" +
			"A path in the workspace (memory/cards/x.md, TOOLS.md, a review draft's\n" +
			"memory/handoff-inbox/<stem>.<sha12>.md) finds the handoffs whose result names\n" +
			"it: which wrote it and when, with the before and after hashes, or the handoff\n" +
			"a review draft came from and why it waits. Files still waiting in an inbox\n" +
			"are not in the ledger yet. The last line names the workspace and its id (with\n" +
			"--json, each match's workspace_id); a directory that is no workspace (see\n" +
			"`handoff init`) is an error, exit 2, naming the workspaces near it.",
		Args: cobra.ExactArgs(1),
		RunE: c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the matches as a JSON array")
	f.StringVar(&c.manifestPath, "manifest", "", "writers manifest, for its workspace (default $XDG_CONFIG_HOME/handoff/writers.yaml)")
	f.StringVar(&c.workspace, "workspace", "", "workspace directory (overrides the manifest; no manifest needed)")
	return cmd
}

func (c *whereCmd) run(cmd *cobra.Command, args []string) error {
	ws := c.workspace
	if ws == "" {
		m, err := loadManifest(c.manifestPath)
		if err != nil {
			return err
		}
		ws = m.Workspace
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return err
	}
	q := args[0]
	matches, err := where.Lookup(cmd.Context(), ws, q)
	if errors.Is(err, where.ErrNoLedger) {
		return &exitError{code: exitFailed, err: fmt.Errorf("no ledger in %s: no sync has stored anything in this workspace", ws),
			hint: "run `handoff sync`, or name the workspace the timer uses with --workspace (or --manifest)"}
	}
	if err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(c.g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(matches); err != nil {
			return err
		}
	} else {
		byTarget := 0
		for _, m := range matches {
			if m.MatchedBy == where.ByTarget {
				byTarget++
			}
		}
		if byTarget > 0 {
			fmt.Fprintf(c.g.stdout, "%s is the target of %d %s, oldest first:\n\n", safeText(q), byTarget, plural(byTarget, "handoff", "handoffs"))
		}
		for i, m := range matches {
			if i > 0 {
				fmt.Fprintln(c.g.stdout)
			}
			describeMatch(c.g.stdout, m)
		}
		if len(matches) > 0 {
			id := "no identity yet: an earlier handoff made it, and its next sync gives it one"
			if matches[0].WorkspaceID != "" {
				id = "id " + matches[0].WorkspaceID
			}
			fmt.Fprintf(c.g.stdout, "\nworkspace %s (%s)\n", ws, id)
		}
	}
	if len(matches) == 0 {
		if f, err := where.WorkspaceFile(ws, q); err == nil && f != nil {
			hint := "it was written by hand, or before handoff took it over: `handoff where` knows what handoffs wrote"
			if f.Kind == "card" {
				hint += "; a handoff that updates it names this sha256 as its Expected card SHA256"
			}
			return &exitError{code: exitFailed, hint: hint,
				err: fmt.Errorf("%s is a %s in the workspace that no handoff has written (sha256 %s, %d bytes)", safeText(f.Path), f.Kind, f.SHA256, f.Size)}
		}
		hint := "check the name (`handoff doctor` shows what waits in each inbox), or that a sync has run since it was written; files still waiting in an inbox are not in the ledger yet; a workspace path is looked up relative to the workspace (memory/cards/NAME.md, TOOLS.md)"
		if !ledger.IsSHAPrefix(q) && isHex(q) {
			hint += fmt.Sprintf("; a sha256 prefix needs at least %d hex digits", ledger.MinSHAPrefix)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("no handoff named %s in the ledger", safeText(q)), hint: hint}
	}
	return nil
}

func isHex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// safeText prints host-supplied text as is when it is safe on a terminal,
// else quoted with Go escapes.
func safeText(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
		return claim.Quote(s)
	}
	return s
}

// describeMatch prints one match: a header host:path, then one indented
// "label: value" line per fact.
func describeMatch(w io.Writer, m where.Match) {
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-12s %s\n", label+":", fmt.Sprintf(format, args...))
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "(unknown time)"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "%s:%s\n", safeText(m.Host), safeText(m.Path))
	if m.Kind == where.Rejected {
		line("result", "rejected (%s): never read", m.Reason)
		if m.ArchivedAs != "" {
			line("archived as", "%s", safeText(m.ArchivedAs))
		} else {
			line("archived as", "(not moved: the move into malformed/ failed; see that run's log)")
		}
		line("size", "%d bytes", m.Size)
		line("seen", "%s by run %s", ts(m.StoredAt), m.IngestRun)
		return
	}
	switch {
	case m.Result == "":
		line("result", "not ingested yet (stored; the next sync ingests it)")
	case m.Result == ingest.ResultDuplicate && m.AppliedFrom != nil:
		a := m.AppliedFrom
		res := a.Result
		if a.Reason != "" {
			res += " (" + a.Reason + ")"
		}
		line("result", "duplicate: the same bytes were ingested from %s:%s: %s", safeText(a.Host), safeText(a.Path), res)
	case m.Result == receipts.ResultLegacy:
		line("result", "legacy: found archived in processed/ and recorded as ingested before by `handoff import processed`; never applied by handoff")
	case m.Result == ingest.ResultReview:
		line("result", "%s (%s)", m.Result, m.Reason)
		if why := ingest.Reasons[m.Reason]; why != "" && m.Waiting {
			line("waits", "for a person: %s", why)
		} else if why != "" {
			// Decided (the decision lines below): it waited, no more.
			line("why", "%s", why)
		}
	case m.Reason != "":
		line("result", "%s (%s)", m.Result, m.Reason)
	case m.Result == ingest.ResultPromoted && m.Action != "":
		line("result", "%s (%s)", m.Result, m.Action)
	default:
		line("result", "%s", m.Result)
	}
	if m.Result != "" {
		switch {
		case m.Target != "" && m.AppliedFrom != nil:
			line("target", "%s (by the copy that was ingested)", m.Target)
		case strings.HasPrefix(m.Target, layout.ReviewDir+"/"):
			line("target", "%s (review draft)", m.Target)
		case m.Target != "":
			line("target", "%s", m.Target)
		case m.Result == ingest.ResultMalformed:
			line("target", "none: quarantined in %s/%s.md", layout.SpoolDir, m.SHA256)
		}
		if m.AfterSHA256 != "" {
			before := m.BeforeSHA256
			if before == "" {
				before = "(new file)"
			}
			line("before", "%s", before)
			line("after", "%s", m.AfterSHA256)
		}
	}
	if e := m.EditedFrom; e != nil {
		line("edited from", "%s by %s at %s (run %s)%s", e.OriginalSHA256, safeText(e.By), ts(e.At), e.RunID, noteOf(e.Note))
	}
	for _, d := range m.Decisions {
		describeDecisionLine(line, d, ts)
	}
	arch := safeText(m.ArchivedAs)
	switch {
	case m.EditedFrom != nil && m.ArchivedAs == "":
		arch = "(none: written by `handoff review edit`, never on a host)"
	case !m.Archived:
		arch += " (rename not confirmed yet; the next sync finishes it)"
	}
	line("archived as", "%s", arch)
	line("sha256", "%s (%d bytes)", m.SHA256, m.Size)
	line("stored", "%s by run %s", ts(m.StoredAt), m.StoredRun)
	if m.Result != "" {
		line("ingested", "%s by run %s", ts(m.IngestedAt), m.IngestRun)
	}
}

// describeDecisionLine prints one review decision of a match.
func describeDecisionLine(line func(label, format string, args ...any), d where.Decision, ts func(time.Time) string) {
	state := ""
	switch d.State {
	case "started":
		state = " (interrupted; the next `handoff review` command or sync finishes it)"
	case "abandoned":
		state = " (abandoned: the target changed while it was written; it waited again)"
	}
	waited := d.WaitedAs
	if d.Reason != "" {
		waited += " (" + d.Reason + ")"
	}
	line("decision", "%s by %s at %s (run %s)%s", d.Decision, safeText(d.By), ts(d.At), d.RunID, state)
	line("waited as", "%s", waited)
	if d.Note != "" {
		line("note", "%s", safeText(d.Note))
	}
	if len(d.Overrides) > 0 {
		line("overriding", "%s", strings.Join(d.Overrides, ", "))
	}
	if d.EditedSHA256 != "" {
		line("edited into", "%s", d.EditedSHA256)
	}
	if d.Decision == "rejected" && d.Target != "" {
		before := d.BeforeSHA256
		if before == "" {
			before = "(absent)"
		}
		line("target", "%s, %s when rejected (unchanged)", d.Target, before)
	}
}

func noteOf(n string) string {
	if n == "" {
		return ""
	}
	return fmt.Sprintf(", note %q", n)
}
