package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fixture is one file a writer left in an inbox.
type fixture struct {
	dir  string // inbox, relative to the temporary directory
	name string
	body string
}

// Inboxes of the layout, relative to the temporary directory.
const (
	notesInbox     = "laptop/home/code/notes-app/.claude/memory-handoffs"
	apiInbox       = "laptop/home/code/api/.codex/memory-handoffs"
	canonicalInbox = "canonical/src/dotfiles/.claude/memory-handoffs"
)

// laptopMaxFileSize is the laptop's max_file_size in the manifest, small so
// that the oversize handoff need not be big.
const (
	laptopMaxFileSize      = "4KiB"
	laptopMaxFileSizeBytes = 4 << 10
)

// fixtures returns the handoffs the demo plays: one of every outcome.
func fixtures() []fixture {
	return []fixture{
		{notesInbox, "2026-04-20-0915-notes-sync-merge.md", cardHandoff},         // promoted
		{notesInbox, "2026-04-20-1102-ripgrep.md", toolsHandoff},                 // routed to TOOLS.md
		{notesInbox, "2026-04-21-0830-commit-style.md", rulesHandoff},            // routed to rules/git.md
		{apiInbox, "2026-04-21-0830-commit-style.md", rulesHandoff},              // the same bytes again: duplicate
		{apiInbox, "2026-04-21-1015-sqlite-busy-timeout.md", reviewHandoff},      // review: update-card without the card's hash
		{notesInbox, "scratch-notes.md", malformedNotes},                         // malformed: not a handoff
		{notesInbox, "2026-04-21-1710-session-transcript.md", oversizeHandoff()}, // rejected: over max_file_size
		{canonicalInbox, "2026-04-22-0700-answer-style.md", userHandoff},         // routed to USER.md, from the local host
	}
}

// writeFixtures writes every fixture under dir and backdates it by an
// hour, so that all of them are older than the settle time.
func writeFixtures(dir string) error {
	old := time.Now().Add(-time.Hour)
	for _, f := range fixtures() {
		inbox := filepath.Join(dir, filepath.FromSlash(f.dir))
		if err := os.MkdirAll(inbox, 0o755); err != nil {
			return err
		}
		p := filepath.Join(inbox, f.name)
		if err := os.WriteFile(p, []byte(f.body), 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return err
		}
	}
	return nil
}

const cardHandoff = `# Memory Handoff

## Type
decision

## Title
Notes sync merges per paragraph, last writer wins

## Summary
Offline edits made on two devices conflicted on whole notes. Merging per
paragraph, ordered by Lamport timestamps, removed almost every conflict
prompt.

## Durable facts
- Every paragraph carries a Lamport timestamp (sync/clock.ts).
- Only concurrent edits to the same paragraph still ask the user.

## Evidence
- files changed: sync/merge.ts, sync/clock.ts
- commands run: npm test -- sync

## Recommended memory action
create-card

## Target card
notes-sync-merge.md

## Suggested card content
---
topic: Notes sync merge strategy
category: decision
tags: [notes-app, sync, offline]
---

Offline edits merge per paragraph; the latest Lamport timestamp wins
(sync/clock.ts). Only concurrent edits to one paragraph prompt the user.

## Reviewer notes
None.
`

const toolsHandoff = `# Memory Handoff

## Type
setup

## Title
Search the repository with ripgrep

## Summary
Plain grep walked node_modules and took a minute; rg honours .gitignore and
answers at once.

## Recommended memory action
no-card

## Target document
TOOLS.md

## Suggested document content
- ` + "`rg PATTERN`" + ` searches the repository and skips what .gitignore ignores.
- ` + "`rg --hidden -g '!.git' PATTERN`" + ` also searches dotfiles.
`

const rulesHandoff = `# Memory Handoff

## Type
preference

## Title
Commit subjects in the imperative mood

## Summary
The maintainer asked for short imperative commit subjects in every
repository.

## Recommended memory action
no-card

## Target document
rules/git.md

## Suggested document content
- Write commit subjects in the imperative mood ("Add", not "Added"), at most 50 characters.
- Say why in the body, wrapped at 72 columns.
`

const reviewHandoff = `# Memory Handoff

## Type
bugfix

## Title
SQLITE_BUSY under concurrent requests

## Summary
Two request handlers writing at once got SQLITE_BUSY; a busy timeout fixed
it.

## Recommended memory action
update-card

## Target card
sqlite-settings.md

## Suggested card content
---
topic: SQLite settings
category: bugfix
tags: [sqlite, api]
---

Open the database with busy_timeout=5000 and journal_mode=WAL.

## Reviewer notes
The writer did not record the card's SHA-256, so a person has to check
that this update does not undo someone else's.
`

const malformedNotes = `TODO before Friday
- ask about the conflict dialog
- write a handoff about the clock change?
`

const userHandoff = `# Memory Handoff

## Type
preference

## Title
Answers lead with the command

## Summary
The user prefers the command first and the explanation after it.

## Recommended memory action
no-card

## Target document
USER.md

## Suggested document content
- Lead with the command to run; explain after it, briefly.
`

// oversizeHandoff is a handoff with a pasted session transcript, larger
// than the laptop's max_file_size.
func oversizeHandoff() string {
	var b strings.Builder
	b.WriteString(`# Memory Handoff

## Type
research

## Title
Full session transcript

## Summary
The whole session, pasted verbatim.

## Recommended memory action
no-card

## Target document
.learnings/LEARNINGS.md

## Suggested document content
`)
	for i := 1; b.Len() <= laptopMaxFileSizeBytes+512; i++ {
		fmt.Fprintf(&b, "- step %d: ran the sync tests again and read the output line by line\n", i)
	}
	return b.String()
}
