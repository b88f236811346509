// Package harness edits the hooks of an agent harness (Claude Code,
// Codex) in the harness's own JSON file, whose shape both share: an
// object whose "hooks" member maps an event name to matcher groups, each
// with a "hooks" list of handlers. The packages claude and codex below it
// know each program's files and answers; this one knows the shape, which
// handlers are handoff's, and how a file is changed.
//
// Guarantees:
//
//   - Only handoff's handlers are added, changed or removed: a handler is
//     handoff's when its command runs a program named handoff with the
//     subcommand of one of its hooks (`context --hook`, `hook stop`).
//     Every other member, group and handler keeps its place and its bytes
//     (its value is copied as it was read, only re-indented), so the file
//     means what it meant, key order included.
//   - Install is idempotent: when handoff's hooks are already current the
//     file is not written at all.
//   - Uninstall undoes install: it removes handoff's handlers and only the
//     groups, event lists and "hooks" object that removing them emptied;
//     a file left with nothing in it is removed (install created it, or it
//     held only handoff's hooks).
//   - A file is replaced atomically (temporary file, fsync, rename,
//     directory fsync) and only if it still holds what was read, after its
//     prior content was saved as a backup in the user's private state
//     directory. A symlinked file is edited where it points. A file that
//     is not a JSON object is refused, never rewritten.
package harness
