package openclawtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the OpenClaw release the tests are written against; it is
// the one .ci/openclaw installs.
const Version = "2026.9.6"

// RequiredEnv names the environment variable that turns a missing
// OpenClaw from a skip into a failure.
const RequiredEnv = "HANDOFF_E2E_REQUIRED"

// DirEnv overrides the directory .ci/openclaw installs into.
const DirEnv = "HANDOFF_OPENCLAW_DIR"

// DefaultDir is where .ci/openclaw installs when DirEnv is unset.
const DefaultDir = "/var/cache/handoff/openclaw"

// DefaultTimeout bounds one OpenClaw command. A command takes 5 to 90
// seconds on a loaded two-core machine (docs/openclaw.md); the bound is
// for a hang, not for a slow run.
const DefaultTimeout = 4 * time.Minute

// OpenClaw is an installed OpenClaw and the Node that runs it.
type OpenClaw struct {
	Dir     string // the install directory (DirEnv or DefaultDir)
	Node    string // the node binary
	Entry   string // openclaw.mjs, the CLI's entry point
	Package string // the openclaw package directory (holds package.json)
	Version string // the installed openclaw version
}

// Find returns the install .ci/openclaw made, read from its openclaw.env.
func Find(t testing.TB) *OpenClaw {
	t.Helper()
	dir := os.Getenv(DirEnv)
	if dir == "" {
		dir = DefaultDir
	}
	rec := filepath.Join(dir, "openclaw.env")
	vars, err := readEnvFile(rec)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("OpenClaw is not installed (%v); run .ci/openclaw as root (or set %s to its directory)", err, DirEnv))
	}
	oc := &OpenClaw{Dir: dir, Node: vars["NODE"], Entry: vars["ENTRY"], Version: vars["OPENCLAW_VERSION"]}
	oc.Package = filepath.Dir(oc.Entry)
	for _, p := range []string{oc.Node, oc.Entry, filepath.Join(oc.Package, "package.json")} {
		if p == "" || p == "." {
			skipOrFail(t, fmt.Sprintf("%s lacks NODE or ENTRY; run .ci/openclaw again", rec))
		}
		if _, err := os.Stat(p); err != nil {
			skipOrFail(t, fmt.Sprintf("OpenClaw install is incomplete (%v); run .ci/openclaw again", err))
		}
	}
	if oc.Version != Version {
		t.Fatalf("openclawtest: %s records OpenClaw %q, the tests are written for %s; run .ci/openclaw again", rec, oc.Version, Version)
	}
	return oc
}

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequiredEnv) != "" {
		t.Fatalf("openclawtest: %s (%s is set, so this is a failure)", msg, RequiredEnv)
	}
	t.Skipf("openclawtest: %s (set %s to make this a failure)", msg, RequiredEnv)
}

// readEnvFile reads KEY=VALUE lines; a value may be in double quotes.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		out[k] = strings.Trim(v, `"`)
	}
	return out, sc.Err()
}

// Options shape an Env's OpenClaw config.
type Options struct {
	// ExtraPaths become memory.search.extraPaths: more files or
	// directories memory search indexes, relative to the workspace or
	// absolute.
	ExtraPaths []string
}

// Env is one workspace as one OpenClaw install sees it, with its own
// home, state directory and config file.
type Env struct {
	T         testing.TB
	OC        *OpenClaw
	Workspace string // agents.defaults.workspace
	Home      string // HOME
	StateDir  string // OPENCLAW_STATE_DIR
	Config    string // OPENCLAW_CONFIG_PATH
	Timeout   time.Duration
	// Isolated is true when commands run in a network namespace of their
	// own; false where the kernel refused one (then they run in the
	// test's own network).
	Isolated bool
}

