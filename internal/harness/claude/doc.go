// Package claude knows Claude Code's side of handoff's hooks: where its
// settings files are, the hooks handoff puts there, and the answers its
// hooks give.
//
// Guarantees: it names files and builds JSON; it writes nothing (package
// harness does, keeping every key of the person's).
package claude
