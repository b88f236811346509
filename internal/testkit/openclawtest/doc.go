// Package openclawtest runs the real OpenClaw (npm package openclaw,
// pinned by .ci/openclaw) over a workspace, so that tests can see what
// OpenClaw reads from what handoff writes: what its memory search finds,
// what its promotion would copy into MEMORY.md, what `openclaw doctor
// --fix` rewrites, and what a session loads at its start. docs/openclaw.md
// holds the facts these tests rely on.
//
// Find locates the install; Env binds one workspace to a private OpenClaw
// home, state directory and config (memory search provider "none", so no
// model is called), and runs OpenClaw's own commands there.
//
// Guarantees:
//
//   - Find skips the test when OpenClaw is not installed, and fails it
//     instead when HANDOFF_E2E_REQUIRED is set. An install of another
//     version than Version fails the test.
//   - Every command runs with HOME, OPENCLAW_STATE_DIR and
//     OPENCLAW_CONFIG_PATH under the test's own temporary directory and an
//     environment built from scratch (no OPENCLAW_* variable of the caller
//     leaks in), so nothing reads or writes the user's ~/.openclaw.
//   - Every command runs in a network namespace of its own (only a
//     loopback that is down) when the kernel lets the test make one; so it
//     cannot reach a network, and a lookup fails at once instead of
//     hanging. Env.Isolated says whether it could.
//   - Every command has a deadline (Env.Timeout); at the deadline or when
//     the context ends, its whole process group is killed and the error
//     says so.
//   - A failing command's error holds its exit status and its stderr.
package openclawtest
