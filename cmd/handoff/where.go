package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/claim"
	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/where"
)

func init() { commands = append(commands, newWhereCmd) }

type whereCmd struct {
	g            *globals
	json         bool
	bytes        bool
	raw          bool
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
			".handoff/review/<stem>.<sha12>.md) finds the handoffs whose result names\n" +
			"it: which wrote it and when, with the before and after hashes, or the handoff\n" +
			"a review draft came from and why it waits. Files still waiting in an inbox\n" +
			"are not in the ledger yet. Threads are followed both ways: the handoff a match\n" +
			"continues (its ## Continues section) and the handoffs that continue it.\n" +
			"The last line names the workspace and its id (with\n" +
			"--json, each match's workspace_id); a directory that is no workspace (see\n" +
			"`handoff init`) is an error, exit 2, naming the workspaces near it.\n\n" +
			"--bytes prints instead the exact bytes stored for the handoff the query names,\n" +
			"and nothing else, checked against its SHA-256: the ledger keeps them (earlier\n" +
			"versions kept .handoff/spool/<sha256>.md files, still read). A query naming\n" +
			"several contents (two versions of one name) is an error listing them; name one\n" +
			"by its SHA-256 prefix. Bytes prune removed, and rejected files (never read), are\n" +
			"an error naming where the host's copy was archived.\n\n" +
			"A writer host's bytes may hold escape sequences a terminal acts on (set the\n" +
			"clipboard, the window title, hide text). On a terminal, --bytes shows those\n" +
			"as Go escapes (\\x1b, \\u202e) and says so on stderr; --raw writes them as they\n" +
			"are. Piped or redirected, the bytes are written exactly, as --raw does.",
		Example: "  handoff where 2026-04-20-1537-build.md\n" +
			"  handoff where memory/cards/go.md --json | jq '.[].sha256'\n" +
			"  handoff where --bytes 3f2a9c81 > handoff.md",
		Args: cobra.ExactArgs(1),
		RunE: c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.json, "json", false, "print the matches as a JSON array")
	f.BoolVar(&c.bytes, "bytes", false, "print the exact stored bytes of the one handoff the query names")
	f.BoolVar(&c.raw, "raw", false, "with --bytes on a terminal: write the bytes as they are, escape sequences and all")
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
	if c.bytes && c.json {
		return &exitError{code: exitUsage, err: errors.New("where: --bytes prints raw bytes; it does not go with --json"), hint: "drop one of them"}
	}
	matches, err := where.Lookup(cmd.Context(), ws, q)
	if errors.Is(err, where.ErrNoLedger) {
		return &exitError{code: exitFailed, err: fmt.Errorf("no ledger in %s: no sync has stored anything in this workspace", ws),
			hint: "run `handoff sync`, or name the workspace the timer uses with --workspace (or --manifest)"}
	}
	if err != nil {
		return err
	}
	if c.bytes && len(matches) > 0 {
		return c.printBytes(cmd, ws, q, matches)
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
			fmt.Fprintf(c.g.stdout, "%s is the target of %d %s, oldest first:\n\n", claim.Printable(q), byTarget, plural(byTarget, "handoff", "handoffs"))
		}
		for i, m := range matches {
			if i > 0 {
				fmt.Fprintln(c.g.stdout)
			}
			where.WriteMatch(c.g.stdout, m)
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
				err: fmt.Errorf("%s is a %s in the workspace that no handoff has written (sha256 %s, %d bytes)", claim.Printable(f.Path), f.Kind, f.SHA256, f.Size)}
		}
		hint := "check the name (`handoff doctor` shows what waits in each inbox), or that a sync has run since it was written; files still waiting in an inbox are not in the ledger yet; a workspace path is looked up relative to the workspace (memory/cards/NAME.md, TOOLS.md)"
		if !ledger.IsSHAPrefix(q) && isHex(q) {
			hint += fmt.Sprintf("; a sha256 prefix needs at least %d hex digits", ledger.MinSHAPrefix)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("no handoff named %s in the ledger", claim.Printable(q)), hint: hint}
	}
	return nil
}

