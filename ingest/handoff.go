package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/handoff-sync/handoff/internal/openclaw"

	"sigs.k8s.io/yaml"

	"github.com/handoff-sync/handoff/internal/yamlguard"
)

// maxFrontMatterExpanded bounds a card's front matter once its YAML aliases
// are expanded.
const maxFrontMatterExpanded = 64 << 10

// Section keys: the lowercase names of the sections that split a handoff.
// Any other "## " line belongs to the body of the section above it.
const (
	SectionType            = "type"
	SectionTitle           = "title"
	SectionSummary         = "summary"
	SectionDurableFacts    = "durable facts"
	SectionEvidence        = "evidence"
	SectionAction          = "recommended memory action"
	SectionTargetCard      = "target card"
	SectionExpectedSHA     = "expected card sha256"
	SectionCardContent     = "suggested card content"
	SectionTargetDocument  = "target document"
	SectionDocumentContent = "suggested document content"
	SectionReviewerNotes   = "reviewer notes"
	// The continuity sections: what the next agent in the repository
	// should know. They never change routing and never enter a card or a
	// document (docs/handoff-format.md, "Continuity").
	SectionOpenQuestions = "open questions"
	SectionNextSteps     = "next steps"
	SectionContinues     = "continues"
)

// sectionHeadings maps each section key to the heading a writer should use.
var sectionHeadings = map[string]string{
	SectionType:            "Type",
	SectionTitle:           "Title",
	SectionSummary:         "Summary",
	SectionDurableFacts:    "Durable facts",
	SectionEvidence:        "Evidence",
	SectionAction:          "Recommended memory action",
	SectionTargetCard:      "Target card",
	SectionExpectedSHA:     "Expected card SHA256",
	SectionCardContent:     "Suggested card content",
	SectionTargetDocument:  "Target document",
	SectionDocumentContent: "Suggested document content",
	SectionReviewerNotes:   "Reviewer notes",
	SectionOpenQuestions:   "Open questions",
	SectionNextSteps:       "Next steps",
	SectionContinues:       "Continues",
}

// Memory actions a handoff can recommend.
const (
	ActionCreateCard = "create-card"
	ActionUpdateCard = "update-card"
	ActionNoCard     = "no-card"
)

// handoffTypes are the values the Type section may take.
var handoffTypes = map[string]bool{
	"setup": true, "workflow": true, "bugfix": true, "decision": true,
	"security": true, "preference": true, "research": true, "project-context": true,
}

// Handoff is a parsed memory handoff. Parse fills it; Validate checks it.
type Handoff struct {
	// Sections maps each section key present in the file to its body as
	// written: the text between its heading line and the next known
	// heading, trimmed of surrounding white space. A heading with nothing
	// under it maps to "". The fields below read a placeholder body such
	// as "(none)" as absent (see IsPlaceholder); Sections keeps it.
	Sections map[string]string

	Type    string // the Type section, lowercased
	Title   string
	Summary string
	Action  string // the Recommended memory action section, lowercased

	// Card is set when the Target card, Expected card SHA256 or Suggested
	// card content section is present: neither empty nor a placeholder.
	Card *CardChange
	// Document is set when the Target document or Suggested document
	// content section is present.
	Document *DocChange

	// OpenQuestions and NextSteps are the continuity lists, one item per
	// list line ("- ", "* " or "1. " markers dropped; other lines join the
	// item above). Continues names the earlier handoff this one carries
	// on: its file name or SHA-256, as written.
	OpenQuestions, NextSteps []string
	Continues                string

	raw string // the whole file, as parsed, for the content scans
}

// CardChange is the card half of a handoff.
type CardChange struct {
	Name           string // the Target card section
	ExpectedSHA256 string // the Expected card SHA256 section, lowercased
	// Content is exactly what the card file gets: the Suggested card content
	// section plus one "\n", or "" when that section is absent. When one
	// fenced code block is the whole section, its inside stands for the
	// section (see unfence).
	Content string
}

// DocChange is the document half of a handoff.
type DocChange struct {
	Target  string // the Target document section, a workspace-relative path
	Content string // the Suggested document content section, without a trailing newline
}

