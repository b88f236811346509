// Prints, as JSON, the workspace files OpenClaw puts into a session's
// context at its start, with each file's content as injected (after
// OpenClaw's own cuts). It calls OpenClaw's own loader,
// resolveBootstrapContextForRun, from the public plugin SDK module
// openclaw/plugin-sdk/agent-harness-runtime; nothing here re-implements it.
//
// Usage: node bootstrap.mjs WORKSPACE [SESSION_KEY]
//
// OPENCLAW_PACKAGE_DIR names the installed openclaw package (the directory
// holding its package.json). The config is OpenClaw's own, found the way
// the CLI finds it (OPENCLAW_CONFIG_PATH, OPENCLAW_STATE_DIR, HOME).
// SESSION_KEY defaults to the main session, "agent:main:main"; a key such
// as "agent:main:subagent:x" shows what a subagent loads.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [workspaceArg, sessionKeyArg] = process.argv.slice(2);
const pkgDir = process.env.OPENCLAW_PACKAGE_DIR;
if (!workspaceArg || !pkgDir) {
  process.stderr.write("usage: OPENCLAW_PACKAGE_DIR=... node bootstrap.mjs WORKSPACE [SESSION_KEY]\n");
  process.exit(2);
}
const workspaceDir = path.resolve(workspaceArg);
const sessionKey = sessionKeyArg || "agent:main:main";

// Resolve through the package's own "exports" map, as a plugin would.
const req = createRequire(path.join(pkgDir, "package.json"));
const load = (spec) => import(pathToFileURL(req.resolve(spec)).href);
const { loadConfig } = await load("openclaw/plugin-sdk/config-runtime");
const { resolveBootstrapContextForRun } = await load("openclaw/plugin-sdk/agent-harness-runtime");

const config = await loadConfig();
const warnings = [];
const { bootstrapFiles, contextFiles } = await resolveBootstrapContextForRun({
  workspaceDir,
  config,
  sessionKey,
  agentId: "main",
  warn: (message) => warnings.push(message),
});

// contextFiles carry only path and content; bootstrapFiles carry the name
// and the raw content. Lengths are JavaScript string lengths (UTF-16 code
// units), which is what OpenClaw's caps count.
const injected = new Map(contextFiles.map((f) => [f.path, f.content]));
const files = bootstrapFiles.map((f) => {
  const content = injected.get(f.path);
  const raw = f.content ?? "";
  return {
    name: f.name,
    path: f.path,
    missing: Boolean(f.missing),
    chars: raw.length,
    injected: content !== undefined,
    injectedChars: content === undefined ? 0 : content.length,
    truncated: content !== undefined && !f.missing && content !== raw.trimEnd(),
    content: content ?? "",
  };
});
process.stdout.write(JSON.stringify({ workspaceDir, sessionKey, files, warnings }, null, 2) + "\n");
// OpenClaw's modules may leave timers or handles open; the answer is out.
process.exit(0);
