package ingest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
)

// addFixtureSeeds adds every handoff fixture to the fuzz corpus.
func addFixtureSeeds(f *testing.F) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "handoffs", "*.md"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no handoff fixtures: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParse(f *testing.F) {
	addFixtureSeeds(f)
	for _, s := range []string{
		"",
		"# Memory Handoff\n## Type\n",
		"# Memory Handoff\r\n## Type\r\nsetup\r\n## type\r\n",
		"# Memory Handoff\n##\n## \n##\t\n## Tier 1\n",
		"\uFEFF# Memory Handoff\n## Suggested card content\n---\n---\n",
		"# Memory Handoff\n## Recommended memory action\nno-card\n## Target document\nrules/..md\n",
		"# Memory Handoff\n## Suggested card content\n---\n&a [*a, *a]\n---\n",
		"# Memory Handoff\n## Suggested card content\n  ```markdown\n  ---\n  topic: x\n  ---\n  ```\n## Target document\n(n/a — card-only)\n",
		"# Memory Handoff\n## Suggested card content\n~~~~\n```\n~~~\n~~~~\n## Target card\n(none\n)\n",
		"# Memory Handoff\n## Continues\n`2026-04-20-1537-a.md`\n## continues \r\n- 3f2a9c81\n",
		"# Memory Handoff\n##Continues\nabcd\n## Continues:\nabcd\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse(data)
		h2, err2 := Parse(data)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(h, h2) {
			t.Fatalf("Parse is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if pe, ok := errors.AsType[*ParseError](err); !ok || pe.Reason != ReasonParseError || err.Error() != err2.Error() {
				t.Fatalf("Parse error %#v is not a stable *ParseError", err)
			}
			return
		}
		for k, v := range h.Sections {
			if _, known := sectionHeadings[k]; !known {
				t.Errorf("unknown section key %q", k)
			}
			if v != strings.TrimSpace(v) {
				t.Errorf("section %q is not trimmed: %q", k, v)
			}
		}
		if c := h.Card; c != nil && c.Content != "" && (!strings.HasSuffix(c.Content, "\n") || strings.TrimSpace(c.Content)+"\n" != c.Content) {
			t.Errorf("card content %q is not trimmed text plus one newline", c.Content)
		}
		// The card content is the section as written or, for a section
		// that starts with a fence, text from inside it.
		if c, sec := h.Card, h.Sections[SectionCardContent]; c != nil && c.Content != "" && c.Content != sec+"\n" {
			if !strings.HasPrefix(sec, "`") && !strings.HasPrefix(sec, "~") || !strings.Contains(dedent(sec), dedent(strings.TrimSuffix(c.Content, "\n"))) {
				t.Errorf("card content %q is neither section %q nor text inside its fence", c.Content, sec)
			}
		}
		// A placeholder never hides real content: a section read as
		// absent holds at most one line.
		card := false
		for k, v := range h.Sections {
			if sectionText(h.Sections, k) == "" && strings.Contains(v, "\n") {
				t.Errorf("section %q of several lines read as absent: %q", k, v)
			}
			if k == SectionTargetCard || k == SectionExpectedSHA || k == SectionCardContent {
				card = card || sectionText(h.Sections, k) != ""
			}
		}
		if card != (h.Card != nil) {
			t.Errorf("card sections present: %v, Card = %+v", card, h.Card)
		}
		before := heapAllocs()
		ps := h.Validate()
		if used := heapAllocs() - before; used > allocBudget(len(data)) {
			t.Fatalf("Validate of a %d-byte handoff allocated %d MiB: are YAML aliases expanded without a bound?", len(data), used>>20)
		}
		if !reflect.DeepEqual(ps, h2.Validate()) {
			t.Fatal("Validate is not deterministic")
		}
		for _, p := range ps {
			if Reasons[p.Reason] == "" || p.Message == "" {
				t.Errorf("problem %+v has an unknown reason or no message", p)
			}
		}
		if d := h.Document; ps == nil && d != nil {
			if !IsAllowedDocument(d.Target) || headingLine(d.Content) != 0 {
				t.Errorf("valid handoff with unsafe document %+v", d)
			}
		}
		if c := h.Card; ps == nil && c != nil && !CardNameRE.MatchString(c.Name) {
			t.Errorf("valid handoff with unsafe card name %q", c.Name)
		}
		// The ingester's thread key of a parsed handoff is the one the
		// mirror's repos/ reads from its stored bytes.
		if got, want := threadKeyOf(h), ThreadKey(data); got != want {
			t.Errorf("thread key %q of the parsed handoff, %q of its bytes", got, want)
		}
	})
}

