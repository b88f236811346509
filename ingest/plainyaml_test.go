package ingest

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The plain decoder takes the front matter agents write, and leaves to
// YAML whatever it cannot be sure of; where it decodes, it agrees with
// YAML. Invariant: no card's topic, category or tags read differently
// than YAML reads them.
func TestPlainFrontMatter(t *testing.T) {
	for _, tc := range []struct {
		fm    string
		plain bool
	}{
		{"topic: bench h12-g4-r36-2\ncategory: workflow\ntags: [bench, h12]", true},
		{"topic: Release checklist\ncategory: workflow\ntags: [release]", true},
		{"topic: Paths like a/b.c (and d_e)\ncategory: x\ntags: []", true},
		{"topic: go test, then make\ncategory: x\ntags: [go test, make]", true},
		{"topic: don't push on Fridays\ncategory: x\ntags: [don't]", true},
		// Left to YAML:
		{"topic: yes\ncategory: x\ntags: [a]", false},        // a boolean in YAML 1.1
		{"topic: x\ncategory: x\ntags: [No]", false},         // so is No
		{"on: x\ncategory: x\ntags: [a]", false},             // and on, as a key
		{"topic: 2024-01-01\ncategory: x\ntags: [a]", false}, // a date
		{"topic: 12\ncategory: x\ntags: [a]", false},         // a number
		{"topic: x # note\ncategory: x\ntags: [a]", false},   // a comment
		{"topic: \"x\"\ncategory: x\ntags: [a]", false},      // quotes
		{"topic: x\ncategory: x\ntags:\n  - a", false},       // a block list
		{"topic: x\n\ncategory: x", false},                   // a blank line
		{"topic: x\ntopic: y", false},                        // a repeated key
		{"topic: x\r\ncategory: y", false},                   // CRLF
		{"topic: a  b", false},                               // two spaces
		{"topic: x \ncategory: y", false},                    // a trailing space
		{"topic: x\ntags: [a,b]", false},                     // no space after a comma
		{"topic: x\ntags: [a, ]", false},
		{"Topic: x", false},
		{"topic: x: y", false},
		{"topic: é", false},
		{"", false},
	} {
		lines := strings.Split(tc.fm, "\n")
		m, ok := plainFrontMatter(lines)
		if ok != tc.plain {
			t.Errorf("plainFrontMatter(%q): ok %v, want %v", tc.fm, ok, tc.plain)
			continue
		}
		if !ok {
			continue
		}
		v, msg := yamlFrontMatter(lines)
		if msg != "" || !reflect.DeepEqual(m, v) {
			t.Errorf("plainFrontMatter(%q) = %#v; YAML reads %#v (%s)", tc.fm, m, v, msg)
		}
	}
}

// Invariant: as TestPlainFrontMatter, over many generated front matters
// near the edge of what the plain decoder takes: YAML's special words,
// digits first, indicators and spacing inside values and lists.
func TestPlainFrontMatterAgreesWithYAML(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 5))
	keys := []string{"topic", "category", "tags", "y", "no", "on", "null", "a1", "k_2", "Topic", "x"}
	alphabet := []string{"a", "b", "c", "d", "a", "b", "c", "d", "a", "b", "Z", "e", "0", "7", " ", "  ", ",", ", ", "-", "_", ".", "/", "(", ")", "'", "\"", ":", ": ", "#", " #", "[", "]", "{", "&", "*", "!", "?", "|", ">", "%", "@", "`", "~", "yes", "No", "true", "NULL", "Off", "nan", ".inf", "1e3", "0x1f", "2024-01-01", "é", "\t", "\r"}
	word := func() string {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	plain := 0
	for range 100000 {
		var lines []string
		for range 1 + r.IntN(4) {
			v := word()
			if r.IntN(3) == 0 {
				items := make([]string, r.IntN(4))
				for i := range items {
					items[i] = word()
				}
				v = "[" + strings.Join(items, ", ") + "]"
			}
			lines = append(lines, keys[r.IntN(len(keys))]+": "+v)
		}
		m, ok := plainFrontMatter(lines)
		if !ok {
			continue
		}
		plain++
		v, msg := yamlFrontMatter(lines)
		if msg != "" || !reflect.DeepEqual(m, v) {
			t.Fatalf("plainFrontMatter(%q) = %#v; YAML reads %#v (%s)", lines, m, v, msg)
		}
	}
	if plain < 1000 {
		t.Fatalf("only %d of the generated front matters were plain: the test proves little", plain)
	}
	t.Logf("%d of 100000 plain, all as YAML reads them", plain)
}

// BenchmarkFrontMatter: the front matter of a card as agents write it,
// through FrontMatter (the plain decoder) and through YAML.
func BenchmarkFrontMatter(b *testing.B) {
	const card = "---\ntopic: bench h12-g4-r36-2\ncategory: workflow\ntags: [bench, h12]\n---\nThe repository builds with make.\n"
	b.Run("FrontMatter", func(b *testing.B) {
		for b.Loop() {
			if _, p := FrontMatter(card); p != nil {
				b.Fatal(p)
			}
		}
	})
	b.Run("yaml", func(b *testing.B) {
		lines := strings.Split(card, "\n")[1:4]
		for b.Loop() {
			if _, msg := yamlFrontMatter(lines); msg != "" {
				b.Fatal(msg)
			}
		}
	})
}
