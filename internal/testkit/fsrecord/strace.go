package fsrecord

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Syscalls are the calls Wrap traces: every call that creates, writes,
// syncs, renames or removes a file on Linux/amd64 as Go and SQLite issue
// them. pwrite64 is there for SQLite's WAL: its frames show which rows a
// commit carries.
var Syscalls = []string{"open", "creat", "openat", "write", "pwrite64", "fsync", "fdatasync", "rename", "renameat", "renameat2",
	"unlink", "unlinkat", "mkdirat", "linkat"}

// StringLimit is the strace -s value: write buffers up to this size are
// logged whole (a SQLite page is 4 KiB; spool files in tests are smaller).
const StringLimit = 1 << 20

// Available reports whether strace can be run.
func Available() bool {
	_, err := exec.LookPath("strace")
	return err == nil
}

// Wrap returns a command that runs cmd under strace, following children and
// threads, logging to out. Environment, directory and standard streams are
// copied from cmd.
func Wrap(cmd *exec.Cmd, out string) *exec.Cmd {
	args := []string{"-f", "-y", "-qq", "-s", strconv.Itoa(StringLimit), "-e", "trace=" + strings.Join(Syscalls, ","),
		"-e", "signal=none", "-o", out, "--", cmd.Path}
	args = append(args, cmd.Args[1:]...)
	w := exec.Command("strace", args...)
	w.Env, w.Dir, w.Stdin, w.Stdout, w.Stderr = cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr
	return w
}

// Op is one completed system call.
type Op struct {
	Line  int    // line of the call's start in the log (1-based)
	Done  int    // line where its result was logged
	Pid   int    // thread id
	Call  string // system call name (open and creat are reported as openat)
	Path  string // the path acted on: opened, written, synced, created, removed, or renamed from
	Path2 string // rename and link: the new path
	Flags string // openat, renameat2, unlinkat, linkat flags
	FD    int    // openat: the descriptor returned; otherwise the descriptor argument, or -1
	Data  []byte // write, pwrite64: the bytes written (Ret of them)
	Off   int64  // pwrite64: the offset
	Ret   int64  // the result; -1 on error
	Errno string // the error name when Ret is -1
	Cut   bool   // the data was cut at StringLimit, or the result is unknown
}

// OK reports whether the call succeeded.
func (o Op) OK() bool { return o.Ret >= 0 && !o.Cut }

func (o Op) String() string {
	s := fmt.Sprintf("line %d pid %d %s(%s", o.Line, o.Pid, o.Call, o.Path)
	if o.Path2 != "" {
		s += " -> " + o.Path2
	}
	if o.Flags != "" {
		s += ", " + o.Flags
	}
	if len(o.Data) > 0 {
		s += fmt.Sprintf(", %d bytes", len(o.Data))
	}
	s += fmt.Sprintf(") = %d", o.Ret)
	if o.Errno != "" {
		s += " " + o.Errno
	}
	return s
}

// IsSync reports whether the op is a successful fsync or fdatasync.
func (o Op) IsSync() bool { return (o.Call == "fsync" || o.Call == "fdatasync") && o.Ret == 0 }

// IsRename reports whether the op is a successful rename of any kind.
func (o Op) IsRename() bool {
	return (o.Call == "rename" || o.Call == "renameat" || o.Call == "renameat2") && o.Ret == 0
}

// Creates reports whether the op is a successful openat that may have
// created its file.
func (o Op) Creates() bool {
	return o.Call == "openat" && o.Ret >= 0 && strings.Contains(o.Flags, "O_CREAT")
}

// Writes reports whether the op opens for writing or changes a name: what
// "nothing written outside" is about.
func (o Op) Writes() bool {
	switch o.Call {
	case "openat":
		return o.Ret >= 0 && (strings.Contains(o.Flags, "O_CREAT") || strings.Contains(o.Flags, "O_WRONLY") ||
			strings.Contains(o.Flags, "O_RDWR") || strings.Contains(o.Flags, "O_TRUNC"))
	case "write", "pwrite64", "fsync", "fdatasync":
		return false // judged by the openat that gave the descriptor
	default:
		return o.Ret == 0
	}
}

var (
	lineRE   = regexp.MustCompile(`^(\d+)\s+(.*)$`)
	callRE   = regexp.MustCompile(`^([a-z0-9_]+)\((.*)$`)
	resumeRE = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	retRE    = regexp.MustCompile(`^\s*=\s*(-?\d+|\?)(?:<(.*)>)?(?:\s+([A-Z][A-Z0-9_]*))?`)
)

