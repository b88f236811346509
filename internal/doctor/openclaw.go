package doctor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/openclaw"
	"github.com/handoff-sync/handoff/manifest"
)

// draftName is a review draft's name as handoff makes it:
// <stem>.<sha12>.md.
var draftName = regexp.MustCompile(`\.[0-9a-f]{12}\.md$`)

// doctorOpenClaw checks the workspace as OpenClaw, its reader, sees it:
// no draft where OpenClaw reads memory, the layout handoff routes by, the
// files OpenClaw loads at a session's start against what it loads of
// them, the card index, and what OpenClaw's memory search cannot see. It
// reads OpenClaw's config and never edits it.
func doctorOpenClaw(ws string, m *manifest.Manifest) []Check {
	var out []Check
	check := func(name, status, msg, hint string) {
		out = append(out, Check{Scope: "openclaw", Name: name, Status: status, Message: msg, Hint: hint})
	}
	read := func(name string) ([]byte, bool) {
		b, err := readBounded(filepath.Join(ws, name), 16<<20)
		return b, err == nil
	}

	// Drafts an earlier version left in OpenClaw's memory.
	if ents, err := os.ReadDir(filepath.Join(ws, layout.LegacyReviewDir)); err == nil {
		drafts, other := 0, 0
		for _, e := range ents {
			switch n := e.Name(); {
			case !strings.HasSuffix(n, ".md") || strings.HasPrefix(n, "."):
			case draftName.MatchString(n):
				drafts++
			default:
				other++
			}
		}
		if drafts > 0 {
			check("drafts", CheckFail, fmt.Sprintf("%d review draft(s) an earlier handoff left in %s, where OpenClaw indexes them as the agent's own trusted memory", drafts, layout.LegacyReviewDir),
				fmt.Sprintf("run `handoff sync` (or any `handoff review` decision): it moves them to %s once, crash-safe", layout.ReviewDir))
		}
		if other > 0 {
			check("drafts", CheckWarn, fmt.Sprintf("%d other file(s) in %s: OpenClaw indexes them as the agent's memory", other, layout.LegacyReviewDir),
				"handoff did not make them and leaves them; move them out of memory/ unless they are meant as memory")
		}
	}

	home, _ := os.UserHomeDir()
	cfg, cfgPath, cfgErr := openclaw.Find(m.OpenClaw.Config, os.Getenv, home)
	switch {
	case cfgErr != nil:
		check("config", CheckWarn, cfgErr.Error(), "fix the file so that OpenClaw reads it (`openclaw doctor`), or name the right one in the manifest (openclaw.config)")
	case cfg == nil:
		check("config", CheckWarn, fmt.Sprintf("no OpenClaw config at %s", cfgPath),
			"if OpenClaw reads this workspace on this host, set OPENCLAW_CONFIG_PATH for handoff too, or name the file in the manifest (openclaw.config)")
	default:
		v := cfg.Version
		if v == "" {
			v = "an unknown version"
		}
		check("config", CheckOK, fmt.Sprintf("%s, last written by OpenClaw %s", cfg.Path, v), "")
	}

	sticky := openclaw.Layout("")
	if b, ok := read(layout.StateDir + "/openclaw.json"); ok {
		sticky = openclaw.Sticky(b)
	}
	agents, _ := read(openclaw.AgentsFile)
	det := openclaw.Detect(openclaw.Layout(m.OpenClaw.Layout), sticky, agents, cfg)
	switch {
	case det.Guess:
		check("layout", CheckWarn, fmt.Sprintf("TOOLS.md notes go to TOOLS.md: %s", det.Why),
			"OpenClaw 2026.9 and later no longer load TOOLS.md: if that is the OpenClaw reading this workspace, pin `openclaw: {layout: \"2026.9\"}` in the manifest (notes then go to AGENTS.md's ## Tools section); pin \"pre-2026.9\" to keep TOOLS.md")
	case det.Layout == openclaw.LayoutAgents:
		msg := "OpenClaw 2026.9 layout: TOOLS.md notes go to AGENTS.md's ## Tools section (" + det.Why + ")"
		if _, ok := read(openclaw.ToolsFile); ok {
			check("layout", CheckWarn, msg+"; a TOOLS.md is still there, which this OpenClaw neither loads nor indexes",
				"`openclaw doctor --fix` merges it into AGENTS.md; handoff never writes TOOLS.md on this layout")
		} else {
			check("layout", CheckOK, msg, "")
		}
	default:
		check("layout", CheckOK, "TOOLS.md notes go to TOOLS.md ("+det.Why+")", "")
	}

	// What a session's start loads, against what OpenClaw loads of it.
	caps := openclaw.DefaultCaps
	if cfg != nil {
		caps.File = max(cfg.Caps.File, 0)
		caps.Total = max(cfg.Caps.Total, 0)
	}
	abs, _ := filepath.Abs(ws)
	var sizes []string
	cut := ""
	for _, f := range openclaw.Budget(det.Layout, caps, abs, read) {
		switch {
		case f.Missing:
			continue
		case f.Skipped:
			sizes = append(sizes, f.Name+" not loaded")
		default:
			sizes = append(sizes, fmt.Sprintf("%s %d/%d", f.Name, f.Chars, f.Cap))
		}
		if f.Cut() && cut == "" {
			cut = f.Name
		}
	}
	msg := "loaded at a session's start, characters/cap: " + strings.Join(sizes, ", ")
	if len(sizes) == 0 {
		msg = "no file OpenClaw loads at a session's start exists yet"
	}
	if cut != "" {
		check("bootstrap", CheckWarn, msg, fmt.Sprintf("OpenClaw cuts the middle of %s from every session: make it shorter; handoff sends any note that would make a loaded file too long to review (bootstrap-cap)", cut))
	} else {
		check("bootstrap", CheckOK, msg, "")
	}

	// The card index in MEMORY.md.
	if m.OpenClaw.CardIndexOn() {
		mem, _ := read(openclaw.MemoryFile)
		ents, _ := os.ReadDir(filepath.Join(ws, layout.CardsDir))
		switch {
		case openclaw.Index(mem) != "":
			check("card-index", CheckOK, "MEMORY.md carries handoff's index of the cards", "")
		case len(ents) > 0:
			check("card-index", CheckWarn, "MEMORY.md has no index of the cards: a session does not know which cards exist until it searches",
				"the next `handoff sync` writes it")
		}
	}

	// What OpenClaw's memory search cannot see, and what it must not.
	var paths []string
	if cfg != nil {
		paths = cfg.ExtraPaths
	}
	var missing []string
	for _, d := range []string{"rules", ".learnings"} {
		if fi, err := os.Stat(filepath.Join(ws, d)); err != nil || !fi.IsDir() {
			continue
		}
		if !slices.ContainsFunc(paths, func(p string) bool { return covers(ws, home, p, d) }) {
			missing = append(missing, d)
		}
	}
	switch {
	case cfg == nil:
	case len(missing) > 0:
		quoted := make([]string, len(missing))
		for i, d := range missing {
			quoted[i] = fmt.Sprintf("%q", d)
		}
		all := append(slices.Clone(paths), missing...)
		q := make([]string, len(all))
		for i, p := range all {
			q[i] = fmt.Sprintf("%q", p)
		}
		check("extra-paths", CheckWarn, fmt.Sprintf("OpenClaw's memory search does not index %s: notes routed there reach no session", strings.Join(missing, " or ")),
			fmt.Sprintf("add %s to memory.search.extraPaths in %s, so that it reads: memory: { search: { extraPaths: [%s] } } (handoff never edits OpenClaw's config; OpenClaw indexes extra paths as untrusted)",
				strings.Join(quoted, " and "), cfg.Path, strings.Join(q, ", ")))
	default:
		check("extra-paths", CheckOK, "OpenClaw's memory search indexes rules/ and .learnings/ (memory.search.extraPaths)", "")
	}
	for _, p := range paths {
		if covers(ws, home, p, layout.ReviewDir) {
			check("extra-paths", CheckFail, fmt.Sprintf("memory.search.extraPaths entry %q reaches %s: OpenClaw indexes the drafts that wait for a person", p, layout.ReviewDir),
				fmt.Sprintf("narrow it in %s to the directories meant as memory (rules, .learnings)", cfg.Path))
		}
	}
	return out
}

// covers reports whether the extraPaths entry p (relative to the
// workspace, absolute, or "~/…") names the workspace directory rel or a
// directory above it.
func covers(ws, home, p, rel string) bool {
	p = openclaw.Expand(strings.TrimSpace(p), home)
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	p = filepath.Clean(p)
	target := filepath.Join(ws, rel)
	return target == p || strings.HasPrefix(target, p+string(filepath.Separator))
}

// readBounded reads at most limit bytes of a regular file.
func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b := make([]byte, min(fi.Size(), limit))
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return b[:n], nil
}