// ParseError reports a file that is not a handoff at all (a malformed one).
type ParseError struct {
	Reason string // always ReasonParseError
	Msg    string
}

func (e *ParseError) Error() string { return e.Reason + ": " + e.Msg }

func parseErrorf(format string, args ...any) *ParseError {
	return &ParseError{Reason: ReasonParseError, Msg: fmt.Sprintf(format, args...)}
}

// Problem is one reason a parsed handoff cannot be applied automatically.
type Problem struct {
	Reason  string // a reason code, see Reasons
	Field   string // the section key concerned, or "" for the whole file
	Message string // lower-case, says what to fix
}

func (p Problem) String() string { return p.Reason + ": " + p.Message }

func problemf(reason, field, format string, args ...any) Problem {
	return Problem{Reason: reason, Field: field, Message: fmt.Sprintf(format, args...)}
}

var titleRE = regexp.MustCompile(`^#[ \t]+(?i:memory handoff)[ \t\r]*$`)

// Parse parses a handoff. It returns a *ParseError when data is not valid
// UTF-8, holds a NUL byte, does not start with a "# Memory Handoff" line, has
// no known section, or has a known section twice. CRLF line endings are
// accepted, and section bodies use "\n". A leading byte order mark is
// tolerated here and reported by Validate. A section whose whole body is a
// placeholder counts as absent, and card content wrapped whole in one code
// fence is read from inside the fence.
func Parse(data []byte) (*Handoff, error) {
	if !utf8.Valid(data) {
		return nil, parseErrorf("the file is not valid UTF-8; save it as UTF-8")
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, parseErrorf("NUL byte at offset %d; remove it", i)
	}
	raw := string(data)
	text := strings.TrimPrefix(raw, "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")

	h := &Handoff{Sections: map[string]string{}, raw: raw}
	titled := false
	key := "" // the section being read
	// The section's body is its lines joined by "\n": the text from the
	// start of its first line to the end of its last, taken as it is.
	from, to := -1, -1
	cardBody := "" // the card content section untrimmed, for unfence
	flush := func() {
		if key != "" {
			b := ""
			if from >= 0 {
				b = text[from:to]
			}
			h.Sections[key] = strings.TrimSpace(b)
			if key == SectionCardContent {
				cardBody = b
			}
		}
	}
	for n, start := 0, 0; start <= len(text); n++ {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line := text[start:end]
		lineStart := start
		start = end + 1
		if !titled {
			if strings.Trim(line, " \t\r") == "" {
				continue
			}
			if !titleRE.MatchString(line) {
				return nil, parseErrorf("line %d: the first line must be %q", n+1, "# Memory Handoff")
			}
			titled = true
			continue
		}
		next, ok := sectionKey(line)
		if !ok {
			if from < 0 {
				from = lineStart
			}
			to = end
			continue
		}
		flush()
		if _, dup := h.Sections[next]; dup {
			return nil, parseErrorf("line %d: section %q appears twice; merge them into one", n+1, "## "+sectionHeadings[next])
		}
		h.Sections[next] = ""
		key, from, to = next, -1, -1
	}
	flush()
	if !titled {
		return nil, parseErrorf("the file is empty; a handoff starts with %q", "# Memory Handoff")
	}
	if len(h.Sections) == 0 {
		return nil, parseErrorf("no known section; add %q, %q and the other sections", "## Type", "## Title")
	}

	read := func(k string) string { return sectionText(h.Sections, k) }
	h.Type = strings.ToLower(read(SectionType))
	h.Title = read(SectionTitle)
	h.Summary = read(SectionSummary)
	h.Action = strings.ToLower(read(SectionAction))
	name, sha, content := read(SectionTargetCard), read(SectionExpectedSHA), read(SectionCardContent)
	if name != "" || sha != "" || content != "" {
		h.Card = &CardChange{Name: name, ExpectedSHA256: strings.ToLower(sha)}
		if content != "" {
			if inner, ok := unfence(cardBody); ok {
				content = strings.TrimSpace(inner)
			}
		}
		if content != "" {
			h.Card.Content = content + "\n"
		}
	}
	// Document content is kept as written, fences included: a code block
	// is a fair thing to append to a document.
	if target, content := read(SectionTargetDocument), read(SectionDocumentContent); target != "" || content != "" {
		h.Document = &DocChange{Target: target, Content: content}
	}
	h.OpenQuestions = listItems(read(SectionOpenQuestions))
	h.NextSteps = listItems(read(SectionNextSteps))
	h.Continues = read(SectionContinues)
	return h, nil
}