// ParseFile parses an strace log written by Wrap.
func ParseFile(name string) ([]Op, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads an strace log (-f -y, one file) and returns the traced calls
// in the order their results were logged. Calls split by other threads
// ("<unfinished ...>" … "<... resumed>") are joined; a call whose result
// never came (the process was killed inside it) is returned with Cut set.
func Parse(r io.Reader) ([]Op, error) {
	type pending struct {
		line int
		call string
		args string
	}
	open := map[int]pending{}
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16*StringLimit)
	n := 0
	for sc.Scan() {
		n++
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		rest := m[2]
		if strings.HasPrefix(rest, "---") || strings.HasPrefix(rest, "+++") {
			continue
		}
		var start int
		var call, text string
		if rm := resumeRE.FindStringSubmatch(rest); rm != nil {
			p, ok := open[pid]
			if !ok || p.call != rm[1] {
				return nil, fmt.Errorf("fsrecord: line %d: resumed %s with no unfinished call", n, rm[1])
			}
			delete(open, pid)
			start, call, text = p.line, p.call, p.args+rm[2]
		} else if cm := callRE.FindStringSubmatch(rest); cm != nil {
			if s, ok := strings.CutSuffix(cm[2], " <unfinished ...>"); ok {
				open[pid] = pending{n, cm[1], s}
				continue
			}
			start, call, text = n, cm[1], cm[2]
		} else {
			continue
		}
		op, err := parseCall(call, text)
		if err != nil {
			return nil, fmt.Errorf("fsrecord: line %d: %w", n, err)
		}
		op.Line, op.Done, op.Pid = start, n, pid
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("fsrecord: %w", err)
	}
	for pid, p := range open {
		op, err := parseCall(p.call, p.args+") = ?")
		if err == nil {
			op.Line, op.Done, op.Pid, op.Cut = p.line, n+1, pid, true
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// arg is one decoded argument.
type arg struct {
	raw  string
	str  []byte // a quoted string, unescaped
	cut  bool   // the string was cut ("..."...)
	isS  bool
	path string // an fd's -y decoration, or AT_FDCWD's
	num  int64
}

// parseCall decodes "args) = ret..." for one call.
func parseCall(call, text string) (Op, error) {
	args, tail, err := splitArgs(text)
	if err != nil {
		return Op{}, err
	}
	op := Op{Call: call, FD: -1}
	rm := retRE.FindStringSubmatch(tail)
	if rm == nil {
		return Op{}, fmt.Errorf("%s: no result in %q", call, clip(tail))
	}
	if rm[1] == "?" {
		op.Ret, op.Cut = -1, true
	} else {
		op.Ret, _ = strconv.ParseInt(rm[1], 10, 64)
	}
	op.Errno = rm[3]
	retPath := unescapePath(rm[2])
	need := func(k int) error {
		if len(args) < k {
			return fmt.Errorf("%s: %d arguments, want %d", call, len(args), k)
		}
		return nil
	}
	at := func(dir arg, name arg) string {
		n := string(name.str)
		if path.IsAbs(n) || dir.path == "" {
			return path.Clean(n)
		}
		return path.Join(dir.path, n)
	}
	switch call {
	case "openat":
		if err := need(3); err != nil {
			return op, err
		}
		op.Path, op.Flags = at(args[0], args[1]), args[2].raw
		if retPath != "" {
			op.Path = retPath
		}
		if op.Ret >= 0 {
			op.FD = int(op.Ret)
		}
	case "open", "creat":
		if err := need(2); err != nil {
			return op, err
		}
		op.Path = path.Clean(string(args[0].str))
		if call == "creat" {
			op.Call, op.Flags = "openat", "O_WRONLY|O_CREAT|O_TRUNC"
		} else {
			op.Call, op.Flags = "openat", args[1].raw
		}
		if retPath != "" {
			op.Path = retPath
		}
		if op.Ret >= 0 {
			op.FD = int(op.Ret)
		}
	case "write", "pwrite64":
		if err := need(3); err != nil {
			return op, err
		}
		op.FD, op.Path = int(args[0].num), args[0].path
		op.Data, op.Cut = args[1].str, op.Cut || args[1].cut
		if op.Ret >= 0 && int64(len(op.Data)) > op.Ret {
			op.Data = op.Data[:op.Ret]
		}
		if call == "pwrite64" {
			if err := need(4); err != nil {
				return op, err
			}
			op.Off = args[3].num
		}
	case "fsync", "fdatasync":
		if err := need(1); err != nil {
			return op, err
		}
		op.FD, op.Path = int(args[0].num), args[0].path
	case "rename":
		if err := need(2); err != nil {
			return op, err
		}
		op.Path, op.Path2 = path.Clean(string(args[0].str)), path.Clean(string(args[1].str))
	case "renameat", "renameat2", "linkat":
		if err := need(4); err != nil {
			return op, err
		}
		op.Path, op.Path2 = at(args[0], args[1]), at(args[2], args[3])
		if len(args) > 4 {
			op.Flags = args[4].raw
		}
	case "unlink":
		if err := need(1); err != nil {
			return op, err
		}
		op.Path = path.Clean(string(args[0].str))
	case "unlinkat":
		if err := need(3); err != nil {
			return op, err
		}
		op.Path, op.Flags = at(args[0], args[1]), args[2].raw
	case "mkdirat":
		if err := need(2); err != nil {
			return op, err
		}
		op.Path = at(args[0], args[1])
	}
	return op, nil
}

// splitArgs splits "a, "b", c) = 0…" into decoded arguments and the text
// after the closing parenthesis.
func splitArgs(s string) ([]arg, string, error) {
	var out []arg
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i >= len(s) {
			return nil, "", fmt.Errorf("unterminated arguments in %q", clip(s))
		}
		if s[i] == ')' {
			return out, s[i+1:], nil
		}
		start := i
		var a arg
		if s[i] == '"' {
			b, j, err := unquote(s, i)
			if err != nil {
				return nil, "", err
			}
			a.str, a.isS, i = b, true, j
			if strings.HasPrefix(s[i:], "...") {
				a.cut, i = true, i+3
			}
		} else {
			depth := 0
			for i < len(s) {
				c := s[i]
				if c == '<' {
					// A -y decoration: read to the matching '>'.
					j := closeAngle(s, i)
					if j < 0 {
						return nil, "", fmt.Errorf("unterminated <path> in %q", clip(s))
					}
					a.path = unescapePath(s[i+1 : j])
					i = j + 1
					continue
				}
				if c == '{' || c == '[' {
					depth++
				} else if (c == '}' || c == ']') && depth > 0 {
					depth--
				} else if depth == 0 && (c == ',' || c == ')') {
					break
				}
				i++
			}
			a.raw = strings.TrimSpace(s[start:i])
			num := a.raw
			if k := strings.IndexByte(num, '<'); k >= 0 {
				num = num[:k]
			}
			a.num, _ = strconv.ParseInt(num, 0, 64)
		}
		if a.raw == "" {
			a.raw = s[start:i]
		}
		out = append(out, a)
		if i < len(s) && s[i] == ',' {
			i++
		}
	}
}

// closeAngle finds the '>' closing the '<' at i; strace escapes '>' inside
// decorated paths only as part of \x sequences, so the first unescaped one
// closes it.
func closeAngle(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '>':
			return j
		}
	}
	return -1
}

