// Command handoff pulls memory-handoff files from writer hosts over SSH and
// ingests them into a durable-memory workspace. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/handoff-sync/handoff"
	"github.com/handoff-sync/handoff/manifest"
)

// Exit codes: a contract with cron, systemd and scripts.
const (
	exitOK     = 0
	exitFailed = 1  // a host or the run failed (outcome partial or failed), or lint found problems
	exitUsage  = 2  // bad flags, unknown host, invalid manifest, no workspace (see handoff init)
	exitLocked = 75 // another run holds the workspace lock (EX_TEMPFAIL)
)

// exitError carries an exit code and an optional hint to main.
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// silent exits with a code and prints nothing more (the command already
// reported).
func silent(code int) error { return &exitError{code: code} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == root && !isUsage(err) {
		// The root runs nothing itself: what fails there is the command
		// line (an unknown command).
		err = usageError{err}
	}
	code, hint := exitCode(err)
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "handoff: %s\n", printable(msg))
	}
	if hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", hint)
	}
	return code
}

// exitCode maps an error to the exit-code contract, in one place.
func exitCode(err error) (int, string) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.hint
	}
	var ue *handoff.UsageError
	var fe *manifest.FieldError
	var nw *handoff.NoWorkspaceError
	var we *handoff.WorkspaceError
	switch {
	case errors.Is(err, handoff.ErrLocked):
		return exitLocked, "another handoff run (a sync, prune or `handoff review`) is using the workspace; this one exits and the next timer tick retries"
	case errors.As(err, &nw):
		return exitUsage, nw.Hint()
	case errors.As(err, &we):
		return exitUsage, we.Hint()
	case errors.As(err, &ue):
		return exitUsage, ""
	case errors.As(err, &fe):
		return exitUsage, "fix the manifest and check it with `handoff manifest check`"
	case isUsage(err):
		return exitUsage, "see `handoff --help`"
	}
	return exitFailed, ""
}

// printable escapes what a terminal would act on in text that may carry
// host-supplied names: control and format characters (but newline and tab)
// and invalid UTF-8 come out as Go escapes.
func printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