// listMarkerRE matches a list item's marker: "- ", "* ", "+ " or "1. ".
var listMarkerRE = regexp.MustCompile(`^\s*(?:[-*+]|\d{1,3}[.)])\s+`)

// listItems reads a section's body as a list: each marked line starts an
// item, an unmarked line continues the one above (or is an item of its
// own when none is), blank lines end nothing.
func listItems(body string) []string {
	var items []string
	cont := false
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
		case listMarkerRE.MatchString(line):
			items = append(items, strings.TrimSpace(listMarkerRE.ReplaceAllString(line, "")))
			cont = true
		case cont:
			items[len(items)-1] += " " + t
		default:
			items = append(items, t)
			cont = true
		}
	}
	return items
}

// sectionText returns a section's body, or "" when it is absent, empty or
// a placeholder.
func sectionText(sections map[string]string, key string) string {
	v := sections[key]
	if IsPlaceholder(v) {
		return ""
	}
	return v
}

// placeholderWords are the words that, alone, say a section is empty. A
// parenthesised note may start with one of them.
var placeholderWords = []string{"none", "n/a", "na", "not applicable", "null", "nil", "-", "\u2013", "\u2014"}

// IsPlaceholder reports whether a section body says only that there is
// nothing here, so that the section counts as absent. Case aside, the body
// is one line: one of placeholderWords, optionally followed by one ".", or
// a parenthesised note that starts with one of them, followed by nothing,
// by ",", ";", ":", ".", "(", or by a space and a dash, as in
// "(n/a — card-only)". Any other text, or a placeholder with other text
// beside it, is content. An empty body is not a placeholder; it is empty.
func IsPlaceholder(body string) bool {
	s := strings.ToLower(strings.TrimSpace(body))
	if s == "" || strings.ContainsAny(s, "\n\r") {
		return false
	}
	if slices.Contains(placeholderWords, strings.TrimSuffix(s, ".")) {
		return true
	}
	note, ok := strings.CutPrefix(s, "(")
	if !ok {
		return false
	}
	if note, ok = strings.CutSuffix(note, ")"); !ok {
		return false
	}
	note = strings.TrimSpace(note)
	for _, w := range placeholderWords {
		rest, ok := strings.CutPrefix(note, w)
		if !ok {
			continue
		}
		after := strings.TrimLeft(rest, " \t")
		if after == "" {
			return true
		}
		// A dash needs a space before it: "(na-ive)" is a word.
		r, _ := utf8.DecodeRuneInString(after)
		if strings.ContainsRune(",;:.(", r) || (len(after) < len(rest) && strings.ContainsRune("-\u2013\u2014", r)) {
			return true
		}
	}
	return false
}

// cardFenceInfos are the info strings (lowercased) a code fence around the
// whole card content may carry.
var cardFenceInfos = map[string]bool{"": true, "markdown": true, "md": true, "yaml": true, "yml": true, "text": true, "txt": true}

