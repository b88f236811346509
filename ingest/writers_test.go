package ingest

// Tests for the patterns real writers produce (issue 16): card content
// inside a code fence, placeholder sections, a create-card saved twice, and
// front matter with other keys.

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/layout"
)

func TestIsPlaceholder(t *testing.T) {
	for _, s := range []string{
		"none", "None", "NONE", "None.", "n/a", "N/A", "n/a.", "na", "NA", "not applicable", "Not applicable.",
		"null", "NULL", "nil", "-", "–", "—", "  none  ", "(none)", "( none )", "(None.)", "(n/a)",
		"(n/a — card-only)", "(n/a - card-only)", "(N/A: card only)", "(none; this is a card handoff)",
		"(none, card handoff)", "(not applicable)", "(not applicable — card-only)", "(null)", "(nil)", "(-)",
		"(—)", "(none (card-only))", "(n/a)\n", "\n none \n",
	} {
		if !IsPlaceholder(s) {
			t.Errorf("IsPlaceholder(%q) = false, want true", s)
		}
	}
	// A placeholder never hides real content: any other text, or text
	// beside a placeholder, is content.
	for _, s := range []string{
		"", "   ", "TOOLS.md", "none\nTOOLS.md", "(none)\nTOOLS.md", "n/a\n\nAppend this line.",
		"none of these apply", "nothing", "TBD", "`none`", "_none_", "*n/a*", "- none", "none (card-only)",
		"(none yet)", "(nonexistent)", "(nil pointer fix)", "(null handling lives in rules/go.md)",
		"(none", "none)", "((none))", "(-1)", "--", "---", "n/a!", "none..", "(na-ive)", "(n/a—card-only)",
		"(- x)", "(none: see below\nreal content on a second line)", "(n/a, but\nappend this)",
	} {
		if IsPlaceholder(s) {
			t.Errorf("IsPlaceholder(%q) = true, want false", s)
		}
	}
}

// fence wraps s in a code fence opened by open and closed by close.
func fence(open, s, close string) string { return open + "\n" + s + close }

