package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
)

// newWorkerCmd is the hidden command the parent starts once per host: it
// pulls one host and prints its report as JSON; logs go to stderr as JSON
// lines for the parent to relay.
func newWorkerCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    handoff.WorkerCommand,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			return handoff.ServeWorker(cmd.Context(), g.stdin, g.stdout, log)
		},
	}
}
