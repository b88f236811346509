// Package openclaw knows what OpenClaw, the program that reads a
// workspace, does with what handoff writes there: which files it loads
// at a session's start and where it cuts them, where it looks for local
// tool notes in each of its layouts, which names it reads as dated daily
// notes, and how its own config file says so. The facts were measured
// against OpenClaw 2026.9.6 (docs/openclaw.md has them with their
// sources); e2e/openclaw_test.go runs the real program against them.
//
// Guarantees:
//   - It only reads OpenClaw's config, through a JSON5 parser as OpenClaw
//     itself does, bounded to MaxConfigSize; it never writes it.
//   - Fits counts characters as OpenClaw does (UTF-16 code units of the
//     content without trailing white space) and walks the loaded files in
//     OpenClaw's order with its per-file and total budgets, so a file it
//     passes is loaded whole.
//   - InsertTools and SetIndex change only their own part of a file: the
//     end of the "## Tools" section, and the text between IndexBegin and
//     IndexEnd; every other byte is kept in place.
package openclaw
