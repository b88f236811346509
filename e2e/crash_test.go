package e2e

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/internal/failpoint"
)

// TestCrashAtEveryFailpoint kills handoff with SIGKILL at each named step
// of store, acknowledge, plan, backup, commit and bookkeeping, then reruns
// it. Invariants: no handoff lost, none applied twice, every source
// archived, no temporary file left, ledger intact.
func TestCrashAtEveryFailpoint(t *testing.T) {
	for _, fp := range failpoint.Names {
		t.Run(fp, func(t *testing.T) {
			w := newWorld(t)
			markers := w.mixed()
			code, out := w.sync(failpoint.Env + "=" + fp)
			if !crashed(code, out) {
				t.Fatalf("failpoint %s was never reached (exit %d):\n%s", fp, code, out)
			}
			if code, out := w.sync(); code != 0 {
				t.Fatalf("rerun after crash exited %d:\n%s", code, out)
			}
			w.checkConverged(markers, mixedResults)
		})
	}
}

// TestCrashRandomSchedules crashes at random points, several times in a
// row, before a clean run. `make torture` runs many more schedules.
func TestCrashRandomSchedules(t *testing.T) {
	schedules := 20
	if os.Getenv("HANDOFF_TORTURE") != "" {
		schedules = 500
	}
	seed := uint64(os.Getpid())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	parents, workers := 0, 0
	defer func() {
		t.Logf("%d schedules, %d crashes survived (%d of the whole run, %d of a pull worker)", schedules, parents+workers, parents, workers)
	}()
	for i := 0; i < schedules; i++ {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			w := newWorld(t)
			markers := w.mixed()
			crashes := 1 + rng.IntN(3)
			for c := 0; c < crashes; c++ {
				fp := failpoint.Names[rng.IntN(len(failpoint.Names))]
				spec := fp + "@" + strconv.Itoa(1+rng.IntN(4))
				code, out := w.sync(failpoint.Env + "=" + spec)
				switch {
				case code == -9:
					parents++
				case crashed(code, out):
					workers++
				case code != 0:
					t.Fatalf("run with %s exited %d:\n%s", spec, code, out)
				}
			}
			if code, out := w.sync(); code != 0 {
				t.Fatalf("clean run exited %d:\n%s", code, out)
			}
			w.checkConverged(markers, mixedResults)
		})
	}
}

// crashed reports whether a run was killed at its failpoint: either the
// parent itself (SIGKILL), or a pull worker, which the parent reports as a
// failed host (exit 1) while it ingests what was stored.
func crashed(code int, out string) bool {
	return code == -9 || code == 1 && strings.Contains(out, "worker crashed: signal: killed")
}