// Env makes a private OpenClaw home and state directory under the test's
// temporary directory and writes a config that points OpenClaw's default
// agent at workspace, with memory search provider "none".
func (oc *OpenClaw) Env(t testing.TB, workspace string, opts Options) *Env {
	t.Helper()
	abs, err := filepath.Abs(workspace)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	e := &Env{T: t, OC: oc, Workspace: abs,
		Home:     filepath.Join(root, "home"),
		StateDir: filepath.Join(root, "state"),
		Timeout:  DefaultTimeout}
	e.Config = filepath.Join(e.StateDir, "openclaw.json")
	for _, d := range []string{e.Home, e.StateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	search := map[string]any{"provider": "none"}
	if len(opts.ExtraPaths) > 0 {
		search["extraPaths"] = opts.ExtraPaths
	}
	// meta.lastTouchedVersion is what OpenClaw writes into its config on
	// every write of it (setup, doctor), so a config it made names it.
	cfg := map[string]any{
		"meta":   map[string]any{"lastTouchedVersion": oc.Version},
		"agents": map[string]any{"defaults": map[string]any{"workspace": abs}},
		"memory": map[string]any{"search": search},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.Config, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Isolated = netnsWorks(oc.Node)
	if !e.Isolated {
		t.Logf("openclawtest: cannot make a network namespace here; OpenClaw runs with the test's network")
	}
	return e
}

// environ is the whole environment a command gets.
func (e *Env) environ() []string {
	env := []string{
		"HOME=" + e.Home,
		"OPENCLAW_STATE_DIR=" + e.StateDir,
		"OPENCLAW_CONFIG_PATH=" + e.Config,
		"OPENCLAW_PACKAGE_DIR=" + e.OC.Package,
		"PATH=" + filepath.Dir(e.OC.Node) + ":/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TZ=UTC",
		"NO_COLOR=1",
		"CI=1",
	}
	// Node keeps its compile cache under the temporary directory; sharing
	// it between tests saves seconds a command.
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	return env
}

// Run runs `openclaw args...` and returns its stdout.
func (e *Env) Run(ctx context.Context, args ...string) ([]byte, error) {
	return e.node(ctx, append([]string{e.OC.Entry}, args...))
}

// node runs the Node binary with args in the Env.
func (e *Env) node(ctx context.Context, args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.OC.Node, args...)
	cmd.Dir = e.Workspace
	cmd.Env = e.environ()
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.Isolated {
		setNetns(cmd.SysProcAttr)
	}
	// OpenClaw spawns children of its own; the group goes with it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	e.T.Logf("openclawtest: %s (%s)", describe(args), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		what := describe(args)
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("openclaw %s: killed after %s (%w): %v\nstderr:\n%s", what, time.Since(start).Round(time.Second), ctx.Err(), err, stderr.Bytes())
		}
		return stdout.Bytes(), fmt.Errorf("openclaw %s: %w\nstderr:\n%s", what, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

func describe(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.Join(append([]string{filepath.Base(args[0])}, args[1:]...), " ")
}

var (
	netnsOnce sync.Once
	netnsOK   bool
)

// setNetns asks for a new network namespace: directly as root, inside a
// new user namespace otherwise.
func setNetns(a *syscall.SysProcAttr) {
	if os.Geteuid() == 0 {
		a.Cloneflags = syscall.CLONE_NEWNET
		return
	}
	a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	a.GidMappingsEnableSetgroups = false
}

// netnsWorks reports whether a child can start in a new network
// namespace, trying once per test binary.
func netnsWorks(node string) bool {
	netnsOnce.Do(func() {
		cmd := exec.Command(node, "-e", "0")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		setNetns(cmd.SysProcAttr)
		netnsOK = cmd.Run() == nil
	})
	return netnsOK
}

// Index runs `openclaw memory index --force`, a full reindex of the
// workspace's memory files.
func (e *Env) Index(ctx context.Context) error {
	_, err := e.Run(ctx, "memory", "index", "--force")
	return err
}

// Hit is one result of `openclaw memory search --json`.
type Hit struct {
	Path      string  `json:"path"` // relative to the workspace for its own files
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Score     float64 `json:"score"`
	TextScore float64 `json:"textScore"`
	Snippet   string  `json:"snippet"`
	Source    string  `json:"source"` // "memory" or "sessions"
	// Provenance.OriginClass is how much OpenClaw trusts the text:
	// "agent" (its own notes), "owner", "system" or "untrusted".
	Provenance struct {
		OriginClass string `json:"originClass"`
	} `json:"provenance"`
}

// Search runs `openclaw memory search --json` for query with the result
// floor at 0 and room for 50 results, so that a hit with a low score
// (a dated note decays) is still seen. A search also records the hits as
// recalls for promotion, as an agent's memory_search would.
func (e *Env) Search(ctx context.Context, query string) ([]Hit, error) {
	out, err := e.Run(ctx, "memory", "search", "--json", "--min-score", "0", "--max-results", "50", "--query", query)
	if err != nil {
		return nil, err
	}
	var res struct {
		Results []Hit `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("openclaw memory search: %w in %q", err, out)
	}
	return res.Results, nil
}

// Candidate is one short-term recall `openclaw memory promote` ranks for
// copying into MEMORY.md.
type Candidate struct {
	Key           string  `json:"key"`
	Path          string  `json:"path"`
	StartLine     int     `json:"startLine"`
	EndLine       int     `json:"endLine"`
	Snippet       string  `json:"snippet"`
	Score         float64 `json:"score"`
	RecallCount   int     `json:"recallCount"`
	UniqueQueries int     `json:"uniqueQueries"`
	AgeDays       float64 `json:"ageDays"`
}

// Promotion is what `openclaw memory promote --apply --json` reports.
type Promotion struct {
	Candidates []Candidate
	Applied    int    // candidates processed
	Appended   int    // entries appended to MemoryPath
	MemoryPath string // the MEMORY.md written
}

// lowest thresholds: every recalled short-term entry qualifies.
var promoteAll = []string{"--min-score", "0", "--min-recall-count", "1", "--min-unique-queries", "1"}

// PromoteCandidates runs `openclaw memory promote --json` with every
// threshold at its lowest (score 0, one recall, one query), so it lists
// every short-term entry any search recalled, not only those that would
// pass OpenClaw's defaults today. It writes nothing to the workspace.
func (e *Env) PromoteCandidates(ctx context.Context) ([]Candidate, error) {
	p, err := e.promote(ctx, false)
	return p.Candidates, err
}

// PromoteApply runs `openclaw memory promote --apply --json` with the
// same lowest thresholds: it appends every recalled short-term entry to
// the workspace's MEMORY.md, as the nightly dreaming sweep would once
// the entries are recalled often enough.
func (e *Env) PromoteApply(ctx context.Context) (Promotion, error) {
	return e.promote(ctx, true)
}

func (e *Env) promote(ctx context.Context, apply bool) (Promotion, error) {
	args := append([]string{"memory", "promote", "--json"}, promoteAll...)
	if apply {
		args = append(args, "--apply")
	}
	out, err := e.Run(ctx, args...)
	if err != nil {
		return Promotion{}, err
	}
	var res struct {
		Candidates []Candidate `json:"candidates"`
		Apply      *struct {
			Applied    int    `json:"applied"`
			Appended   int    `json:"appended"`
			MemoryPath string `json:"memoryPath"`
		} `json:"apply"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return Promotion{}, fmt.Errorf("openclaw memory promote: %w in %q", err, out)
	}
	p := Promotion{Candidates: res.Candidates}
	if apply {
		if res.Apply == nil {
			return p, fmt.Errorf("openclaw memory promote --apply: no apply report in %q", out)
		}
		p.Applied, p.Appended, p.MemoryPath = res.Apply.Applied, res.Apply.Appended, res.Apply.MemoryPath
	}
	return p, nil
}

// DoctorFix runs `openclaw doctor --fix --non-interactive`, the repair
// OpenClaw's installers run after an upgrade, and returns its report.
// Among much else it merges a workspace TOOLS.md into AGENTS.md and
// deletes it (docs/openclaw.md). It rewrites the Env's config too.
func (e *Env) DoctorFix(ctx context.Context) (string, error) {
	out, err := e.Run(ctx, "doctor", "--fix", "--non-interactive")
	return string(out), err
}

// BootstrapFile is one file OpenClaw considers at a session's start.
type BootstrapFile struct {
	Name    string `json:"name"` // AGENTS.md, SOUL.md, IDENTITY.md, USER.md, BOOTSTRAP.md, MEMORY.md
	Path    string `json:"path"`
	Missing bool   `json:"missing"` // absent; Content is OpenClaw's "[MISSING] Expected at: ..." line
	// Chars is the file's length in UTF-16 code units (JavaScript's
	// string length), the unit of OpenClaw's caps.
	Chars         int    `json:"chars"`
	Injected      bool   `json:"injected"` // in the context at all
	InjectedChars int    `json:"injectedChars"`
	Truncated     bool   `json:"truncated"`
	Content       string `json:"content"` // as injected, after OpenClaw's cuts
}

// Bootstrap is the context OpenClaw's own loader builds at the start of
// a session.
type Bootstrap struct {
	SessionKey string          `json:"sessionKey"`
	Files      []BootstrapFile `json:"files"`
	Warnings   []string        `json:"warnings"`
}

// File returns the file named name, if OpenClaw considered it.
func (b Bootstrap) File(name string) (BootstrapFile, bool) {
	for _, f := range b.Files {
		if f.Name == name {
			return f, true
		}
	}
	return BootstrapFile{}, false
}

// Text is the whole injected context, file after file.
func (b Bootstrap) Text() string {
	var s strings.Builder
	for _, f := range b.Files {
		if f.Injected {
			s.WriteString(f.Content)
			s.WriteString("\n")
		}
	}
	return s.String()
}

// Bootstrap runs e2e/testdata/openclaw/bootstrap.mjs for the main
// session: OpenClaw's resolveBootstrapContextForRun over the workspace.
func (e *Env) Bootstrap(ctx context.Context) (Bootstrap, error) {
	return e.BootstrapFor(ctx, "agent:main:main")
}

// BootstrapFor is Bootstrap for another session key (a subagent's is
// "agent:main:subagent:NAME").
func (e *Env) BootstrapFor(ctx context.Context, sessionKey string) (Bootstrap, error) {
	script, err := bootstrapScript()
	if err != nil {
		return Bootstrap{}, err
	}
	out, err := e.node(ctx, []string{script, e.Workspace, sessionKey})
	if err != nil {
		return Bootstrap{}, err
	}
	var b Bootstrap
	if err := json.Unmarshal(out, &b); err != nil {
		return Bootstrap{}, fmt.Errorf("bootstrap.mjs: %w in %q", err, out)
	}
	return b, nil
}

// bootstrapScript finds bootstrap.mjs beside this package's source.
func bootstrapScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("openclawtest: cannot locate its own source to find bootstrap.mjs")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "e2e", "testdata", "openclaw", "bootstrap.mjs")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("openclawtest: %w", err)
	}
	return p, nil
}
