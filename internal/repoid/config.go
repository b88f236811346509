package repoid

import (
	"bytes"
	"strings"
)

// originURL returns the first url of [remote "origin"] in a git config
// file's text, and whether there is one. It reads git's syntax as far as
// a remote's url needs: sections [name "sub"] and the old [name.sub],
// case-insensitive section and key names, comments (# and ;), quoted
// values with escapes, and lines continued with a backslash. Includes
// are not followed.
func originURL(text string) (string, bool) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	in := false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t")
		if strings.HasPrefix(line, "[") {
			name, rest, ok := section(line)
			if !ok {
				in = false
				continue
			}
			in = name
			line = strings.TrimLeft(rest, " \t")
			if line == "" {
				continue
			}
		}
		if !in || line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "url") {
			continue
		}
		// A value may go on over the next lines, each ending in "\".
		// Joined in one growing buffer: linear in the value's length.
		if cont([]byte(value)) && i+1 < len(lines) {
			buf := []byte(value)
			for cont(buf) && i+1 < len(lines) {
				i++
				buf = append(buf[:len(buf)-1], lines[i]...)
			}
			value = string(buf)
		}
		if v := configValue(value); v != "" {
			return v, true
		}
	}
	return "", false
}

// cont reports whether a line of a value goes on on the next line: it
// ends in a backslash that is not itself escaped.
func cont(v []byte) bool {
	return bytes.HasSuffix(v, []byte{'\\'}) && !bytes.HasSuffix(v, []byte{'\\', '\\'})
}

// section reads a section header, returning whether it is [remote
// "origin"] (or [remote.origin]), what follows the closing bracket, and
// whether the header is well formed.
func section(line string) (origin bool, rest string, ok bool) {
	end := -1
	quoted := false
	for i := 1; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && quoted && i+1 < len(line):
			i++
		case c == '"':
			quoted = !quoted
		case c == ']' && !quoted:
			end = i
		}
		if end >= 0 {
			break
		}
	}
	if end < 0 {
		return false, "", false
	}
	head, rest := strings.TrimSpace(line[1:end]), line[end+1:]
	if name, sub, ok := strings.Cut(head, " "); ok {
		sub = strings.TrimSpace(sub)
		if len(sub) < 2 || sub[0] != '"' || sub[len(sub)-1] != '"' {
			return false, rest, true
		}
		sub = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(sub[1 : len(sub)-1])
		return strings.EqualFold(name, "remote") && sub == "origin", rest, true
	}
	// The old form: the subsection after a dot, compared without case.
	name, sub, _ := strings.Cut(head, ".")
	return strings.EqualFold(name, "remote") && strings.EqualFold(sub, "origin"), rest, true
}

// configValue reads a value as git does: surrounding blanks dropped, a
// comment ended at # or ; outside quotes, quotes removed, and the escapes
// \" \\ \n \t \b read.
func configValue(v string) string {
	var b strings.Builder
	quoted := false
	pending := "" // blanks kept only if more text follows
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteString(pending)
			pending = ""
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return b.String()
		case (c == ' ' || c == '\t') && !quoted:
			if b.Len() > 0 {
				pending += string(c)
			}
		default:
			b.WriteString(pending)
			pending = ""
			b.WriteByte(c)
		}
	}
	return b.String()
}
