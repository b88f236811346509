package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
)

func init() { commands = append(commands, newTemplateCmd) }

type templateCmd struct {
	g                    *globals
	card, update, docUpd bool
}

func newTemplateCmd(g *globals) *cobra.Command {
	c := &templateCmd{g: g}
	cmd := &cobra.Command{
		Use:   "template [--card|--update|--document]",
		Short: "Print a skeleton handoff to fill in",
		Long: `template prints a skeleton memory handoff on stdout: a new card (--card, the
default), a change to an existing card (--update) or text to add to a document
(--document). Replace every <FILL: …> with the real text (the Durable facts
and Evidence sections may be deleted instead) and the file is a valid handoff;
` + "`handoff lint`" + ` reports each placeholder left (reason unfilled-template).

Fill it in where it is not collected: outside the inbox, or in the inbox under
a name that starts with a dot (dotfiles are never pulled). Move it to its
YYYY-MM-DD-HHMM-slug.md name only when it is finished: a rename in the same
directory is atomic, so a half-written file is never pulled. A file in an
inbox that still holds a placeholder is left there for an hour after it last
changed, then sent to review. The format is in docs/handoff-format.md.`,
		Example: `  inbox=.claude/memory-handoffs
  handoff template > $inbox/.draft-go-fuzzing.md      # a dotfile: never pulled
  $EDITOR $inbox/.draft-go-fuzzing.md
  handoff lint $inbox/.draft-go-fuzzing.md
  mv $inbox/.draft-go-fuzzing.md $inbox/2026-04-20-1537-go-fuzzing.md
  handoff template --document > /tmp/tools-note.md`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	f := cmd.Flags()
	f.BoolVar(&c.card, "card", false, "a create-card handoff: a new memory card (the default)")
	f.BoolVar(&c.update, "update", false, "an update-card handoff: replace an existing card, guarded by its SHA-256")
	f.BoolVar(&c.docUpd, "document", false, "a no-card handoff: text added to TOOLS.md, USER.md, rules/*.md or .learnings/*.md")
	return cmd
}

func (c *templateCmd) run(cmd *cobra.Command, _ []string) error {
	kind, n := ingest.TemplateCard, 0
	for _, k := range []struct {
		set  bool
		kind string
	}{{c.card, ingest.TemplateCard}, {c.update, ingest.TemplateUpdate}, {c.docUpd, ingest.TemplateDocument}} {
		if k.set {
			kind = k.kind
			n++
		}
	}
	if n > 1 {
		return usageError{errors.New("--card, --update and --document exclude each other: a handoff changes a card or adds to a document")}
	}
	t, err := ingest.Template(kind)
	if err != nil {
		return err
	}
	fmt.Fprint(c.g.stdout, t)
	return nil
}
