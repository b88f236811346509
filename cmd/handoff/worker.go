package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff"
)

// profileEnv names a directory: when set, each worker writes a CPU profile
// of its pull there as worker-<pid>.cpu (for bench/; see docs/BENCHMARKS.md).
const profileEnv = "HANDOFF_WORKER_CPUPROFILE"

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
			if dir := os.Getenv(profileEnv); dir != "" {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.cpu", os.Getpid())))
				if err != nil {
					return fmt.Errorf("%s: %w", profileEnv, err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("%s: %w", profileEnv, err)
				}
				defer pprof.StopCPUProfile()
			}
			records, err := handoff.WorkerRecords()
			if err != nil {
				return err
			}
			return handoff.ServeWorker(cmd.Context(), g.stdin, g.stdout, records, log)
		},
	}
}