// printBytes writes the exact bytes of the one content matches name.
func (c *whereCmd) printBytes(cmd *cobra.Command, ws, q string, matches []where.Match) error {
	var shas []string
	var rejected *where.Match
	for i, m := range matches {
		switch {
		case m.Kind == where.Rejected:
			rejected = &matches[i]
		case !slices.Contains(shas, m.SHA256):
			shas = append(shas, m.SHA256)
		}
	}
	switch {
	case len(shas) == 0:
		at := rejected.Path
		if rejected.ArchivedAs != "" {
			at = path.Join(rejected.Inbox, rejected.ArchivedAs)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%s was rejected unread (%s): no bytes of it were stored", claim.Printable(q), rejected.Reason),
			hint: fmt.Sprintf("its host keeps it as it was: %s on %s", claim.Printable(at), claim.Printable(rejected.Host))}
	case len(shas) > 1:
		ids := make([]string, len(shas))
		for i, sha := range shas {
			ids[i] = sha[:12]
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%s names %d stored contents: %s", claim.Printable(q), len(shas), strings.Join(ids, ", ")),
			hint: "name one by its SHA-256 prefix: handoff where --bytes " + ids[len(ids)-1]}
	}
	data, err := where.Bytes(cmd.Context(), ws, shas[0])
	if errors.Is(err, where.ErrPruned) {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s (%s): %w, its handoff done with", claim.Printable(q), shas[0][:12], err),
			hint: prunedHint(matches[len(matches)-1], shas[0][:12])}
	}
	if errors.Is(err, spool.ErrCorrupt) {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s (%s): the stored bytes no longer hash to it: they are damaged", claim.Printable(q), shas[0][:12]),
			hint: "`handoff doctor` checks the ledger; the host's archived copy (`handoff where` shows its path) holds the original"}
	}
	if err != nil {
		return err
	}
	if !c.raw && isTerminal(c.g.stdout) {
		if shown, n := terminalSafe(data); n > 0 {
			_, err = io.WriteString(c.g.stdout, shown)
			fmt.Fprintf(c.g.stderr, "handoff: where: %d %s a terminal would act on (escape sequences, control or invisible characters) %s shown escaped, as \\x1b or \\u202e\n"+
				"hint: redirect or pipe for the exact bytes (handoff where --bytes %s > handoff.md), or add --raw to write them to this terminal as they are\n",
				n, plural(n, "character", "characters"), plural(n, "is", "are"), shas[0][:12])
			return err
		}
	}
	_, err = c.g.stdout.Write(data)
	return err
}

// prunedHint says where the host's copy of a handoff whose stored bytes
// prune removed went, and whether that copy is gone too. prune removes
// the bytes of a handoff only once it was ingested longer ago than
// --older-than, and archived copies in processed/ by when they were
// stored, which came first: the prune that removed the bytes removed
// the processed/ copy too, on every host it reached. malformed/ is never
// pruned.
func prunedHint(m where.Match, sha12 string) string {
	switch {
	case m.ArchivedAs == "" || !m.Archived:
		return fmt.Sprintf("its host's copy was never archived: %s on %s, if it is still there (`handoff where %s` shows every copy)",
			claim.Printable(m.Path), claim.Printable(m.Host), sha12)
	case strings.HasPrefix(m.ArchivedAs, claim.ProcessedDir+"/"):
		return fmt.Sprintf("its host's archived copy, %s on %s, is as old, so the same prune removed it too (unless it skipped %s or could not reach it): no copy is left",
			claim.Printable(path.Join(m.Inbox, m.ArchivedAs)), claim.Printable(m.Host), claim.Printable(m.Host))
	}
	return fmt.Sprintf("its host keeps its archived copy (prune never touches %s): %s on %s",
		path.Dir(m.ArchivedAs)+"/", claim.Printable(path.Join(m.Inbox, m.ArchivedAs)), claim.Printable(m.Host))
}

// terminalSafe is data as a terminal may show it: what a terminal acts
// on (control characters but tab, newline and the carriage return of a
// CRLF, format characters such as bidi overrides, invalid UTF-8) as Go
// escapes, as printable does; and how many were escaped.
func terminalSafe(data []byte) (string, int) {
	s := string(data)
	var b strings.Builder
	n := 0
	for i, r := range s {
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			b.WriteRune(r)
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
			n++
		case r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			n++
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), n
}

func isHex(s string) bool {
	return s != "" && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}