func FuzzFrontMatter(f *testing.F) {
	for _, s := range []string{
		validCard,
		"",
		"---\n---\n",
		"---\ntopic: x\n",
		"---\n- a\n---\n",
		"---\ntopic: x\ncategory: y\ntags: [a]\ntopic: z\n---\n",
		"---\na: &a [*a]\n---\n",
		"---\r\ntopic: \"x\"\r\ncategory: 'y'\r\ntags:\r\n  - a\r\n---\r\n",
		"topic: bench h12-g4-r36-2\ncategory: workflow\ntags: [bench, h12]",
		"topic: On\ncategory: a (b)\ntags: []\nn: x",
		"topic: a  b\ntags: [a,b]\nc: d ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		// Invariant: the plain decoder never reads front matter other
		// than YAML does (a card's topic, category or tags changed).
		lines := strings.Split(content, "\n")
		if plain, ok := plainFrontMatter(lines); ok {
			v, msg := yamlFrontMatter(lines)
			if msg != "" || !reflect.DeepEqual(plain, v) {
				t.Fatalf("plain front matter %#v, YAML %#v (%s)", plain, v, msg)
			}
		}
		before := heapAllocs()
		m, p := FrontMatter(content)
		if used := heapAllocs() - before; used > allocBudget(len(content)) {
			t.Fatalf("FrontMatter of %d bytes allocated %d MiB: are YAML aliases expanded without a bound?", len(content), used>>20)
		}
		if (m == nil) == (p == nil) {
			t.Fatalf("FrontMatter = %v, %v: want exactly one of a mapping and a problem", m, p)
		}
		if p != nil {
			if p.Reason != ReasonMissingFrontMatter && p.Reason != ReasonInvalidFrontMatter && p.Reason != ReasonHiddenCharacters {
				t.Fatalf("unexpected reason %q", p.Reason)
			}
			return
		}
		if !isScalar(m["topic"]) || !isScalar(m["category"]) {
			t.Errorf("accepted front matter without topic or category: %v", m)
		}
		if _, ok := m["tags"].([]any); !ok {
			t.Errorf("accepted front matter whose tags are %T", m["tags"])
		}
	})
}

// dedent removes the leading spaces of every line of s.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, " ")
	}
	return strings.Join(lines, "\n")
}

// allocBudget bounds what checking an n-byte input may allocate.
func allocBudget(n int) uint64 { return 32<<20 + 1024*uint64(n) }

// heapAllocs returns the bytes allocated on the heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzAppendSums: the hash of a document after appends, continued from
// the tail state of each step (appendDocument), is the hash of its bytes,
// whatever newlines the document and the appended texts begin or end
// with.
func FuzzAppendSums(f *testing.F) {
	for _, s := range [][3]string{
		{"", "a", "b"}, {"\n\n", "a", ""}, {"# Tools\n", "- grep\n", "\n\n"},
		{"x\n\n\n", "", "y"}, {"no newline", "a\nb", "c\n"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, old, a, b string) {
		v := viewed{data: []byte(old), exists: true}
		v.sum, v.tail = sums(v.data)
		if v.sum != hash(v.data) {
			t.Fatalf("sums(%q) = %s, want %s", old, v.sum, hash(v.data))
		}
		for _, content := range []string{a, b, a} {
			next, sum, tail := appendDocument(v, content)
			if want := AppendDocument(v.data, content); !bytes.Equal(next, want) {
				t.Fatalf("appendDocument wrote %q, AppendDocument %q", next, want)
			}
			if sum != hash(next) {
				t.Fatalf("hash of %q continued from its tail is %s, want %s", next, sum, hash(next))
			}
			v = viewed{data: next, exists: true, sum: sum, tail: tail}
		}
		// Without a tail the whole document is hashed.
		if _, sum, _ := appendDocument(viewed{data: v.data, exists: true}, a); sum != hash(AppendDocument(v.data, a)) {
			t.Fatalf("hash without a tail is %s", sum)
		}
	})
}
