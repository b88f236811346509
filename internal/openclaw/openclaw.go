package openclaw

import (
	"bytes"
	"cmp"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Layout is where an OpenClaw version looks for a workspace's notes.
type Layout string

// Layouts. LayoutAuto asks Detect.
const (
	LayoutAuto Layout = "auto"
	// LayoutAgents is OpenClaw 2026.9 and later: TOOLS.md is retired
	// (neither loaded nor indexed; `openclaw doctor --fix` merges it into
	// AGENTS.md and deletes it), and local tool notes live in the
	// "## Tools" section of AGENTS.md.
	LayoutAgents Layout = "2026.9"
	// LayoutTools is OpenClaw before 2026.9: TOOLS.md is loaded at a
	// session's start.
	LayoutTools Layout = "pre-2026.9"
)

// Valid reports whether l is a layout a manifest may name.
func (l Layout) Valid() bool {
	return l == LayoutAuto || l == LayoutAgents || l == LayoutTools
}

// Files handoff routes notes to, and the ones OpenClaw loads.
const (
	AgentsFile    = "AGENTS.md"
	ToolsFile     = "TOOLS.md"
	UserFile      = "USER.md"
	MemoryFile    = "MEMORY.md"
	SoulFile      = "SOUL.md"
	IdentityFile  = "IDENTITY.md"
	BootstrapFile = "BOOTSTRAP.md"
	HeartbeatFile = "HEARTBEAT.md"
	// ToolsHeading is the section of AGENTS.md that holds local tool
	// notes on LayoutAgents, as OpenClaw's own TOOLS.md migration names
	// it; MigratedHeading is the subsection that migration puts the old
	// TOOLS.md under.
	ToolsHeading    = "## Tools"
	MigratedHeading = "### Local notes (migrated from TOOLS.md)"
)

// Bootstrap lists the files OpenClaw loads into a main session's context
// at its start, in its order (a subagent loads only AGENTS.md).
func Bootstrap(l Layout) []string {
	if l == LayoutTools {
		return []string{AgentsFile, SoulFile, ToolsFile, IdentityFile, UserFile, HeartbeatFile, BootstrapFile, MemoryFile}
	}
	return []string{AgentsFile, SoulFile, IdentityFile, UserFile, BootstrapFile, MemoryFile}
}

// optional files are skipped when absent; any other bootstrap file that
// is absent costs the session a "[MISSING] Expected at: <path>" line.
func optional(name string) bool { return name == UserFile || name == MemoryFile }

// Target is where a note for the document target lands on layout l:
// TOOLS.md notes go to AGENTS.md on LayoutAgents; every other target is
// itself.
func Target(l Layout, target string) string {
	if target == ToolsFile && l == LayoutAgents {
		return AgentsFile
	}
	return target
}

// Caps are OpenClaw's bootstrap budgets, in characters (UTF-16 code
// units): each file's, USER.md's (never more than File), and all
// loaded files' together.
type Caps struct {
	File  int `json:"file"`
	User  int `json:"user"`
	Total int `json:"total"`
}

// DefaultCaps are OpenClaw 2026.9's: agents.defaults.bootstrapMaxChars
// and bootstrapTotalMaxChars can change File and Total; USER.md's 4,000
// is fixed, and a lower File lowers it too.
var DefaultCaps = Caps{File: 20000, User: 4000, Total: 60000}

// minFileBudget: with less than this left of the total, OpenClaw loads no
// further file.
const minFileBudget = 64

// Loaded is what a session's start does with one bootstrap file.
type Loaded struct {
	Name    string `json:"name"`
	Chars   int    `json:"chars"`   // its size as OpenClaw counts it
	Cap     int    `json:"cap"`     // the most OpenClaw loads of it: its budget, or what the total leaves
	Missing bool   `json:"missing"` // absent (a "[MISSING]" line when not optional)
	Skipped bool   `json:"skipped"` // not loaded at all: the total ran out before it
}

// Cut reports whether OpenClaw loads less than the whole file.
func (f Loaded) Cut() bool { return !f.Missing && (f.Skipped || f.Chars > f.Cap) }

// Budget walks the bootstrap files of layout l in OpenClaw's order, as
// read returns them (exists false for an absent file), and gives each
// its size and the room OpenClaw gives it. abs is the workspace's
// absolute path, which a missing file's line names.
func Budget(l Layout, caps Caps, abs string, read func(name string) (data []byte, exists bool)) []Loaded {
	caps = caps.withDefaults()
	remaining := max(1, caps.Total)
	var out []Loaded
	for _, name := range Bootstrap(l) {
		data, exists := read(name)
		f := Loaded{Name: name}
		switch {
		case !exists && optional(name):
			f.Missing = true
		case remaining <= 0:
			f.Skipped = true
			f.Missing = !exists
		case !exists:
			f.Missing = true
			remaining -= min(remaining, Chars([]byte("[MISSING] Expected at: "+abs+"/"+name)))
		case remaining < minFileBudget:
			f.Skipped = true
			f.Chars = Chars(data)
		default:
			budget := caps.File
			if name == UserFile {
				budget = min(caps.File, caps.User)
			}
			f.Chars = Chars(data)
			f.Cap = max(1, min(budget, remaining))
			remaining -= min(f.Chars, f.Cap)
		}
		out = append(out, f)
	}
	return out
}

func (c Caps) withDefaults() Caps {
	c.File = cmp.Or(c.File, DefaultCaps.File)
	c.User = cmp.Or(c.User, DefaultCaps.User)
	c.Total = cmp.Or(c.Total, DefaultCaps.Total)
	return c
}

// Overflow compares the bootstrap before and after a change and returns
// the first file the change leaves cut that was whole before (the
// changed file itself included, and a file that was cut before when it
// is the changed one), or false.
func Overflow(before, after []Loaded, changed string) (Loaded, bool) {
	was := map[string]bool{}
	for _, f := range before {
		was[f.Name] = f.Cut()
	}
	for _, f := range after {
		if f.Cut() && (!was[f.Name] || f.Name == changed) {
			return f, true
		}
	}
	return Loaded{}, false
}

// Chars is the size of a file's content as OpenClaw counts it: UTF-16
// code units of its text with trailing white space removed (JavaScript's
// length after trimEnd).
func Chars(data []byte) int {
	s := bytes.TrimRightFunc(data, jsSpace)
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		s = s[size:]
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// jsSpace is JavaScript's white space and line terminators, which
// trimEnd removes.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0xfeff, 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// dated is OpenClaw's name for a daily note anywhere under memory/: its
// memory search decays it over 30 days and its nightly sweep can promote
// it into MEMORY.md.
var dated = regexp.MustCompile(`(?i)^\d{4}-\d{2}-\d{2}(?:-[^/]+)?\.md$`)

// Dated reports whether OpenClaw reads a file of this name under memory/
// as a dated daily note.
func Dated(name string) bool { return dated.MatchString(name) }

// InsertTools adds a note at the end of the "## Tools" section of an
// AGENTS.md, where OpenClaw's own TOOLS.md migration puts local notes,
// found as that migration finds it (a level-2 heading "Tools", outside
// code fences, up to the next heading of level 1 or 2). Without one, the
// section is added at the end. note is taken as a document append's
// content: trimmed of surrounding blank space, and ending in one newline.
func InsertTools(agents []byte, note string) []byte {
	text := strings.Trim(note, "\r\n\t ") + "\n"
	at, ok := toolsSectionEnd(agents)
	if !ok {
		return joinSpaced(agents, []byte(ToolsHeading+"\n\n"+text), nil)
	}
	return joinSpaced(agents[:at], []byte(text), agents[at:])
}

// joinSpaced puts addition between before and after with a blank line on
// each side, as OpenClaw's migration spaces them.
func joinSpaced(before, addition, after []byte) []byte {
	out := make([]byte, 0, len(before)+len(addition)+len(after)+4)
	out = append(out, before...)
	switch {
	case len(before) == 0, bytes.HasSuffix(before, []byte("\n\n")):
	case bytes.HasSuffix(before, []byte("\n")):
		out = append(out, '\n')
	default:
		out = append(out, "\n\n"...)
	}
	out = append(out, addition...)
	switch {
	case len(after) == 0, bytes.HasSuffix(addition, []byte("\n\n")):
	case bytes.HasSuffix(addition, []byte("\n")):
		out = append(out, '\n')
	default:
		out = append(out, "\n\n"...)
	}
	return append(out, after...)
}

var (
	fenceOpen  = regexp.MustCompile("^\\s*(`{3,}|~{3,})")
	fenceClose = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*$")
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.+?)\s*#*\s*$`)
)

// toolsSectionEnd is the byte offset where the "## Tools" section of an
// AGENTS.md ends, and whether it has one.
func toolsSectionEnd(content []byte) (int, bool) {
	inside := false
	var fence string
	offset := 0
	for offset < len(content) {
		end := bytes.IndexByte(content[offset:], '\n')
		next := len(content)
		if end >= 0 {
			next = offset + end + 1
		}
		line := strings.TrimSuffix(string(content[offset:next]), "\n")
		open := fenceOpen.FindStringSubmatch(line)
		closing := fenceClose.FindStringSubmatch(line)
		switch {
		case open != nil && fence == "":
			fence = open[1]
		case closing != nil && fence != "" && closing[1][0] == fence[0] && len(closing[1]) >= len(fence):
			fence = ""
		case fence == "":
			if h := heading.FindStringSubmatch(line); h != nil {
				depth := len(h[1])
				if inside && depth <= 2 {
					return offset, true
				}
				if depth == 2 && strings.ToLower(strings.TrimSpace(h[2])) == "tools" {
					inside = true
				}
			}
		}
		offset = next
	}
	return len(content), inside
}
