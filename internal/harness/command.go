package harness

import (
	"path"
	"slices"
	"strings"
)

// Kinds of handoff hook, by the subcommand they run.
const (
	// KindContext is `handoff context --hook H`, run when a session starts.
	KindContext = "context"
	// KindStop is `handoff hook stop --harness H`, run when a turn stops.
	KindStop = "stop"
)

// Hook is one of handoff's hooks as a harness file should hold it.
type Hook struct {
	Kind    string // KindContext or KindStop
	Event   string // the harness's event: "SessionStart", "Stop"
	Matcher string // the group's matcher; "" for none
	Command string // the whole command line
	Program string // the program it runs (the command's first word)
	Timeout int    // seconds; 0 for none
}

// programs are the programs of hooks, which count as handoff's whatever
// their name.
func programs(hooks []Hook) []string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Program)
	}
	return out
}

// Program is the name a command's program must have to be handoff's.
const Program = "handoff"

// Command returns the command line that runs program with args, each
// quoted for a POSIX shell only where it needs it.
func Command(program string, args ...string) string {
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{program}, args...) {
		words = append(words, Quote(w))
	}
	return strings.Join(words, " ")
}

// Quote quotes s for a POSIX shell when it holds anything but letters,
// digits and a few punctuation marks that no shell treats specially.
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Split splits a command line into words as a POSIX shell would for a
// simple command: quotes and backslashes are honoured, and anything a
// shell would expand or treat as an operator ends the command there
// (ok false): such a command is not one handoff wrote.
func Split(line string) (words []string, ok bool) {
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\\\"$`", line[i+1]) >= 0 {
					i++
				} else if line[i] == '$' || line[i] == '`' {
					return nil, false
				}
				w.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, false
			}
			in = true
		case c == '\\':
			if i+1 >= len(line) {
				return nil, false
			}
			i++
			w.WriteByte(line[i])
			in = true
		case strings.IndexByte("|&;<>()$`*?[#~\n", c) >= 0:
			return nil, false
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, len(words) > 0
}

// KindOf says which of handoff's hooks a command line runs, and the
// program it names; "" when it runs none (another program, or handoff
// with another subcommand). The program is handoff's when it is named
// handoff or is one of also (the binary install names, whatever its
// name).
func KindOf(command string, also ...string) (kind, program string) {
	words, ok := Split(command)
	if !ok || path.Base(words[0]) != Program && !slices.Contains(also, words[0]) {
		return "", ""
	}
	args := words[1:]
	switch {
	case len(args) >= 2 && args[0] == "context" && hasFlag(args[1:], "--hook"):
		return KindContext, words[0]
	case len(args) >= 2 && args[0] == "hook" && args[1] == "stop":
		return KindStop, words[0]
	}
	return "", ""
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
