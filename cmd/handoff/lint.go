package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/ingest"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/mirror"
)

type lintResult struct {
	File     string        `json:"file"`
	OK       bool          `json:"ok"`
	Problems []lintProblem `json:"problems"`
	// Warnings never make lint fail (a Continues it cannot follow).
	Warnings []lintProblem `json:"warnings,omitempty"`
}

type lintProblem struct {
	Reason  string `json:"reason"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func newLintCmd(g *globals) *cobra.Command {
	var asJSON bool
	var mirrorDir string
	cmd := &cobra.Command{
		Use:   "lint [--mirror DIR] FILE...",
		Short: "Check handoff files; print each problem with its reason code",
		Long: `Check handoff files with the ingester's own parser and checks, and print
each problem with its reason code. Exit 1 if any file has a problem.

On a writer host, --mirror DIR (the host's mirror of canonical memory, see
docs/mirror.md) also checks a card handoff against the card as canonical
memory has it: an update-card whose expected hash is not the mirror's card's
is a hash-conflict (the writer saw an older card), an update of a card the
mirror lacks is card-missing, and a create-card of a card the mirror has is
card-exists.

The continuity sections (Open questions, Next steps, Continues) never
make a file fail: they never change how it is routed. A Continues that
names no earlier handoff (by its file name or SHA-256) is a warning,
continues-unclear, printed as FILE: warning: CODE: MESSAGE.

A handoff whose notes (title, summary, durable facts, open questions, next
steps) the mirror's repos/ would withhold from agents on other hosts (they
read like instructions to the agent, look like a secret, or hide
characters) is a warning too, notes-withheld: it is applied as usual, but
the next agent sees only its file name and what became of it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mirrorDir != "" {
				if _, err := os.Stat(filepath.Join(mirrorDir, mirror.SumsFile)); err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("lint: %s is not a mirror: %w", mirrorDir, err),
						hint: "give the mirror directory that handoff publishes on this host (the manifest's mirror.path); it holds SHA256SUMS"}
				}
			}
			var results []lintResult
			bad := false
			for _, name := range args {
				data, err := os.ReadFile(name)
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("lint: %w", err)}
				}
				probs := []lintProblem{}
				for _, p := range ingest.Lint(data) {
					probs = append(probs, lintProblem{Reason: p.Reason, Field: p.Field, Message: p.Message})
				}
				if mirrorDir != "" && len(probs) == 0 {
					probs = append(probs, againstMirror(data, mirrorDir)...)
				}
				var warns []lintProblem
				for _, p := range ingest.LintWarnings(data) {
					warns = append(warns, lintProblem{Reason: p.Reason, Field: p.Field, Message: p.Message})
				}
				if w, ok := withheldWarning(data, probs); ok {
					warns = append(warns, w)
				}
				results = append(results, lintResult{File: name, OK: len(probs) == 0, Problems: probs, Warnings: warns})
				bad = bad || len(probs) > 0
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				for _, r := range results {
					if r.OK {
						fmt.Fprintf(g.stdout, "%s: ok\n", r.File)
					}
					for _, p := range r.Problems {
						fmt.Fprintf(g.stdout, "%s: %s: %s\n", r.File, p.Reason, p.Message)
					}
					for _, p := range r.Warnings {
						fmt.Fprintf(g.stdout, "%s: warning: %s: %s\n", r.File, p.Reason, p.Message)
					}
				}
			}
			if bad {
				return silent(exitFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print results as JSON")
	cmd.Flags().StringVar(&mirrorDir, "mirror", "", "check card handoffs against this mirror of canonical memory")
	return cmd
}

// againstMirror checks a card handoff that lints clean against the card
// in a mirror: what the ingester on the canonical host would find.
func againstMirror(data []byte, dir string) []lintProblem {
	h, err := ingest.Parse(data)
	if err != nil || h.Card == nil || !ingest.IsCardName(h.Card.Name) {
		return nil
	}
	rel := path.Join(layout.CardsDir, h.Card.Name)
	cur, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	exists := err == nil
	sum := sha256.Sum256(cur)
	have := hex.EncodeToString(sum[:])
	field := ingest.SectionExpectedSHA
	switch {
	case h.Action == ingest.ActionUpdateCard && !exists:
		return []lintProblem{{Reason: ingest.ReasonCardMissing, Field: ingest.SectionTargetCard,
			Message: fmt.Sprintf("the mirror has no card %s; send create-card to make it", h.Card.Name)}}
	case h.Action == ingest.ActionUpdateCard && h.Card.ExpectedSHA256 != have:
		return []lintProblem{{Reason: ingest.ReasonHashConflict, Field: field,
			Message: fmt.Sprintf("the mirror's %s has sha256 %s, not %s: start from the mirror's card, keep what still holds, and send its hash", rel, have, h.Card.ExpectedSHA256)}}
	case h.Action == ingest.ActionCreateCard && exists && string(cur) != h.Card.Content:
		return []lintProblem{{Reason: ingest.ReasonCardExists, Field: ingest.SectionTargetCard,
			Message: fmt.Sprintf("the mirror already has %s; send update-card with the whole new card and Expected card SHA256 %s", rel, have)}}
	}
	return nil
}

// reasonNotesWithheld is lint's warning that repos/ (RECENT.md, `handoff
// context`) will not show a handoff's notes to agents on other hosts.
const reasonNotesWithheld = "notes-withheld"

// withheldWarning warns when the mirror's repos/ would withhold the
// handoff's notes (ingest.Handoff.WithheldReason), unless a problem of
// lint's already names the same reason.
func withheldWarning(data []byte, probs []lintProblem) (lintProblem, bool) {
	h, err := ingest.Parse(data)
	if err != nil {
		return lintProblem{}, false
	}
	why := h.WithheldReason()
	if why == "" {
		return lintProblem{}, false
	}
	for _, p := range probs {
		if p.Reason == why {
			return lintProblem{}, false
		}
	}
	what := map[string]string{
		ingest.ReasonInjectionLike:    "they read like instructions to the agent that reads them",
		ingest.ReasonSecretLike:       "the handoff holds what looks like a secret",
		ingest.ReasonHiddenCharacters: "the handoff holds invisible, bidirectional or control characters",
	}[why]
	if what == "" {
		what = "the screens flag them"
	}
	return lintProblem{Reason: reasonNotesWithheld, Message: fmt.Sprintf(
		"the next agent will not see this handoff's notes (title, summary, durable facts, open questions, next steps): "+
			"the mirror's repos/ (RECENT.md, `handoff context`) withholds them from other hosts because %s (%s), and shows only its file name and what became of it; "+
			"it is still applied as usual. Rewrite the notes as plain statements for them to be shared", what, why)}, true
}
