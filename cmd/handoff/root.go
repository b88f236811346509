package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
)

// usageError marks a command-line mistake found by cobra or by us. Every
// way cobra reports one is wrapped into it (flag errors, argument counts,
// unknown commands: see typedArgs and run), so nothing depends on
// the text of cobra's messages.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
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
	typedArgs(root)
	expandPathFlags(root)
	versionFlag(root)
	return root
}

// typedArgs wraps every command's argument check so that what it refuses
// is a usageError.
func typedArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		typedArgs(sub)
	}
	if check := c.Args; check != nil {
		c.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
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