// unfence returns the inside of body when one fenced code block is the
// whole of it, as CommonMark reads fences: blank lines may surround the
// block, nothing else may. The opening line is up to three spaces, three or
// more backticks or tildes, and an info string from cardFenceInfos; the
// block ends at the first line of at least as many of the same character
// (up to three spaces before, blanks after), which must be its last
// non-blank line. Inside lines lose up to as many leading spaces as the
// opening line has.
func unfence(body string) (string, bool) {
	lines := strings.Split(body, "\n")
	blank := func(l string) bool { return strings.Trim(l, " \t\r") == "" }
	first, last := 0, len(lines)-1
	for first <= last && blank(lines[first]) {
		first++
	}
	for last > first && blank(lines[last]) {
		last--
	}
	if last <= first {
		return "", false
	}
	indent, fence, info, ok := fenceOpener(lines[first])
	if !ok || !cardFenceInfos[strings.ToLower(info)] {
		return "", false
	}
	for _, l := range lines[first+1 : last] {
		if closesFence(l, fence) {
			return "", false // the block ends early: it is only part of the section
		}
	}
	if !closesFence(lines[last], fence) {
		return "", false
	}
	inner := make([]string, 0, last-first-1)
	for _, l := range lines[first+1 : last] {
		n := 0
		for n < indent && n < len(l) && l[n] == ' ' {
			n++
		}
		inner = append(inner, l[n:])
	}
	return strings.Join(inner, "\n"), true
}

// fenceOpener parses a line that opens a fenced code block: its
// indentation, the fence itself ("```", "~~~~", ...) and the info string.
// A backtick fence's info string may not hold a backtick.
func fenceOpener(line string) (indent int, fence, info string, ok bool) {
	indent = len(line) - len(strings.TrimLeft(line, " "))
	rest := line[indent:]
	if indent > 3 || rest == "" || (rest[0] != '`' && rest[0] != '~') {
		return 0, "", "", false
	}
	n := len(rest) - len(strings.TrimLeft(rest, rest[:1]))
	if n < 3 {
		return 0, "", "", false
	}
	info = strings.Trim(rest[n:], " \t\r")
	if rest[0] == '`' && strings.ContainsRune(info, '`') {
		return 0, "", "", false
	}
	return indent, rest[:n], info, true
}

// closesFence reports whether line closes a block opened by fence.
func closesFence(line, fence string) bool {
	indent := len(line) - len(strings.TrimLeft(line, " "))
	if indent > 3 {
		return false
	}
	rest := strings.TrimRight(line[indent:], " \t\r")
	return len(rest) >= len(fence) && strings.Trim(rest, fence[:1]) == ""
}

// sectionKey reports whether line is the heading of a known section, and
// which. A heading is "##", one or more spaces or tabs, then the name, matched
// case-insensitively in ASCII only (so look-alike letters never split).
func sectionKey(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "##")
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return "", false
	}
	name := strings.Trim(rest, " \t\r")
	var lower [32]byte // longer than any known name
	if len(name) > len(lower) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= utf8.RuneSelf {
			return "", false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	// The lookup with a converted key does not copy it; the key returned
	// is the map's own.
	key, known := sectionKeys[string(lower[:len(name)])]
	return key, known
}

// sectionKeys maps each known section's key to itself.
var sectionKeys = func() map[string]string {
	m := make(map[string]string, len(sectionHeadings))
	for k := range sectionHeadings {
		m[k] = k
	}
	return m
}()

// Lint parses data and validates the result. A file that does not parse
// yields a single parse-error problem.
func Lint(data []byte) []Problem {
	h, err := Parse(data)
	if err != nil {
		msg := err.Error()
		if pe, ok := errors.AsType[*ParseError](err); ok {
			msg = pe.Msg
		}
		return []Problem{{Reason: ReasonParseError, Message: msg}}
	}
	return h.Validate()
}

