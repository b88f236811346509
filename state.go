package handoff

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/layout"
	"github.com/handoff-sync/handoff/internal/worker"
	"github.com/handoff-sync/handoff/manifest"
)

// state is the workspace's .handoff directory as a run uses it: the ledger,
// which holds what the pulls store (its contents table), and the spool
// directory earlier versions wrote, read through the ledger's Store. The
// walk hints' directory lets a worker process load and save its host's.
type state struct {
	led        *ledger.Ledger
	records    *worker.RecordQueue // the run's one writer of its pulls' records
	spool      spool.Store         // the ledger's contents, then the legacy spool
	ledgerPath string
	spoolDir   string // the legacy spool
	walksDir   string // the hosts' walk hints (read-only in a dry run)
	closers    []func() error
}

// puller is how the run's pulls are made: in workers (opts.Worker) or in
// this process, recording through the run's queue, and telling
// opts.Progress of a worker's progress as a "pulling" update.
func (s *state) puller(opts Options, hosts int, runID string, log *slog.Logger) *worker.Puller {
	return &worker.Puller{Binary: opts.Worker, Dial: opts.Dial, WalksDir: s.walksDir, Records: s.records, RunID: runID,
		DryRun: opts.DryRun, Now: opts.Now, Log: log, Procs: worker.Procs(runtime.GOMAXPROCS(0), min(hosts, opts.Parallel)),
		Progress: func(host string, inboxes, pulled int) {
			opts.Progress(HostProgress{Host: host, State: "pulling", Inboxes: inboxes, Pulled: pulled})
		}}
}

func (s *state) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// openState opens the ledger and its store. A dry run works on a scratch
// copy of the ledger in a temporary directory, so that nothing under the
// workspace changes; the legacy spool is only ever read.
func openState(ws string, dryRun bool) (*state, error) {
	st := &state{ledgerPath: filepath.Join(ws, layout.LedgerFile), spoolDir: filepath.Join(ws, layout.SpoolDir), walksDir: filepath.Join(ws, layout.WalksDir)}
	if dryRun {
		tmp, err := os.MkdirTemp("", "handoff-dry-run-")
		if err != nil {
			return nil, err
		}
		st.closers = append(st.closers, func() error { return os.RemoveAll(tmp) })
		if err := ledger.Copy(st.ledgerPath, filepath.Join(tmp, "ledger.db")); err != nil {
			st.close()
			return nil, fmt.Errorf("dry run: %w", err)
		}
		st.ledgerPath = filepath.Join(tmp, "ledger.db")
	}
	legacy, err := spool.OpenReadOnly(st.spoolDir)
	if err != nil {
		st.close()
		return nil, err
	}
	if legacy != nil {
		// Nothing writes there any more: `handoff prune` removes the
		// temporary files an earlier version's crashed writer left.
		st.closers = append(st.closers, legacy.Close)
	}
	led, err := ledger.Open(st.ledgerPath)
	if err != nil {
		st.close()
		return nil, err
	}
	st.led = led
	st.closers = append(st.closers, led.Close)
	store := led.Store(legacy)
	st.spool = store
	st.closers = append(st.closers, store.Close)
	return st, nil
}

// hostNames are the names of the manifest's hosts.
func hostNames(hosts []manifest.Host) []string {
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return names
}

// lockWhat is what a sync writes into the lock file (setup.Holder).
func lockWhat(hosts []string) string {
	what := "sync"
	for _, h := range hosts {
		what += " --host " + h
	}
	return what
}

func newRunID(t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// limitedBuffer keeps at most max bytes and remembers if more came.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.max {
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}