// unquote decodes the strace string starting at s[i] == '"' and returns the
// bytes and the index after the closing quote.
func unquote(s string, i int) ([]byte, int, error) {
	var b []byte
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch c {
		case '"':
			return b, j + 1, nil
		case '\\':
			j++
			if j >= len(s) {
				return nil, 0, fmt.Errorf("bad escape")
			}
			switch e := s[j]; e {
			case 'n':
				b = append(b, '\n')
			case 't':
				b = append(b, '\t')
			case 'r':
				b = append(b, '\r')
			case 'v':
				b = append(b, '\v')
			case 'f':
				b = append(b, '\f')
			case 'a':
				b = append(b, '\a')
			case 'b':
				b = append(b, '\b')
			case 'x':
				if j+2 >= len(s) {
					return nil, 0, fmt.Errorf("bad \\x escape")
				}
				v, err := strconv.ParseUint(s[j+1:j+3], 16, 8)
				if err != nil {
					return nil, 0, err
				}
				b = append(b, byte(v))
				j += 2
			default:
				if e >= '0' && e <= '7' {
					k := j
					for k < len(s) && k < j+3 && s[k] >= '0' && s[k] <= '7' {
						k++
					}
					v, _ := strconv.ParseUint(s[j:k], 8, 16)
					b = append(b, byte(v))
					j = k - 1
				} else {
					b = append(b, e)
				}
			}
		default:
			b = append(b, c)
		}
	}
	return nil, 0, fmt.Errorf("unterminated string")
}

// unescapePath decodes a -y decoration's path (strace escapes only
// unprintable bytes and the delimiters there).
func unescapePath(p string) string {
	p = strings.TrimSuffix(p, " (deleted)")
	if !strings.Contains(p, `\`) {
		return p
	}
	b, _, err := unquote(`"`+strings.ReplaceAll(p, `"`, `\"`)+`"`, 0)
	if err != nil {
		return p
	}
	return string(b)
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
