package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/handoff-sync/handoff/internal/gctune"
	"github.com/handoff-sync/handoff/internal/worker"
)

// profileEnv names a directory: when set, sync writes a CPU profile of its
// run there as sync-<pid>.cpu and each worker one of its pull as
// worker-<pid>.cpu (for bench/; see docs/BENCHMARKS.md).
const profileEnv = "HANDOFF_WORKER_CPUPROFILE"

// startProfile starts a CPU profile named for kind when profileEnv is set;
// the function it returns stops it.
func startProfile(kind string) (stop func(), err error) {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.cpu", kind, os.Getpid())))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// newWorkerCmd is the hidden command the parent starts once per host: it
// pulls one host and prints its report as JSON; logs go to stderr as JSON
// lines for the parent to relay.
func newWorkerCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    worker.Command,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			gctune.Start()
			stop, err := startProfile("worker")
			if err != nil {
				return err
			}
			defer stop()
			records, err := worker.RecordsConn()
			if err != nil {
				return err
			}
			return worker.Serve(cmd.Context(), g.stdin, g.stdout, records, log)
		},
	}
}
