package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// usageError marks a command-line mistake found by cobra or by us.
type usageError struct{ error }

func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// cobra's own parse errors are plain errors with these shapes.
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires at most"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

type globals struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	verbose        bool
	logFormat      string
}

func (g *globals) logger() *slog.Logger {
	if !g.verbose {
		return nil
	}
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(g.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(g.stderr, opts))
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "handoff",
		Short:         "Pull memory handoffs from writer hosts and ingest them safely",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log each step to stderr")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format with --verbose: text or json")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	for _, mk := range commands {
		root.AddCommand(mk(g))
	}
	requireSubcommand(root)
	return root
}

// requireSubcommand makes every command that only groups others (hosts,
// manifest, …) fail with a usage error, exit 2, when called without a known
// subcommand, instead of printing help and exiting 0.
func requireSubcommand(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommand(sub)
	}
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil && c.HasParent() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())}
			}
			return usageError{fmt.Errorf("%q needs a subcommand", c.CommandPath())}
		}
	}
}

// commands builds every subcommand. A command in a file of its own adds
// itself here from that file's init, so that files do not edit one list.
var commands = []func(*globals) *cobra.Command{
	newSyncCmd, newLintCmd, newManifestCmd, newHostsCmd, newWorkerCmd, newDemoCmd,
}
