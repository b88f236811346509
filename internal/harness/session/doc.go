// Package session is what handoff's hooks know about an agent's session
// on a writer host: the hook's input, the record a session start leaves,
// the log of what went wrong, and whether a stop should ask for a
// handoff.
//
// Guarantees:
//
//   - Everything it keeps is in the user's private state directory
//     (harness.StateDir, mode 0700; files 0600): one record per session
//     (at most MaxRecords, none older than MaxAge, each bounded), an
//     empty ask file beside it once a stop asked, and one log of at
//     most MaxLog bytes (and one older generation). Nothing is written
//     in the repository.
//   - Stop asks at most once per session: only the stop that creates
//     the session's ask file (O_EXCL) asks, before the answer is
//     printed, so stops running at the same time ask once between them;
//     an ask file that cannot be created means no ask. It never asks
//     when stop_hook_active is set, for a session whose start it has no
//     record of, outside a repository with an inbox (the one the session
//     started in, or the one holding the stop's cwd), when nothing
//     changed there since the start, or when a handoff reached one of
//     that repository's inboxes since the start.
//   - Reads are bounded (the input, the git index, the walk of a
//     repository without git) and the caller's deadline is honoured:
//     when it passes the answer is "do not ask".
package session
