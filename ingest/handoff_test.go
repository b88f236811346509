package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "handoffs", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// section is one "## Name" block of a handoff built by build.
type section struct{ name, body string }

// build renders a handoff from its sections, in order.
func build(secs []section) []byte {
	var b strings.Builder
	b.WriteString("# Memory Handoff\n\n")
	for _, s := range secs {
		b.WriteString("## " + s.name + "\n" + s.body + "\n\n")
	}
	return []byte(b.String())
}

// with returns a copy of secs with the named section's body replaced, or the
// section appended when it is absent.
func with(secs []section, name, body string) []section {
	out := slices.Clone(secs)
	for i := range out {
		if out[i].name == name {
			out[i].body = body
			return out
		}
	}
	return append(out, section{name, body})
}

// without returns a copy of secs without the named section.
func without(secs []section, name string) []section {
	return slices.DeleteFunc(slices.Clone(secs), func(s section) bool { return s.name == name })
}

const validCard = "---\ntopic: Release checklist\ncategory: workflow\ntags: [release]\n---\n\nTag, then build.\n"

var (
	createCard = []section{
		{"Type", "workflow"},
		{"Title", "Release checklist"},
		{"Summary", "How we cut a release."},
		{"Recommended memory action", "create-card"},
		{"Target card", "release-checklist.md"},
		{"Suggested card content", validCard},
	}
	updateCard = with(with(createCard, "Recommended memory action", "update-card"),
		"Expected card SHA256", strings.Repeat("ab", 32))
	noCard = []section{
		{"Type", "preference"},
		{"Title", "Prefer short commit subjects"},
		{"Summary", "The user wants commit subjects under 50 characters."},
		{"Recommended memory action", "no-card"},
		{"Target document", "USER.md"},
		{"Suggested document content", "### Commits\n\nKeep subjects under 50 characters."},
	}
)

func reasons(ps []Problem) []string {
	var rs []string
	for _, p := range ps {
		rs = append(rs, p.Reason)
	}
	return rs
}