// Validate runs every check that does not need the workspace and returns the
// problems found, most important first, or nil when the handoff may be
// planned. The first problem's reason is the one a review draft is filed
// under. Checks that need the workspace (card-exists, card-missing,
// hash-conflict, symlinks) belong to the planner.
func (h *Handoff) Validate() []Problem {
	var ps []Problem
	add := func(reason, field, format string, args ...any) {
		ps = append(ps, problemf(reason, field, format, args...))
	}

	raw := h.raw
	if raw == "" {
		raw = h.joinSections()
	}
	if p := hiddenProblem(raw); p != nil {
		ps = append(ps, *p)
	}
	if p := secretProblem(raw); p != nil {
		ps = append(ps, *p)
	}
	ps = append(ps, h.unfilledProblems()...)
	if p := injectionProblem(h); p != nil {
		ps = append(ps, *p)
	}

	for _, k := range []string{SectionType, SectionTitle, SectionSummary, SectionAction} {
		switch v := h.Sections[k]; {
		case strings.TrimSpace(v) == "":
			add(ReasonMissingSection, k, "add a non-empty %q section", "## "+sectionHeadings[k])
		case IsPlaceholder(v):
			add(ReasonMissingSection, k, "the %q section holds only %q, which reads as absent; write it out", "## "+sectionHeadings[k], clip(v))
		}
	}
	if h.Type != "" && !handoffTypes[h.Type] {
		add(ReasonInvalidType, SectionType, "type %q is not known; use one of setup, workflow, bugfix, decision, security, preference, research, project-context", clip(h.Type))
	}
	switch h.Action {
	case "", ActionCreateCard, ActionUpdateCard, ActionNoCard:
	default:
		add(ReasonUnknownAction, SectionAction, "action %q is not known; use create-card, update-card or no-card", clip(h.Action))
	}
	if h.Card != nil && h.Document != nil {
		add(ReasonBothCardAndDocument, "", "a handoff either changes a card or appends to a document; remove the card sections or the document sections")
	}

	switch h.Action {
	case ActionCreateCard, ActionUpdateCard:
		ps = append(ps, h.validateCard()...)
	case ActionNoCard:
		ps = append(ps, h.validateDocument()...)
	}
	return dropUnderPlaceholders(ps)
}

// validateCard checks the card half of a create-card or update-card handoff.
func (h *Handoff) validateCard() []Problem {
	var ps []Problem
	c := h.Card
	if c == nil {
		c = &CardChange{}
	}
	if c.Name == "" {
		ps = append(ps, problemf(ReasonMissingSection, SectionTargetCard, "%s needs a %q section naming the card, like \"my-topic.md\"", h.Action, "## Target card"))
	}
	if c.Content == "" {
		ps = append(ps, problemf(ReasonMissingSection, SectionCardContent, "%s needs a %q section with the whole card", h.Action, "## Suggested card content"))
	}
	if c.Name != "" && !isCardName(c.Name) {
		ps = append(ps, problemf(ReasonUnsafeCardName, SectionTargetCard, "card name %q is not allowed; use a plain file name of letters, digits, '.', '_' or '-' that starts with a letter or digit and ends in .md", clip(c.Name)))
	}
	if c.Name != "" && isCardName(c.Name) && openclaw.Dated(c.Name) {
		ps = append(ps, problemf(ReasonDatedCardName, SectionTargetCard, "card name %q starts with a date, which OpenClaw reads as a daily note (decayed in search, promoted into MEMORY.md by its nightly sweep); name the card by its topic, like %q", c.Name, undated(c.Name)))
	}
	if c.Content != "" {
		if _, p := FrontMatter(c.Content); p != nil {
			ps = append(ps, *p)
		}
	}
	if h.Action == ActionUpdateCard && !sha256RE.MatchString(c.ExpectedSHA256) {
		ps = append(ps, problemf(ReasonMissingExpectedSHA, SectionExpectedSHA, "update-card needs an %q section holding the 64 hex digit sha256 of the card as you last read it (on a writer host, its line in SHA256SUMS in the mirror)", "## Expected card SHA256"))
	}
	return ps
}

// undated is a card name without its leading date, for a hint.
func undated(name string) string {
	rest := strings.TrimLeft(name[10:], "-")
	if rest == "" || strings.EqualFold(rest, ".md") {
		return "my-topic.md"
	}
	return rest
}

