// Package codex knows Codex's side of handoff's hooks: where its hooks
// files are, the hooks handoff puts there, what its config.toml says
// about running them, and the answers its hooks give.
//
// Guarantees: it names files, reads config.toml (never writes it) and
// builds JSON; package harness writes hooks.json, keeping every key of
// the person's.
package codex
