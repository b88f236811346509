package ingest

import "strings"

// plainFrontMatter decodes front matter written the way nearly every
// agent writes it: one "key: value" line per key, each value a plain
// phrase or a flow list of them ("tags: [a, b]"). It reports false for
// anything else (quotes, block lists, comments, blank lines, numbers,
// YAML 1.1's yes/no words, a repeated key ...), which the YAML decoder
// reads as before. Where it says true, its mapping is what the YAML
// decoder would return (FuzzFrontMatter checks that on every input), and
// it does without the alias guard, two YAML parses and a JSON round trip.
func plainFrontMatter(lines []string) (map[string]any, bool) {
	if len(lines) == 0 {
		return nil, false
	}
	m := make(map[string]any, len(lines))
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ": ")
		if !ok || !plainKey(k) || m[k] != nil {
			return nil, false
		}
		if rest, ok := strings.CutPrefix(v, "["); ok {
			items, ok := plainList(rest)
			if !ok {
				return nil, false
			}
			m[k] = items
			continue
		}
		if !plainPhrase(v, false) {
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// plainList decodes the rest of a flow list after its "[": phrases
// separated by ", ", then "]" and nothing more.
func plainList(s string) ([]any, bool) {
	body, ok := strings.CutSuffix(s, "]")
	if !ok {
		return nil, false
	}
	items := []any{}
	if body == "" {
		return items, true
	}
	for it := range strings.SplitSeq(body, ", ") {
		if !plainPhrase(it, true) {
			return nil, false
		}
		items = append(items, it)
	}
	return items, true
}

// plainKey: lower-case letters, digits and "_", starting with a letter,
// and not a word YAML 1.1 reads as something other than a string.
func plainKey(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' || yaml11Word(k) {
		return false
	}
	for i := range len(k) {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// plainPhrase: a YAML plain scalar that can only be that string. It starts
// with a letter (so it is no number, date, indicator or special float),
// holds only letters, digits, single spaces and "-_./()'" (and "," where
// it is not a flow list's item), does not end in a space, and is not one
// of YAML 1.1's boolean or null words.
func plainPhrase(s string, inList bool) bool {
	if s == "" || !isASCIILetter(s[0]) || s[len(s)-1] == ' ' || yaml11Word(s) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case isASCIILetter(c), c >= '0' && c <= '9':
		case c == ' ':
			if s[i-1] == ' ' {
				return false
			}
		case strings.IndexByte("-_./()'", c) >= 0, c == ',' && !inList:
		default:
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// yaml11Word reports whether s, in any case, is one of the words YAML 1.1
// resolves to a boolean or null (a superset of the forms it accepts).
func yaml11Word(s string) bool {
	if len(s) > 5 {
		return false
	}
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "true", "false", "on", "off", "null":
		return true
	}
	return false
}