// validateDocument checks a no-card handoff.
func (h *Handoff) validateDocument() []Problem {
	d := h.Document
	if d == nil {
		if h.Card != nil {
			return []Problem{{Reason: ReasonUnknownAction, Field: SectionAction, Message: "no-card cannot carry a card; use create-card or update-card, or remove the card sections"}}
		}
		return []Problem{problemf(ReasonNoTarget, SectionTargetDocument, "no-card with no %q leaves nothing to apply; a person will review it, or name a document to append to", "## Target document")}
	}
	var ps []Problem
	if d.Target == "" {
		ps = append(ps, problemf(ReasonMissingSection, SectionTargetDocument, "add a %q section naming the document to append to", "## Target document"))
	}
	if d.Content == "" {
		ps = append(ps, problemf(ReasonMissingSection, SectionDocumentContent, "add a %q section with the text to append", "## Suggested document content"))
	}
	if d.Target != "" && !IsAllowedDocument(d.Target) {
		ps = append(ps, problemf(ReasonUnsafeTarget, SectionTargetDocument, "target %q is not allowed; use TOOLS.md, USER.md, rules/NAME.md, .learnings/LEARNINGS.md, .learnings/ERRORS.md or .learnings/FEATURE_REQUESTS.md", clip(d.Target)))
	}
	if n := headingLine(d.Content); n > 0 {
		ps = append(ps, problemf(ReasonHeadingInDocument, SectionDocumentContent, "line %d of the document content is a \"#\" or \"##\" heading; use \"###\" or deeper", n))
	}
	return ps
}

// joinSections rebuilds scan text for a Handoff that Parse did not make.
func (h *Handoff) joinSections() string {
	var b strings.Builder
	for _, k := range []string{SectionType, SectionTitle, SectionSummary, SectionDurableFacts, SectionEvidence,
		SectionAction, SectionTargetCard, SectionExpectedSHA, SectionCardContent, SectionTargetDocument,
		SectionDocumentContent, SectionReviewerNotes} {
		b.WriteString(h.Sections[k])
		b.WriteByte('\n')
	}
	return b.String()
}

// clip shortens a writer's value for quoting in a message.
func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