func TestValidFixtures(t *testing.T) {
	for _, name := range []string{"create-card.md", "update-card.md", "no-card.md", "tier-heading-in-card.md"} {
		t.Run(name, func(t *testing.T) {
			if ps := Lint(readFixture(t, name)); ps != nil {
				t.Errorf("Lint = %v, want no problems", ps)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	h, err := Parse(readFixture(t, "update-card.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantCard := CardChange{
		Name:           "ledger-storage.md",
		ExpectedSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Content:        "---\ntopic: Ledger storage\ncategory: decision\ntags:\n  - sqlite\n  - wal\n---\n\nThe ledger is SQLite in WAL mode, opened through the pure Go driver.\n",
	}
	if h.Type != "decision" || h.Action != "update-card" || h.Title != "Keep SQLite in WAL mode for the ledger" {
		t.Errorf("Type, Action, Title = %q, %q, %q", h.Type, h.Action, h.Title)
	}
	if h.Card == nil || *h.Card != wantCard {
		t.Errorf("Card = %+v, want %+v", h.Card, wantCard)
	}
	if h.Document != nil {
		t.Errorf("Document = %+v, want nil", h.Document)
	}

	h, err = Parse(readFixture(t, "no-card.md"))
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := DocChange{Target: "TOOLS.md", Content: "### jq\n\nInstall jq on the canonical host: `apt-get install jq`.\nReceipts live in `.handoff/receipts/`."}
	if h.Document == nil || *h.Document != wantDoc {
		t.Errorf("Document = %+v, want %+v", h.Document, wantDoc)
	}
	if h.Card != nil {
		t.Errorf("Card = %+v, want nil", h.Card)
	}
}

func TestUnknownHeadingsStayInline(t *testing.T) {
	h, err := Parse(readFixture(t, "tier-heading-in-card.md"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Card == nil || !strings.Contains(h.Card.Content, "## Tier 1\nx/crypto/ssh with pkg/sftp.\n\n## Tier 2\nEverything else.\n") {
		t.Errorf("card content lost the ## Tier lines: %+v", h.Card)
	}
	if !strings.HasSuffix(h.Summary, "## Notes for later\nThis unknown heading stays inside the summary.") {
		t.Errorf("Summary = %q, want the ## Notes for later block inside it", h.Summary)
	}
	if _, ok := h.Sections["tier 1"]; ok {
		t.Error(`"## Tier 1" became a section`)
	}
}

func TestParseCRLF(t *testing.T) {
	lf := readFixture(t, "create-card.md")
	crlf := []byte(strings.ReplaceAll(string(lf), "\n", "\r\n"))
	want, err := Parse(lf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(crlf)
	if err != nil {
		t.Fatalf("Parse(CRLF) = %v", err)
	}
	if *got.Card != *want.Card || got.Summary != want.Summary || got.Type != want.Type {
		t.Errorf("CRLF parse differs:\n got %+v\nwant %+v", got.Card, want.Card)
	}
	if ps := got.Validate(); ps != nil {
		t.Errorf("Validate(CRLF) = %v, want none", ps)
	}
}

func TestParseHeadings(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		wantKey  string
	}{
		{"tab and trailing space", "# Memory Handoff\n##\tType \t\nsetup\n", "type"},
		{"upper case", "# MEMORY HANDOFF  \n## TYPE\nsetup\n", "type"},
		{"blank lines first", "\n  \n# memory handoff\n##   Recommended Memory Action\nno-card\n", "recommended memory action"},
		{"byte order mark", "\uFEFF# Memory Handoff\n## Type\nsetup\n", "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := h.Sections[tc.wantKey]; !ok || len(h.Sections) != 1 {
				t.Errorf("Sections = %q, want only %q", h.Sections, tc.wantKey)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
	}{
		{"invalid utf-8", "# Memory Handoff\n## Type\nset\xffup\n"},
		{"nul byte", "# Memory Handoff\n## Type\nset\x00up\n"},
		{"empty", ""},
		{"only blank lines", "\n \r\n\t\n"},
		{"no title", "## Type\nsetup\n"},
		{"title not first", "Notes\n# Memory Handoff\n## Type\nsetup\n"},
		{"wrong title", "# Memory Handoffs\n## Type\nsetup\n"},
		{"title without space", "#Memory Handoff\n## Type\nsetup\n"},
		{"indented title", "  # Memory Handoff\n## Type\nsetup\n"},
		{"no known section", "# Memory Handoff\n## Tier 1\nsetup\n"},
		{"only level-3 headings", "# Memory Handoff\n### Type\nsetup\n"},
		{"heading without space", "# Memory Handoff\n##Type\nsetup\n"},
		{"duplicate section", "# Memory Handoff\n## Type\nsetup\n## Title\nx\n## Type\nbugfix\n"},
		{"duplicate in other case", "# Memory Handoff\n## Type\nsetup\n## TYPE\nbugfix\n"},
		{"duplicate empty section", "# Memory Handoff\n## Evidence\n## Evidence\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse([]byte(tc.in))
			pe, ok := errors.AsType[*ParseError](err)
			if !ok {
				t.Fatalf("Parse = %+v, %v; want a *ParseError", h, err)
			}
			if pe.Reason != ReasonParseError || !strings.HasPrefix(err.Error(), "parse-error: ") {
				t.Errorf("error = %q (reason %q)", err, pe.Reason)
			}
			if ps := Lint([]byte(tc.in)); len(ps) != 1 || ps[0].Reason != ReasonParseError || ps[0].Message != pe.Msg {
				t.Errorf("Lint = %v, want one parse-error problem", ps)
			}
		})
	}
}

// TestValidateFirstReason has a case for every reason Validate can produce.
func TestValidateFirstReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []section
		want string
	}{
		{"zero-width space", with(createCard, "Summary", "How we\u200b cut a release."), ReasonHiddenCharacters},
		{"secret and missing title", without(with(createCard, "Evidence", "key AKIA"+strings.Repeat("Q", 16)), "Title"), ReasonSecretLike},
		{"missing title", without(createCard, "Title"), ReasonMissingSection},
		{"empty summary", with(createCard, "Summary", "  \n "), ReasonMissingSection},
		{"missing type", without(createCard, "Type"), ReasonMissingSection},
		{"missing action", without(createCard, "Recommended memory action"), ReasonMissingSection},
		{"unknown type", with(createCard, "Type", "chore"), ReasonInvalidType},
		{"type template left in", with(createCard, "Type", "setup | workflow"), ReasonInvalidType},
		{"unknown action", with(createCard, "Recommended memory action", "delete-card"), ReasonUnknownAction},
		{"no-card carrying a card", with(createCard, "Recommended memory action", "no-card"), ReasonUnknownAction},
		{"card and document", with(createCard, "Target document", "TOOLS.md"), ReasonBothCardAndDocument},
		{"no-card with card and document", with(noCard, "Target card", "x.md"), ReasonBothCardAndDocument},
		{"expected sha on a no-card", with(noCard, "Expected card SHA256", strings.Repeat("0", 64)), ReasonBothCardAndDocument},
		{"create without target card", without(createCard, "Target card"), ReasonMissingSection},
		{"create without card content", without(createCard, "Suggested card content"), ReasonMissingSection},
		{"update without card content", without(updateCard, "Suggested card content"), ReasonMissingSection},
		{"parent card name", with(createCard, "Target card", "../x.md"), ReasonUnsafeCardName},
		{"card name with slash", with(createCard, "Target card", "a/b.md"), ReasonUnsafeCardName},
		{"hidden card name", with(createCard, "Target card", ".x.md"), ReasonUnsafeCardName},
		{"absolute card name", with(createCard, "Target card", "/abs.md"), ReasonUnsafeCardName},
		{"card name only extension", with(createCard, "Target card", ".md"), ReasonUnsafeCardName},
		{"card name not markdown", with(createCard, "Target card", "notes.txt"), ReasonUnsafeCardName},
		{"card name with space", with(createCard, "Target card", "my card.md"), ReasonUnsafeCardName},
		{"card name on two lines", with(createCard, "Target card", "a.md\nb.md"), ReasonUnsafeCardName},
		{"card name too long", with(createCard, "Target card", strings.Repeat("a", 253)+".md"), ReasonUnsafeCardName},
		{"no front matter", with(createCard, "Suggested card content", "Tag, then build."), ReasonMissingFrontMatter},
		{"front matter not first", with(createCard, "Suggested card content", "Intro\n"+validCard), ReasonMissingFrontMatter},
		{"unclosed front matter", with(createCard, "Suggested card content", "---\ntopic: x\ncategory: y\ntags: []\n"), ReasonInvalidFrontMatter},
		{"front matter not yaml", with(createCard, "Suggested card content", "---\ntopic: [x\n---\n"), ReasonInvalidFrontMatter},
		{"front matter a list", with(createCard, "Suggested card content", "---\n- topic\n- category\n---\n"), ReasonInvalidFrontMatter},
		{"front matter empty", with(createCard, "Suggested card content", "---\n---\nbody"), ReasonInvalidFrontMatter},
		{"front matter without topic", with(createCard, "Suggested card content", "---\ncategory: y\ntags: [a]\n---\n"), ReasonInvalidFrontMatter},
		{"front matter empty category", with(createCard, "Suggested card content", "---\ntopic: x\ncategory: \"\"\ntags: [a]\n---\n"), ReasonInvalidFrontMatter},
		{"tags not a list", with(createCard, "Suggested card content", "---\ntopic: x\ncategory: y\ntags: a, b\n---\n"), ReasonInvalidFrontMatter},
		{"duplicate front matter key", with(createCard, "Suggested card content", "---\ntopic: x\ntopic: z\ncategory: y\ntags: [a]\n---\n"), ReasonInvalidFrontMatter},
		{"update without sha", without(updateCard, "Expected card SHA256"), ReasonMissingExpectedSHA},
		{"update with short sha", with(updateCard, "Expected card SHA256", strings.Repeat("a", 63)), ReasonMissingExpectedSHA},
		{"update with non-hex sha", with(updateCard, "Expected card SHA256", strings.Repeat("g", 64)), ReasonMissingExpectedSHA},
		{"update with template sha", with(updateCard, "Expected card SHA256", "64 hex characters."), ReasonMissingExpectedSHA},
		{"no-card without document", without(without(noCard, "Target document"), "Suggested document content"), ReasonNoTarget},
		{"no-card without target document", without(noCard, "Target document"), ReasonMissingSection},
		{"no-card without document content", without(noCard, "Suggested document content"), ReasonMissingSection},
		{"parent target", with(noCard, "Target document", "../TOOLS.md"), ReasonUnsafeTarget},
		{"rules parent", with(noCard, "Target document", "rules/../x.md"), ReasonUnsafeTarget},
		{"rules dot", with(noCard, "Target document", "rules/..md"), ReasonUnsafeTarget},
		{"rules dot dot", with(noCard, "Target document", "rules/...md"), ReasonUnsafeTarget},
		{"rules hidden", with(noCard, "Target document", "rules/.x.md"), ReasonUnsafeTarget},
		{"rules nested", with(noCard, "Target document", "rules/a/b.md"), ReasonUnsafeTarget},
		{"rules without name", with(noCard, "Target document", "rules/.md"), ReasonUnsafeTarget},
		{"lower-case tools", with(noCard, "Target document", "tools.md"), ReasonUnsafeTarget},
		{"card path as document", with(noCard, "Target document", "memory/cards/x.md"), ReasonUnsafeTarget},
		{"absolute target", with(noCard, "Target document", "/etc/passwd"), ReasonUnsafeTarget},
		{"other learnings file", with(noCard, "Target document", ".learnings/OTHER.md"), ReasonUnsafeTarget},
		{"h1 in document", with(noCard, "Suggested document content", "# Title\ntext"), ReasonHeadingInDocument},
		{"h2 in document", with(noCard, "Suggested document content", "text\n## Tier 1\nmore"), ReasonHeadingInDocument},
		{"bare hash line", with(noCard, "Suggested document content", "text\n#\nmore"), ReasonHeadingInDocument},
		{"bare double hash line", with(noCard, "Suggested document content", "text\n##\nmore"), ReasonHeadingInDocument},
		{"indented h2", with(noCard, "Suggested document content", "text\n   ## x\nmore"), ReasonHeadingInDocument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := Lint(build(tc.in))
			if len(ps) == 0 || ps[0].Reason != tc.want {
				t.Fatalf("reasons = %v, want %q first", reasons(ps), tc.want)
			}
			if ps[0].Message == "" || ps[0].Message != strings.ToLower(ps[0].Message[:1])+ps[0].Message[1:] {
				t.Errorf("message %q should start lower-case", ps[0].Message)
			}
		})
	}
}

func TestValidateOrder(t *testing.T) {
	in := build(with(without(with(with(updateCard,
		"Type", "chore"),
		"Target card", "../x.md"),
		"Expected card SHA256"),
		"Summary", "zero\u200dwidth"))
	want := []string{ReasonHiddenCharacters, ReasonInvalidType, ReasonUnsafeCardName, ReasonMissingExpectedSHA}
	if got := reasons(Lint(in)); !slices.Equal(got, want) {
		t.Errorf("reasons = %v, want %v", got, want)
	}
}

func TestValidHandoffs(t *testing.T) {
	cases := []struct {
		name string
		in   []section
	}{
		{"create-card", createCard},
		{"update-card", updateCard},
		{"upper-case sha", with(updateCard, "Expected card SHA256", strings.Repeat("AB", 32))},
		{"card with extra front matter", with(createCard, "Suggested card content", "---\ntopic: x\ncategory: y\ntags: []\nsource: laptop\n---\nbody")},
		{"create-card with reviewer notes", with(createCard, "Reviewer notes", "## not a section\nok")},
		{"level-3 headings in document", with(noCard, "Suggested document content", "### a\n#### b\n#hashtag\ntext")},
	}
	for _, doc := range []string{"TOOLS.md", "USER.md", ".learnings/LEARNINGS.md", ".learnings/ERRORS.md",
		".learnings/FEATURE_REQUESTS.md", "rules/go-style.md", "rules/a.b_c-d.md", "rules/-x.md"} {
		cases = append(cases, struct {
			name string
			in   []section
		}{"no-card " + doc, with(noCard, "Target document", doc)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if ps := Lint(build(tc.in)); ps != nil {
				t.Errorf("Lint = %v, want no problems", ps)
			}
		})
	}
}

func TestHiddenCharacters(t *testing.T) {
	for _, r := range []rune{
		0x01, 0x1b, 0x7f, 0x85, 0x9f, 0xad, 0x61c, 0x180e,
		0x200b, 0x200c, 0x200d, 0x200e, 0x200f,
		0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
		0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff, 0xe0041,
	} {
		in := build(with(createCard, "Durable facts", "a"+string(r)+"b"))
		if ps := Lint(in); len(ps) == 0 || ps[0].Reason != ReasonHiddenCharacters {
			t.Errorf("U+%04X: reasons = %v, want hidden-characters", r, reasons(ps))
		}
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"lone carriage return", build(with(createCard, "Durable facts", "shown\rhidden"))},
		{"two variation selectors", build(with(createCard, "Durable facts", "x\ufe0f\ufe0f"))},
		{"leading byte order mark", append([]byte("\uFEFF"), build(createCard)...)},
		{"before the first section", []byte(strings.Replace(string(build(createCard)), "\n\n", "\nnote\u202e\n\n", 1))},
	} {
		if ps := Lint(tc.in); len(ps) == 0 || ps[0].Reason != ReasonHiddenCharacters {
			t.Errorf("%s: reasons = %v, want hidden-characters", tc.name, reasons(ps))
		}
	}
	for _, text := range []string{
		"tab\tand CRLF\r\nline", "café, naïve, 東京, Привет", "emoji ❤️ and 👍🏽", "math ∑ and arrows →",
		"non-breaking\u00a0space", "trailing carriage return\r",
	} {
		in := build(with(createCard, "Durable facts", text))
		if ps := Lint(in); ps != nil {
			t.Errorf("%q: reasons = %v, want none", text, reasons(ps))
		}
	}
}

func TestSecretLikeContent(t *testing.T) {
	// Built by concatenation so that this file itself does not look like it
	// holds secrets.
	alnum := "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zAb"
	for _, secret := range []string{
		"-----BEGIN " + "PRIVATE KEY-----",
		"-----BEGIN RSA " + "PRIVATE KEY-----",
		"-----BEGIN OPENSSH " + "PRIVATE KEY-----",
		"-----BEGIN EC " + "PRIVATE KEY-----",
		"-----BEGIN DSA " + "PRIVATE KEY-----",
		"-----BEGIN ENCRYPTED " + "PRIVATE KEY-----",
		"-----BEGIN PGP " + "PRIVATE KEY BLOCK-----",
		"AKIA" + "IOSFODNN7EXAMPLE",
		"ASIA" + "Z2X3C4V5B6N7M8Q9",
		"gh" + "p_" + alnum + "abc",
		"gh" + "s_" + alnum + "abc",
		"github_" + "pat_" + alnum + "_" + alnum,
		"xo" + "xb-1234567890-0987654321-" + alnum,
		"sk-" + alnum + "cd",
		"sk-" + "proj-" + alnum + "-" + alnum,
		"sk-" + "ant-api03-" + alnum + "_" + alnum,
		"AI" + "za" + alnum + "_x",
		"sk_" + "live_" + alnum,
		"rk_" + "live_" + alnum,
	} {
		in := build(with(createCard, "Evidence", "- config: "+secret+" (copied)"))
		ps := Lint(in)
		if len(ps) == 0 || ps[0].Reason != ReasonSecretLike {
			t.Errorf("%.20s…: reasons = %v, want secret-like-content", secret, reasons(ps))
			continue
		}
		if strings.Contains(ps[0].Message, secret[5:]) {
			t.Errorf("message %q repeats the secret", ps[0].Message)
		}
	}
	for _, prose := range []string{
		"we use sk-learn and scikit-learn", "ask-me-anything", "task-runner-for-the-whole-monorepo-build-system",
		"the AKIA prefix marks AWS key ids", "ghp_ tokens are classic PATs", "xoxb-your-token-here",
		"-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----", "sk_test_ keys are for tests",
		"risk-assessment-for-the-entire-quarterly-roadmap", "AIzaShort", "github_pat_ is the prefix",
		"disk-" + alnum, // "sk-" inside a word
	} {
		in := build(with(createCard, "Evidence", prose))
		if ps := Lint(in); ps != nil {
			t.Errorf("%q: reasons = %v, want none", prose, reasons(ps))
		}
	}
}

func TestFrontMatter(t *testing.T) {
	m, p := FrontMatter(validCard)
	if p != nil {
		t.Fatalf("FrontMatter = %v", p)
	}
	if m["topic"] != "Release checklist" || m["category"] != "workflow" {
		t.Errorf("FrontMatter = %v", m)
	}
	for _, tc := range []struct{ in, want string }{
		{"", ReasonMissingFrontMatter},
		{"--- \r\ntopic: x\r\ncategory: y\r\ntags: [a]\r\n---\r\n", ""},
		{"---\ntopic: 2026\ncategory: yes\ntags: [a]\n---\n", ""},
		{"---\ntopic: [a]\ncategory: y\ntags: [a]\n---\n", ReasonInvalidFrontMatter},
		{"---\ntopic:\ncategory: y\ntags: [a]\n---\n", ReasonInvalidFrontMatter},
		{"---\ntopic: {a: b}\ncategory: y\ntags: [a]\n---\n", ReasonInvalidFrontMatter},
		{"---\ntopic: x\ncategory: y\ntags: null\n---\n", ReasonInvalidFrontMatter},
		{"---\n\"unterminated\n---\n", ReasonInvalidFrontMatter},
		{"----\ntopic: x\n---\n", ReasonMissingFrontMatter},
	} {
		_, p := FrontMatter(tc.in)
		got := ""
		if p != nil {
			got = p.Reason
			if p.Field != SectionCardContent {
				t.Errorf("%q: Field = %q", tc.in, p.Field)
			}
		}
		if got != tc.want {
			t.Errorf("FrontMatter(%q) = %v, want reason %q", tc.in, p, tc.want)
		}
	}
}

func TestAppendDocument(t *testing.T) {
	for _, tc := range []struct {
		name, old, content, want string
	}{
		{"absent", "", "### a\ntext", "### a\ntext\n"},
		{"one newline", "old\n", "new", "old\n\nnew\n"},
		{"no newline", "old", "new", "old\n\nnew\n"},
		{"many newlines", "old\n\n\n", "new", "old\n\nnew\n"},
		{"only newlines", "\n\n", "new", "\n\nnew\n"},
		{"trailing spaces kept", "old  \n", "new", "old  \n\nnew\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := []byte(tc.old)
			if got := string(AppendDocument(old, tc.content)); got != tc.want {
				t.Errorf("AppendDocument(%q, %q) = %q, want %q", tc.old, tc.content, got, tc.want)
			}
			if string(old) != tc.old {
				t.Errorf("AppendDocument changed its input to %q", old)
			}
		})
	}
}

func TestReasonsDocumented(t *testing.T) {
	for _, code := range []string{
		ReasonParseError, ReasonMissingSection, ReasonMissingFrontMatter, ReasonInvalidFrontMatter,
		ReasonUnsafeCardName, ReasonCardExists, ReasonCardMissing, ReasonMissingExpectedSHA,
		ReasonHashConflict, ReasonBothCardAndDocument, ReasonUnsafeTarget, ReasonHeadingInDocument,
		ReasonUnknownAction, ReasonInvalidType, ReasonSecretLike, ReasonHiddenCharacters, ReasonSymlink,
		ReasonNotRegular, ReasonOversize, ReasonChanging, ReasonTooYoung, ReasonNoTarget, ReasonCardIdentical,
		ReasonUnfilledTemplate,
		ReasonInjectionLike, ReasonDatedCardName, ReasonBootstrapCap, ReasonRevised, ReasonSameText, ReasonPrivateAppend, ReasonPrivateCard,
	} {
		if Reasons[code] == "" {
			t.Errorf("Reasons has no description for %q", code)
		}
	}
	if len(Reasons) != 31 {
		t.Errorf("Reasons has %d codes, want 31", len(Reasons))
	}
}

func TestIsAllowedDocument(t *testing.T) {
	if !IsAllowedDocument("rules/" + strings.Repeat("a", 252) + ".md") {
		t.Error("a 255-byte rule name was refused")
	}
	if IsAllowedDocument("rules/" + strings.Repeat("a", 253) + ".md") {
		t.Error("a 256-byte rule name was allowed")
	}
}

// TestFrontMatterEscapedHiddenCharacters: a bidi override written as a YAML
// escape decodes to a hidden character; it routes to review.
func TestFrontMatterEscapedHiddenCharacters(t *testing.T) {
	_, p := FrontMatter("---\ntopic: x\ncategory: \"evil\\u202etxt\"\ntags: [a]\n---\nbody\n")
	if p == nil || p.Reason != ReasonHiddenCharacters {
		t.Fatalf("FrontMatter problem = %+v, want %s", p, ReasonHiddenCharacters)
	}
}

// TestContinuitySections: Open questions, Next steps and Continues split
// sections, parse as lists, never enter the card or the document, and
// raise no problem (they never change routing).
func TestContinuitySections(t *testing.T) {
	cont := []section{
		{"Open questions", "- does the deploy need the staging key?\n- why does\n  CI time out\n1. which branch"},
		{"Next steps", "* run make fuzz\n\n* tag v1.2"},
		{"Continues", "2026-12-02-1700-deploy.md"},
	}
	for _, tc := range []struct {
		name string
		secs []section
	}{
		{"card", append(slices.Clone(createCard), cont...)},
		{"document", append([]section{{"Type", "workflow"}, {"Title", "t"}, {"Summary", "s"}, {"Recommended memory action", "no-card"},
			{"Target document", "TOOLS.md"}, {"Suggested document content", "- a tool"}}, cont...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(build(tc.secs))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"does the deploy need the staging key?", "why does CI time out", "which branch"}; !slices.Equal(h.OpenQuestions, want) {
				t.Errorf("open questions %q; want %q", h.OpenQuestions, want)
			}
			if want := []string{"run make fuzz", "tag v1.2"}; !slices.Equal(h.NextSteps, want) {
				t.Errorf("next steps %q; want %q", h.NextSteps, want)
			}
			if h.Continues != "2026-12-02-1700-deploy.md" {
				t.Errorf("continues %q", h.Continues)
			}
			if probs := h.Validate(); len(probs) != 0 {
				t.Errorf("problems %v; continuity sections must raise none", probs)
			}
			for _, leak := range []string{"staging key", "make fuzz", "Continues"} {
				if h.Card != nil && strings.Contains(h.Card.Content, leak) || h.Document != nil && strings.Contains(h.Document.Content, leak) {
					t.Errorf("%q entered the card or document", leak)
				}
			}
		})
	}
}