// TestCardFence: card content wrapped whole in one code fence is read from
// inside it; a fence that is only part of the section is content as
// written, which then lacks front matter.
func TestCardFence(t *testing.T) {
	inner := validCard
	withCode := "---\ntopic: Build\ncategory: workflow\ntags: [make]\n---\n\n```sh\nmake build\n```\n"
	for _, tc := range []struct {
		name, body string
		want       string // the card content, or "" for not unwrapped
	}{
		{"markdown", fence("```markdown", inner, "```"), validCard},
		{"md", fence("```md", inner, "```"), validCard},
		{"yaml", fence("```yaml", inner, "```"), validCard},
		{"yml", fence("```yml", inner, "```"), validCard},
		{"text", fence("```text", inner, "```"), validCard},
		{"no info string", fence("```", inner, "```"), validCard},
		{"info string in upper case", fence("```Markdown", inner, "```"), validCard},
		{"info string with spaces", fence("```  markdown  ", inner, "```"), validCard},
		{"tildes", fence("~~~markdown", inner, "~~~"), validCard},
		{"longer closer", fence("```markdown", inner, "`````"), validCard},
		{"blank lines around", "\n\n" + fence("```markdown", inner, "```") + "\n  \n", validCard},
		{"four backticks around a code block", fence("````markdown", withCode, "````"), withCode},
		{"tildes around a code block", fence("~~~md", withCode, "~~~"), withCode},
		{"indented fence", "  ```markdown\n  ---\n  topic: x\n  category: y\n  tags: [a]\n  ---\n    body\n  ```", "---\ntopic: x\ncategory: y\ntags: [a]\n---\n  body\n"},
		{"blank lines inside", fence("```markdown", "\n\n"+inner+"\n\n", "```"), validCard},

		{"text before", "Here is the card:\n" + fence("```markdown", inner, "```"), ""},
		{"text after", fence("```markdown", inner, "```") + "\nSaved by Codex.", ""},
		{"inner fence closes it early", fence("```markdown", withCode, "```"), ""},
		{"two fenced blocks", fence("```markdown", inner, "```") + "\n" + fence("```markdown", inner, "```"), ""},
		{"unclosed", "```markdown\n" + inner, ""},
		{"shorter closer", fence("````markdown", inner, "```"), ""},
		{"tilde closer for a backtick fence", fence("```markdown", inner, "~~~"), ""},
		{"closer with text", fence("```markdown", inner, "``` end"), ""},
		{"other info string", fence("```go", inner, "```"), ""},
		{"info string with attributes", fence("```markdown title=card.md", inner, "```"), ""},
		{"backtick in info string", fence("```mark`down", inner, "```"), ""},
		{"two backticks", fence("``markdown", inner, "``"), ""},
		{"fence indented four spaces", "    ```markdown\n" + inner + "    ```", ""},
		{"not fenced", validCard, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(build(with(createCard, "Suggested card content", tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = h.Sections[SectionCardContent] + "\n" // as written
			}
			if h.Card == nil || h.Card.Content != want {
				t.Errorf("card content = %q, want %q", h.Card.Content, want)
			}
		})
	}
}

// TestWriterPatternsLint has the reasons Lint gives, all of them in order,
// for each pattern real writers produce and for the cases beside them
// that must still go to review.
func TestWriterPatternsLint(t *testing.T) {
	fenced := fence("```markdown", validCard, "```")
	cardOnly := with(with(createCard, "Target document", "(none)"), "Suggested document content", "(n/a — card-only)")
	for _, tc := range []struct {
		name string
		in   []section
		want []string
	}{
		// Card content inside a code fence.
		{"fenced create-card", with(createCard, "Suggested card content", fenced), nil},
		{"fenced update-card", with(updateCard, "Suggested card content", fenced), nil},
		// The real problem comes first, with no false alarm before it.
		{"fenced update-card without sha", without(with(updateCard, "Suggested card content", fenced), "Expected card SHA256"), []string{ReasonMissingExpectedSHA}},
		{"fenced card without front matter", with(createCard, "Suggested card content", fence("```markdown", "Tag, then build.\n", "```")), []string{ReasonMissingFrontMatter}},
		{"empty fence", with(createCard, "Suggested card content", "```markdown\n```"), []string{ReasonMissingSection}},
		{"fence with text before", with(createCard, "Suggested card content", "The card:\n"+fenced), []string{ReasonMissingFrontMatter}},
		{"fence with text after", with(createCard, "Suggested card content", fenced+"\nEnd of card."), []string{ReasonMissingFrontMatter}},
		{"fence with text after, update without sha", without(with(updateCard, "Suggested card content", fenced+"\nEnd."), "Expected card SHA256"), []string{ReasonMissingFrontMatter, ReasonMissingExpectedSHA}},
		{"fence closed early", with(createCard, "Suggested card content", fence("```markdown", "---\ntopic: x\ncategory: y\ntags: [a]\n---\n```sh\nmake\n```\n", "```")), []string{ReasonMissingFrontMatter}},
		{"fenced document content stays as written", with(noCard, "Suggested document content", fence("```markdown", "### jq\n\nInstall jq.\n", "```")), nil},

		// Placeholder sections.
		{"card-only placeholders", cardOnly, nil},
		{"fenced card with placeholders", with(cardOnly, "Suggested card content", fenced), nil},
		{"none target document", with(createCard, "Target document", "none"), nil},
		{"N/A document content", with(createCard, "Suggested document content", "N/A"), nil},
		{"dash target document", with(createCard, "Target document", "-"), nil},
		{"em dash target document", with(createCard, "Target document", "—"), nil},
		{"not applicable target document", with(createCard, "Target document", "(not applicable)"), nil},
		{"placeholder sha on a create-card", with(createCard, "Expected card SHA256", "(n/a — create-card)"), nil},
		{"placeholder card sections on a no-card", with(with(noCard, "Target card", "(none)"), "Suggested card content", "n/a"), nil},
		{"placeholder reviewer notes", with(createCard, "Reviewer notes", "(none)"), nil},
		{"placeholder sha on an update-card", with(updateCard, "Expected card SHA256", "(none)"), []string{ReasonMissingExpectedSHA}},
		{"placeholder card content", with(createCard, "Suggested card content", "(none)"), []string{ReasonMissingSection}},
		{"placeholder summary", with(createCard, "Summary", "n/a"), []string{ReasonMissingSection}},
		{"placeholder type", with(createCard, "Type", "(none)"), []string{ReasonMissingSection}},
		{"placeholder action", with(createCard, "Recommended memory action", "none"), []string{ReasonMissingSection}},
		{"placeholder document content on a no-card", with(noCard, "Suggested document content", "(none)"), []string{ReasonMissingSection}},
		// A placeholder never hides real content: text beside a
		// placeholder keeps the section present.
		{"placeholder beside a target", with(createCard, "Target document", "(none)\nTOOLS.md"), []string{ReasonBothCardAndDocument}},
		{"placeholder beside content", with(cardOnly, "Suggested document content", "n/a\n\nAppend this line."), []string{ReasonBothCardAndDocument}},
		{"parenthesised note over two lines", with(createCard, "Target document", "(none —\nTOOLS.md)"), []string{ReasonBothCardAndDocument}},
		{"word after a placeholder", with(createCard, "Target document", "(none yet)"), []string{ReasonBothCardAndDocument}},
		{"placeholder-like word", with(createCard, "Target document", "(nonexistent)"), []string{ReasonBothCardAndDocument}},
		{"template left in", with(createCard, "Target document", "TOOLS.md | USER.md"), []string{ReasonBothCardAndDocument}},

		// Front matter with other keys.
		{"title and updated instead of topic and tags", with(createCard, "Suggested card content", "---\ntitle: Release checklist\ncategory: workflow\nupdated: 2026-04-20\n---\nbody"), []string{ReasonInvalidFrontMatter}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reasons(Lint(build(tc.in))); !slices.Equal(got, tc.want) {
				t.Errorf("reasons = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFrontMatterNamesMissingKeys: the invalid-front-matter message names
// the keys that are missing, and says that a look-alike key does not
// stand in for one.
func TestFrontMatterNamesMissingKeys(t *testing.T) {
	for _, tc := range []struct {
		name, fm string
		want     []string
		not      []string
	}{
		{"title and updated", "title: Release\ncategory: workflow\nupdated: 2026-04-20", []string{"lacks topic and tags", `add "topic: ..." and "tags: [a, b]"`, `"title:" does not stand for "topic:"`}, []string{"category"}},
		{"nothing known", "title: x\nupdated: y", []string{"lacks topic, category and tags", `"title:" does not stand for "topic:"`}, nil},
		{"tag for tags", "topic: x\ncategory: y\ntag: [a]", []string{"lacks tags", `"tag:" does not stand for "tags:"`}, []string{"title"}},
		{"upper-case key", "Topic: x\ncategory: y\ntags: [a]", []string{"lacks topic", `"Topic:" does not stand for "topic:"`}, nil},
		{"title beside topic", "topic: x\ntitle: x\ncategory: y", []string{"lacks tags"}, []string{"does not stand for"}},
		{"tags not a list", "topic: x\ncategory: y\ntags: a, b", []string{"tags must be a list"}, []string{"lacks"}},
		{"empty topic", "topic: \"\"\ncategory: y\ntags: [a]", []string{"topic must be one non-empty value"}, []string{"lacks"}},
		{"missing and wrong", "title: x\ncategory: [y]\ntags: [a]", []string{"lacks topic", `"title:" does not stand for "topic:"`, "category must be one non-empty value"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := FrontMatter("---\n" + tc.fm + "\n---\nbody\n")
			if p == nil || p.Reason != ReasonInvalidFrontMatter {
				t.Fatalf("problem = %+v, want %s", p, ReasonInvalidFrontMatter)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Message, w) {
					t.Errorf("message %q lacks %q", p.Message, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(p.Message, n) {
					t.Errorf("message %q should not say %q", p.Message, n)
				}
			}
		})
	}
}

// TestFenceHint: card content that starts with a fence that is not read
// as the card says why in its missing-front-matter message.
func TestFenceHint(t *testing.T) {
	ps := Lint(build(with(createCard, "Suggested card content", fence("```markdown", validCard, "```")+"\nmore")))
	if len(ps) == 0 || ps[0].Reason != ReasonMissingFrontMatter || !strings.Contains(ps[0].Message, "code fence") {
		t.Errorf("problems = %v, want missing-front-matter mentioning the code fence", ps)
	}
}

// writerCardPath is the card createCard makes.
const writerCardPath = layout.CardsDir + "/release-checklist.md"

func resultsOf(entries []Entry) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		r := e.Result
		if e.Reason != "" {
			r += "/" + e.Reason
		}
		out[e.Name] = r
	}
	return out
}

// lintAgrees checks that `handoff lint` (Lint) agrees with the ingester's
// result for data: no problem for what the ingester applies or finds done
// or decides from the workspace alone, else the ingester's reason first.
func lintAgrees(t *testing.T, name string, data []byte, e Entry) {
	t.Helper()
	ps := Lint(data)
	switch {
	case e.Result == ResultPromoted || e.Result == ResultRouted || e.Result == ResultDuplicate:
		if ps != nil {
			t.Errorf("%s: the ingester says %s/%s, lint says %v", name, e.Result, e.Reason, reasons(ps))
		}
	case e.Reason == ReasonCardExists || e.Reason == ReasonCardMissing || e.Reason == ReasonHashConflict || e.Reason == ReasonSymlink:
		if ps != nil {
			t.Errorf("%s: %s needs the workspace, yet lint says %v", name, e.Reason, reasons(ps))
		}
	default:
		if len(ps) == 0 || ps[0].Reason != e.Reason {
			t.Errorf("%s: the ingester says %s/%s, lint says %v", name, e.Result, e.Reason, reasons(ps))
		}
	}
}

// TestWriterPatternsRun runs whole ingests over the patterns real writers
// produce, in one batch and one handoff per batch, and checks each
// handoff's result and reason, the card left on disk, and that `handoff
// lint` agrees with the ingester. Invariants: a card-identical create-card
// writes nothing (no card change, no backup, no draft); a card that
// differs by one byte is never taken for identical; identical content
// never gets past the symlink check; batching changes no result.
func TestWriterPatternsRun(t *testing.T) {
	fenced := fence("```markdown", validCard, "```")
	h := func(secs []section) string { return string(build(secs)) }
	// second is another save of the same card: other sections differ, so
	// its bytes (and hash) do too.
	second := func(secs []section) []section { return with(secs, "Summary", "Saved again, minutes later.") }
	crlf := strings.ReplaceAll(h(createCard), "\n", "\r\n")
	oneByte := strings.Replace(validCard, "Tag,", "Tag;", 1)
	for _, tc := range []struct {
		name     string
		card     *string // the card before the run, if any
		symlink  bool    // the card is a symlink to a file holding *card
		handoffs [][2]string
		want     map[string]string
		after    string // the card after the run ("" for absent)
	}{
		{name: "fenced create-card", handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", fenced))}},
			want: map[string]string{"a.md": "promoted"}, after: validCard},
		{name: "fenced update-card without sha", card: new(existingCard),
			handoffs: [][2]string{{"a.md", h(without(with(updateCard, "Suggested card content", fenced), "Expected card SHA256"))}},
			want:     map[string]string{"a.md": "review/missing-expected-sha256"}, after: existingCard},
		{name: "fenced update-card", card: new(existingCard),
			handoffs: [][2]string{{"a.md", h(with(with(updateCard, "Suggested card content", fenced), "Expected card SHA256", sum(existingCard)))}},
			want:     map[string]string{"a.md": "promoted"}, after: validCard},
		{name: "fence with text after", handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", fenced+"\nSaved by Codex."))}},
			want: map[string]string{"a.md": "review/missing-front-matter"}},
		{name: "fence with text before", handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", "Card:\n\n"+fenced))}},
			want: map[string]string{"a.md": "review/missing-front-matter"}},
		{name: "card-only placeholders",
			handoffs: [][2]string{{"a.md", h(with(with(createCard, "Target document", "(none)"), "Suggested document content", "(n/a — card-only)"))}},
			want:     map[string]string{"a.md": "promoted"}, after: validCard},
		{name: "placeholder beside real content",
			handoffs: [][2]string{{"a.md", h(with(with(createCard, "Target document", "(none)"), "Suggested document content", "(n/a)\n- also this line"))}},
			want:     map[string]string{"a.md": "review/both-card-and-document"}},
		{name: "create-card identical to the card", card: new(validCard),
			handoffs: [][2]string{{"a.md", h(createCard)}},
			want:     map[string]string{"a.md": "duplicate/card-identical"}, after: validCard},
		{name: "fenced create-card identical to the card", card: new(validCard),
			handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", fenced))}},
			want:     map[string]string{"a.md": "duplicate/card-identical"}, after: validCard},
		// CRLF is read as LF, and the section is trimmed to one final
		// newline: what the card would hold after a create is compared.
		{name: "CRLF create-card identical to the card", card: new(validCard),
			handoffs: [][2]string{{"a.md", crlf}},
			want:     map[string]string{"a.md": "duplicate/card-identical"}, after: validCard},
		{name: "create-card with trailing blank lines identical to the card", card: new(validCard),
			handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", validCard+"\n\n\n"))}},
			want:     map[string]string{"a.md": "duplicate/card-identical"}, after: validCard},
		// A card that differs by one byte is not this content: a person
		// decides, and the card is left as it is.
		{name: "card without the final newline", card: new(strings.TrimSuffix(validCard, "\n")),
			handoffs: [][2]string{{"a.md", h(createCard)}},
			want:     map[string]string{"a.md": "review/card-exists"}, after: strings.TrimSuffix(validCard, "\n")},
		{name: "card one byte different", card: new(oneByte),
			handoffs: [][2]string{{"a.md", h(createCard)}},
			want:     map[string]string{"a.md": "review/card-exists"}, after: oneByte},
		{name: "card with CRLF line endings", card: new(strings.ReplaceAll(validCard, "\n", "\r\n")),
			handoffs: [][2]string{{"a.md", h(createCard)}},
			want:     map[string]string{"a.md": "review/card-exists"}, after: strings.ReplaceAll(validCard, "\n", "\r\n")},
		// Identical content never gets past the symlink check.
		{name: "identical content behind a symlink", card: new(validCard), symlink: true,
			handoffs: [][2]string{{"a.md", h(createCard)}},
			want:     map[string]string{"a.md": "review/symlink"}, after: validCard},
		{name: "two saves minutes apart",
			handoffs: [][2]string{{"a.md", h(createCard)}, {"b.md", h(second(createCard))}},
			want:     map[string]string{"a.md": "promoted", "b.md": "duplicate/card-identical"}, after: validCard},
		{name: "second save one byte different",
			handoffs: [][2]string{{"a.md", h(createCard)}, {"b.md", h(second(with(createCard, "Suggested card content", oneByte)))}},
			want:     map[string]string{"a.md": "promoted", "b.md": "review/card-exists"}, after: validCard},
		{name: "title instead of topic",
			handoffs: [][2]string{{"a.md", h(with(createCard, "Suggested card content", "---\ntitle: Release checklist\ncategory: workflow\nupdated: 2026-04-20\n---\nbody"))}},
			want:     map[string]string{"a.md": "review/invalid-front-matter"}},
	} {
		for _, size := range []int{1, 256} {
			t.Run(tc.name+"/"+map[int]string{1: "one per batch", 256: "one batch"}[size], func(t *testing.T) {
				r := newRig(t)
				if tc.card != nil {
					if tc.symlink {
						r.writeWS("elsewhere/card.md", *tc.card)
						if err := os.MkdirAll(filepath.Join(r.ws, layout.CardsDir), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.Symlink("../../elsewhere/card.md", filepath.Join(r.ws, writerCardPath)); err != nil {
							t.Fatal(err)
						}
					} else {
						r.writeWS(writerCardPath, *tc.card)
					}
				}
				r.store(tc.handoffs...)
				before := r.snapshot()
				entries, err := r.run(size, false)
				if err != nil {
					t.Fatal(err)
				}
				if got := resultsOf(entries); !maps.Equal(got, tc.want) {
					t.Errorf("results %v, want %v", got, tc.want)
				}
				if got := r.readWS(writerCardPath); got != tc.after {
					t.Errorf("card = %q, want %q", got, tc.after)
				}
				r.checkClean()
				r.checkBackups()
				for i, e := range entries {
					lintAgrees(t, e.Name, []byte(tc.handoffs[i][1]), e)
					if e.Reason != ReasonCardIdentical {
						continue
					}
					// Nothing for a person and nothing written: no draft,
					// no backup, the card as it was; the entry names the
					// card and its hash, before and after.
					want := sum(tc.after)
					if e.Target != writerCardPath || e.BeforeSHA256 != want || e.AfterSHA256 != want || e.Action != ActionCreateCard {
						t.Errorf("%s: entry %+v, want target %s with before = after = %.12s", e.Name, e, writerCardPath, want)
					}
					if len(tc.handoffs) == 1 && !maps.Equal(r.snapshot(), before) {
						t.Errorf("a card-identical create-card changed the workspace:\n%v\nwant\n%v", r.snapshot(), before)
					}
				}
				if tc.card != nil && !strings.HasPrefix(tc.want["a.md"], "promoted") {
					if ents, _ := os.ReadDir(filepath.Join(r.ws, layout.BackupsDir)); len(ents) != 0 {
						t.Errorf("%d backups written for a card that was not changed", len(ents))
					}
				}
			})
		}
	}
}

// TestCardIdenticalDryRun: a dry run gives a card-identical create-card
// the same result and writes nothing.
func TestCardIdenticalDryRun(t *testing.T) {
	r := newRig(t)
	r.writeWS(writerCardPath, validCard)
	r.store([2]string{"a.md", string(build(createCard))})
	before := r.snapshot()
	entries, err := r.run(256, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultsOf(entries); got["a.md"] != "duplicate/card-identical" {
		t.Errorf("results %v, want a.md duplicate/card-identical", got)
	}
	if !maps.Equal(r.snapshot(), before) {
		t.Error("a dry run changed the workspace")
	}
}

// TestCardIdenticalIsItsContentsResult: a card-identical create-card is
// its content's own result in the ledger, so a later copy of the same
// bytes is a plain duplicate of it, even once the card has changed since.
// Invariant: content given a result is never decided a second time.
func TestCardIdenticalIsItsContentsResult(t *testing.T) {
	r := newRig(t)
	r.writeWS(writerCardPath, validCard)
	data := string(build(createCard))
	r.store([2]string{"a.md", data})
	if _, err := r.run(256, false); err != nil {
		t.Fatal(err)
	}
	var result, reason, target, before, after string
	err := r.led.DB().QueryRow(`SELECT result, reason, target, before_sha256, after_sha256 FROM handoffs WHERE sha256 = ?`, sum(data)).
		Scan(&result, &reason, &target, &before, &after)
	if err != nil {
		t.Fatalf("no ledger row for the content: %v", err)
	}
	if result != ResultDuplicate || reason != ReasonCardIdentical || target != writerCardPath || before != sum(validCard) || after != before {
		t.Errorf("ledger row %s/%s %s %.12s %.12s", result, reason, target, before, after)
	}

	r.writeWS(writerCardPath, existingCard) // someone edits the card
	r.store([2]string{"copy-of-a.md", data})
	entries, err := r.run(256, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultsOf(entries); got["copy-of-a.md"] != ResultDuplicate {
		t.Errorf("the later copy: %v, want a plain duplicate", got)
	}
	if r.readWS(writerCardPath) != existingCard {
		t.Error("the card was changed")
	}
	r.checkClean()
}

// TestWriterFixtures: the fixtures of real writers' patterns lint as
// their names say.
func TestWriterFixtures(t *testing.T) {
	for name, want := range map[string][]string{
		"fenced-create-card.md":             nil,
		"placeholder-sections.md":           nil,
		"fenced-update-card-missing-sha.md": {ReasonMissingExpectedSHA},
		"title-not-topic.md":                {ReasonInvalidFrontMatter},
	} {
		t.Run(name, func(t *testing.T) {
			if got := reasons(Lint(readFixture(t, name))); !slices.Equal(got, want) {
				t.Errorf("reasons = %v, want %v", got, want)
			}
		})
	}
}

// TestFormatDocExamples keeps docs/handoff-format.md true: its complete
// examples lint clean, and it lists every placeholder word and every info
// string a card fence may carry.
func TestFormatDocExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "handoff-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var examples []string
	for rest := doc; ; {
		_, after, ok := strings.Cut(rest, "\n```markdown\n# Memory Handoff\n")
		if !ok {
			break
		}
		body, next, ok := strings.Cut(after, "\n```\n")
		if !ok {
			t.Fatal("an example is not closed")
		}
		examples = append(examples, "# Memory Handoff\n"+body+"\n")
		rest = next
	}
	if len(examples) != 2 {
		t.Fatalf("found %d complete examples, want 2", len(examples))
	}
	actions := map[string]bool{}
	for i, ex := range examples {
		if ps := Lint([]byte(ex)); ps != nil {
			t.Errorf("example %d: %v", i+1, ps)
		}
		if h, err := Parse([]byte(ex)); err == nil {
			actions[h.Action] = true
		}
	}
	if !actions[ActionCreateCard] || !actions[ActionNoCard] {
		t.Errorf("examples cover actions %v, want a create-card and a no-card", actions)
	}
	for _, w := range placeholderWords {
		if !strings.Contains(doc, "`"+w+"`") {
			t.Errorf("the placeholder word %q is not documented", w)
		}
	}
	for info := range cardFenceInfos {
		if info != "" && !strings.Contains(doc, "`"+info+"`") {
			t.Errorf("the fence info string %q is not documented", info)
		}
	}
}