var (
	// CardNameRE matches an allowed card file name (memory/cards/<name>).
	CardNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*\.md$`)
	// RuleTargetRE matches an allowed rules document. The name may not start
	// with a dot, which rules out hidden files, "." and "..".
	RuleTargetRE = regexp.MustCompile(`^rules/[A-Za-z0-9_-][A-Za-z0-9._-]*\.md$`)

	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// maxNameLen is the longest file name most file systems accept.
const maxNameLen = 255

func isCardName(name string) bool {
	return len(name) <= maxNameLen && CardNameRE.MatchString(name)
}

// fixedDocuments are the documents other than rules/*.md that no-card
// handoffs may append to, as workspace-relative paths.
var fixedDocuments = map[string]bool{
	"TOOLS.md":                       true,
	"USER.md":                        true,
	".learnings/LEARNINGS.md":        true,
	".learnings/ERRORS.md":           true,
	".learnings/FEATURE_REQUESTS.md": true,
}

// IsAllowedDocument reports whether target is a document a no-card handoff
// may append to. The match is exact: no case folding, no path cleaning.
func IsAllowedDocument(target string) bool {
	if fixedDocuments[target] {
		return true
	}
	return len(target) <= len("rules/")+maxNameLen && RuleTargetRE.MatchString(target)
}

// headingLine returns the 1-based number of the first line of content that
// is a level-1 or level-2 ATX heading ("#", "## x", up to three leading
// spaces), or 0 when there is none.
func headingLine(content string) int {
	for i, line := range strings.Split(content, "\n") {
		n := 0
		for n < 3 && n < len(line) && line[n] == ' ' {
			n++
		}
		l := strings.TrimRight(line[n:], " \t\r")
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes == 0 || hashes > 2 {
			continue
		}
		if rest := l[hashes:]; rest == "" || rest[0] == ' ' || rest[0] == '\t' {
			return i + 1
		}
	}
	return 0
}

// FrontMatter parses the YAML front matter that card content must start
// with: a "---" first line, a closing "---" line, and between them a YAML
// mapping with a non-empty scalar topic and category and a tags list. It
// returns the mapping, or a missing-front-matter or invalid-front-matter
// problem that says what to fix.
func FrontMatter(content string) (map[string]any, *Problem) {
	lines := strings.Split(content, "\n")
	isFence := func(l string) bool { return strings.TrimRight(l, " \t\r") == "---" }
	if !isFence(lines[0]) {
		msg := "card content must start with a \"---\" line opening YAML front matter with topic, category and tags"
		if _, _, _, ok := fenceOpener(lines[0]); ok {
			msg += "; it starts with a code fence, which is read as the card only when the fence is the whole section (nothing before or after it, no line inside closing it, info string markdown, md, yaml, yml, text, txt or none)"
		}
		return nil, &Problem{Reason: ReasonMissingFrontMatter, Field: SectionCardContent, Message: msg}
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if isFence(lines[i]) {
			end = i
			break
		}
	}
	invalid := func(format string, args ...any) (map[string]any, *Problem) {
		p := problemf(ReasonInvalidFrontMatter, SectionCardContent, format, args...)
		return nil, &p
	}
	if end < 0 {
		return invalid("the front matter is not closed; add a \"---\" line after it")
	}
	m, ok := plainFrontMatter(lines[1:end])
	if !ok {
		v, msg := yamlFrontMatter(lines[1:end])
		if msg != "" {
			return invalid("%s", msg)
		}
		m, ok = v.(map[string]any)
	}
	if !ok {
		return invalid("the front matter must be a YAML mapping like \"topic: ...\"; add topic, category and tags")
	}
	if msg := frontMatterKeys(m); msg != "" {
		return invalid("%s", msg)
	}
	// YAML escapes ("\u202e") hide characters from the check on the raw
	// file; look at the decoded values too.
	if hiddenIn(m) {
		p := problemf(ReasonHiddenCharacters, SectionCardContent, "the front matter decodes to invisible or control characters (written as YAML escapes); remove them")
		return nil, &p
	}
	return m, nil
}

// yamlFrontMatter decodes the lines between the front matter's fences as
// YAML, or says what is wrong with them.
func yamlFrontMatter(lines []string) (any, string) {
	fm := []byte(strings.Join(lines, "\n"))
	if !yamlguard.Within(fm, maxFrontMatterExpanded) {
		return nil, "the front matter repeats too much through YAML aliases; write it out without anchors and aliases"
	}
	var v any
	if err := yaml.UnmarshalStrict(fm, &v); err != nil {
		return nil, fmt.Sprintf("the front matter is not valid YAML (%s); fix it", clip(yamlErrorText(err)))
	}
	return v, ""
}

// frontMatterKeys says what the front matter's topic, category and tags
// lack, or returns "" when they are all there. It names the missing keys,
// and the keys present that look like one of them but do not stand in for
// it ("title:" for "topic:").
func frontMatterKeys(m map[string]any) string {
	isList := func(v any) bool { _, ok := v.([]any); return ok }
	keys := slices.Sorted(maps.Keys(m))
	var missing, examples, standIns, wrong []string
	for _, k := range []struct {
		name, example, want string
		ok                  func(any) bool
		lookalikes          []string
	}{
		{"topic", `"topic: ..."`, "one non-empty value", isScalar, []string{"title", "name", "subject"}},
		{"category", `"category: ..."`, "one non-empty value", isScalar, []string{"categories", "type", "kind"}},
		{"tags", `"tags: [a, b]"`, "a list such as [go, ssh]", isList, []string{"tag", "keywords", "labels"}},
	} {
		v, present := m[k.name]
		if present {
			if !k.ok(v) {
				wrong = append(wrong, k.name+" must be "+k.want)
			}
			continue
		}
		missing = append(missing, k.name)
		examples = append(examples, k.example)
		for _, key := range keys {
			if strings.EqualFold(key, k.name) || slices.Contains(k.lookalikes, strings.ToLower(key)) {
				standIns = append(standIns, fmt.Sprintf("%q does not stand for %q", clip(key)+":", k.name+":"))
			}
		}
	}
	var parts []string
	if missing != nil {
		p := "the front matter lacks " + andList(missing) + "; add " + andList(examples)
		if standIns != nil {
			p += " (" + strings.Join(standIns, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if wrong != nil {
		parts = append(parts, "in the front matter, "+strings.Join(wrong, " and "))
	}
	return strings.Join(parts, "; ")
}

// andList joins words as "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// hiddenIn reports whether any decoded string in v holds a hidden rune.
func hiddenIn(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsFunc(v, isHiddenRune)
	case []any:
		for _, e := range v {
			if hiddenIn(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if hiddenIn(k) || hiddenIn(e) {
				return true
			}
		}
	}
	return false
}

// isScalar reports whether a front matter value is a non-empty string, a
// number or a boolean. YAML 1.1 reads "yes", "on" or "y" as booleans, and the
// card is written verbatim anyway, so those count as values too.
func isScalar(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v) != ""
	case float64, bool:
		return true
	}
	return false
}

// yamlErrorText drops the converter's wrapping from a sigs.k8s.io/yaml error.
func yamlErrorText(err error) string {
	s := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "yaml: "} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// AppendDocument returns a document's new bytes after a no-card handoff
// appends content (already trimmed) to its old bytes. An absent or empty
// document becomes content and a newline; otherwise the old text loses its
// trailing newlines and gains a blank line, content and a newline.
func AppendDocument(old []byte, content string) []byte {
	if len(old) == 0 {
		return []byte(content + "\n")
	}
	// One allocation of the exact size, not zeroed (bytes.Join): a
	// document grows with the memory and a batch appends to it often.
	return bytes.Join([][]byte{bytes.TrimRight(old, "\n"), []byte("\n\n"), []byte(content), []byte("\n")}, nil)
}

// hiddenProblem reports the first character that can hide or disguise text:
// C0 controls other than tab, newline and carriage return, DEL, C1 controls,
// bidirectional controls, zero-width and other invisible characters, Unicode
// tag characters, runs of variation selectors, and a carriage return that does
// not end a line.
func hiddenProblem(s string) *Problem {
	var first rune
	firstLine, count, line := 0, 0, 1
	prevVS := false
	for i := 0; i < len(s); {
		// Printable ASCII, most of any handoff, is never hidden: skip it
		// without decoding.
		if c := s[i]; c >= 0x20 && c < 0x7f {
			prevVS = false
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		vs := isVariationSelector(r)
		hidden := isHiddenRune(r) || (vs && prevVS) ||
			(r == '\r' && i+1 < len(s) && s[i+1] != '\n')
		prevVS = vs
		if hidden {
			if count == 0 {
				first, firstLine = r, line
			}
			count++
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	if count == 0 {
		return nil
	}
	more := ""
	if count > 1 {
		more = fmt.Sprintf(" (and %d more)", count-1)
	}
	p := problemf(ReasonHiddenCharacters, "", "line %d holds the invisible or control character U+%04X%s; remove it", firstLine, first, more)
	return &p
}

func isHiddenRune(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\t' && r != '\n' && r != '\r'
	case r >= 0x7f && r <= 0x9f: // DEL and C1 controls
		return true
	case r >= 0x200b && r <= 0x200f, // zero-width space, joiners, LRM, RLM
		r >= 0x202a && r <= 0x202e,   // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x2064,   // word joiner, invisible operators
		r >= 0x2066 && r <= 0x206f,   // bidi isolates, deprecated format chars
		r >= 0xfff9 && r <= 0xfffb,   // interlinear annotation
		r >= 0xe0000 && r <= 0xe007f: // tag characters
		return true
	}
	switch r {
	case 0x00ad, // soft hyphen
		0x034f,         // combining grapheme joiner
		0x061c,         // arabic letter mark
		0x115f, 0x1160, // hangul fillers
		0x17b4, 0x17b5, // khmer inherent vowels
		0x180e, // mongolian vowel separator
		0x3164, // hangul filler
		0xfeff, // zero-width no-break space, byte order mark
		0xffa0: // halfwidth hangul filler
		return true
	}
	return false
}

// isVariationSelector reports variation selectors: one after a character is
// ordinary (emoji), but a run of them can smuggle data.
func isVariationSelector(r rune) bool {
	return (r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0100 && r <= 0xe01ef)
}
