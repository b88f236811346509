package openclaw

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
)

// The card index's markers in MEMORY.md: handoff owns the text between
// them and nothing else of the file.
const (
	IndexBegin = "<!-- handoff:cards:begin (managed by handoff; edits here are replaced) -->"
	IndexEnd   = "<!-- handoff:cards:end -->"
)

// IndexBudget is the most characters the card index takes of MEMORY.md:
// about 40 cards at 75 characters a line. MEMORY.md is loaded whole up
// to 20,000 characters, and OpenClaw's own promotions grow it; the index
// keeps to about a seventh of that so they keep their room, and names the
// rest by count (memory search finds every card).
const IndexBudget = 3000

// IndexCard is one line of the index.
type IndexCard struct {
	Name  string // file name under memory/cards
	Topic string // its front matter's topic, "" when it has none
}

// maxTopic bounds one card's topic in the index.
const maxTopic = 80

// RenderIndex is the index block, markers included, for cards (newest
// first) out of total, within budget characters: as many lines as fit,
// then how many more there are.
func RenderIndex(cards []IndexCard, total, budget int) string {
	var b strings.Builder
	b.WriteString(IndexBegin + "\n")
	b.WriteString("## Memory cards\n\n")
	head := fmt.Sprintf("%d card(s) in memory/cards, newest first; memory search finds them all:\n", total)
	if total == 0 {
		head = "No cards in memory/cards yet.\n"
	}
	b.WriteString(head)
	tail := func(more int) string {
		s := ""
		if more > 0 {
			s = fmt.Sprintf("- … and %d more\n", more)
		}
		return s + IndexEnd
	}
	shown := 0
	for _, c := range cards {
		line := "- " + c.Name
		if t := oneLine(c.Topic); t != "" {
			line += ": " + t
		}
		line += "\n"
		if Chars([]byte(b.String()+line+tail(total-shown-1)+"x")) > budget {
			break
		}
		b.WriteString(line)
		shown++
	}
	b.WriteString(tail(total - shown))
	return b.String()
}

// oneLine reduces a topic to one printable line of at most maxTopic
// characters.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxTopic {
		s = string(r[:maxTopic-1]) + "…"
	}
	return s
}

// SetIndex puts block into memory (a MEMORY.md's content) between its
// markers, replacing what they held; without markers, at the top (after
// a first "# " title line). Everything else is kept as it is.
func SetIndex(memory []byte, block string) []byte {
	if i, j, ok := indexSpan(memory); ok {
		out := make([]byte, 0, len(memory)-(j-i)+len(block))
		out = append(out, memory[:i]...)
		out = append(out, block...)
		return append(out, memory[j:]...)
	}
	at := 0
	if bytes.HasPrefix(memory, []byte("# ")) {
		if nl := bytes.IndexByte(memory, '\n'); nl >= 0 {
			at = nl + 1
		} else {
			at = len(memory)
		}
	}
	return joinSpaced(memory[:at], []byte(block+"\n"), memory[at:])
}

// Index returns the index block memory holds, markers included, or "".
func Index(memory []byte) string {
	if i, j, ok := indexSpan(memory); ok {
		return string(memory[i:j])
	}
	return ""
}

func indexSpan(memory []byte) (int, int, bool) {
	i := bytes.Index(memory, []byte(IndexBegin))
	if i < 0 {
		return 0, 0, false
	}
	j := bytes.Index(memory[i:], []byte(IndexEnd))
	if j < 0 {
		return 0, 0, false
	}
	return i, i + j + len(IndexEnd), true
}
