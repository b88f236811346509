package ingest

import (
	"fmt"
	"regexp"
)

// Template kinds: the three things a handoff can ask for.
const (
	TemplateCard     = "card"     // create-card
	TemplateUpdate   = "update"   // update-card
	TemplateDocument = "document" // no-card, appended to a document
)

// fillRE matches a template's placeholder, <FILL: what goes here>. Lint
// and the ingester flag any left in a section (unfilled-template).
var fillRE = regexp.MustCompile(`<FILL:[^>\n]*>`)

// Unfilled reports whether data still holds a template placeholder: a
// skeleton saved into an inbox before it was filled in. The pull leaves
// such a file for its writer a while (claim.Config.Unfilled).
func Unfilled(data []byte) bool { return fillRE.Match(data) }

// Template returns a skeleton handoff of the given kind for a writer to
// fill in: every <FILL: …> replaced (optional sections may be deleted
// instead), it is a valid handoff of that kind. Open questions, Next
// steps and Reviewer notes hold "(none)", a placeholder that reads as
// absent, for the writer to replace with a list.
func Template(kind string) (string, error) {
	head := `# Memory Handoff

## Type
<FILL: one of setup, workflow, bugfix, decision, security, preference, research, project-context>

## Title
<FILL: a short, specific title>

## Summary
<FILL: what happened and why it matters, in a few sentences>

## Durable facts
<FILL: the facts worth keeping, one per line; or delete this section>

## Evidence
<FILL: files changed, commands run, error strings; or delete this section>

`
	card := `## Target card
<FILL: the card's file name, such as go-fuzzing.md>

## Suggested card content
---
topic: "<FILL: what the card is about>"
category: "<FILL: the card's category, such as workflow>"
tags: ["<FILL: one tag>"]
---

<FILL: the card's text, as it should be saved>
`
	// The continuity sections come filled with a placeholder, which
	// reads as absent: a template left as it is never shows them.
	tail := `
## Open questions
(none)

## Next steps
(none)

## Reviewer notes
(none)
`
	switch kind {
	case TemplateCard:
		return head + "## Recommended memory action\ncreate-card\n\n" + card + tail, nil
	case TemplateUpdate:
		return head + "## Recommended memory action\nupdate-card\n\n" +
			"## Expected card SHA256\n<FILL: the card's SHA-256 as you last read it: its line in SHA256SUMS in this host's mirror (HANDOFF.md there says where)>\n\n" +
			card + tail, nil
	case TemplateDocument:
		return head + `## Recommended memory action
no-card

## Target document
<FILL: one of TOOLS.md, USER.md, rules/NAME.md, .learnings/LEARNINGS.md, .learnings/ERRORS.md, .learnings/FEATURE_REQUESTS.md>

## Suggested document content
<FILL: the text to add; headings only ### or deeper>
` + tail, nil
	}
	return "", fmt.Errorf("template: unknown kind %q; use %s, %s or %s", kind, TemplateCard, TemplateUpdate, TemplateDocument)
}

// unfilledProblems reports every section that still holds a template
// placeholder, in the order sections are listed in the format.
func (h *Handoff) unfilledProblems() []Problem {
	var ps []Problem
	for _, k := range sectionOrder {
		if m := fillRE.FindString(h.Sections[k]); m != "" {
			ps = append(ps, problemf(ReasonUnfilledTemplate, k, "the %q section still holds the template's placeholder %q; replace it with the real text", "## "+sectionHeadings[k], clip(m)))
		}
	}
	return ps
}

// dropUnderPlaceholders leaves out the other problems of a section that
// still holds a template placeholder: the placeholder is the one to fix
// ("type <FILL: …> is not known" says nothing new).
func dropUnderPlaceholders(ps []Problem) []Problem {
	unfilled := map[string]bool{}
	for _, p := range ps {
		if p.Reason == ReasonUnfilledTemplate {
			unfilled[p.Field] = true
		}
	}
	if len(unfilled) == 0 {
		return ps
	}
	out := ps[:0]
	for _, p := range ps {
		if p.Reason == ReasonUnfilledTemplate || p.Field == "" || !unfilled[p.Field] {
			out = append(out, p)
		}
	}
	return out
}

// sectionOrder lists the section keys as docs/handoff-format.md does.
var sectionOrder = []string{
	SectionType, SectionTitle, SectionSummary, SectionDurableFacts, SectionEvidence, SectionAction,
	SectionTargetCard, SectionExpectedSHA, SectionCardContent, SectionTargetDocument,
	SectionDocumentContent, SectionReviewerNotes,
}
