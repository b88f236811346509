package ingest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-sync/handoff/claim/spool"
	"github.com/handoff-sync/handoff/ingest/ledger"
	"github.com/handoff-sync/handoff/internal/failpoint"
	"github.com/handoff-sync/handoff/internal/layout"
)

// The crash tests run the ingester in a child process (this test binary,
// re-executed) that a failpoint kills with SIGKILL, then finish the job in
// the test's own process, as the next run would.
const (
	childWSEnv    = "HANDOFF_INGEST_CHILD_WS"
	childBatchEnv = "HANDOFF_INGEST_CHILD_BATCH"
	// childReaderEnv names OpenClaw's config for the child; without it
	// the child sees the older layout (olderReader).
	childReaderEnv = "HANDOFF_INGEST_CHILD_OPENCLAW_CONFIG"
)

func TestMain(m *testing.M) {
	if ws := os.Getenv(childWSEnv); ws != "" {
		os.Exit(crashChild(ws))
	}
	os.Exit(m.Run())
}

// crashChild ingests the workspace ws and returns an exit code, unless a
// failpoint kills it first.
func crashChild(ws string) int {
	batch, _ := strconv.Atoi(os.Getenv(childBatchEnv))
	sp, err := spool.Open(filepath.Join(ws, layout.SpoolDir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	led, err := ledger.Open(filepath.Join(ws, layout.LedgerFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	oc := olderReader
	if cfg := os.Getenv(childReaderEnv); cfg != "" {
		oc = OpenClawOptions{Config: cfg, CardIndex: true}
	}
	in, err := New(Options{OpenClaw: oc, Workspace: ws, RunID: "child"}, led, sp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in.batchMax = batch
	if _, err := in.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runChild ingests r's workspace in a child process with the failpoint
// spec armed and reports whether the failpoint killed it.
func (r *rig) runChild(spec string, batch int) (killed bool) {
	r.t.Helper()
	r.led.Close()
	r.spool.Close()
	defer r.reopen()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childWSEnv+"="+r.ws, childBatchEnv+"="+strconv.Itoa(batch), failpoint.Env+"="+spec)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return false
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == -1 {
		return true
	}
	r.t.Fatalf("child with %s: %v\n%s", spec, err, out)
	return false
}

// ingestPoints are the failpoints the ingester passes, in order.
var ingestPoints = []string{"plan.recorded", "backup.written", "review.written", "batch.files-synced",
	"commit.written", "batch.targets-synced", "bookkeeping.done"}

// checkConverged asserts, after the run that follows a crash, what no
// crash may change: every source has its one expected result (none lost),
// every document holds each handoff's text exactly once and in order (none
// applied twice), cards end as the handoffs in order leave them, every
// applied plan's backup holds the content it replaced, nothing is left
// behind, nothing is written outside the workspace.
func (r *rig) checkConverged(want map[string]string, markers map[string][]string) {
	r.t.Helper()
	if got := r.results(); !maps.Equal(got, want) {
		for n, w := range want {
			if got[n] != w {
				r.t.Errorf("%s ended %q, want %q", n, got[n], w)
			}
		}
	}
	r.checkMarkers(markers)
	r.checkClean()
	if got, want := r.readWS("memory/cards/alpha.md"), cardContent("alpha", "A2")+"\n"; got != want {
		r.t.Errorf("alpha.md = %q, want %q", got, want)
	}
	if got := r.readWS("memory/cards/existing.md"); got != existingCard {
		r.t.Errorf("existing.md = %q, want %q", got, existingCard)
	}
	var handoffs int
	r.led.DB().QueryRow(`SELECT count(*) FROM handoffs`).Scan(&handoffs)
	if handoffs != 18 { // 20 sources, 2 duplicates
		r.t.Errorf("%d handoff results, want 18 (one per distinct content)", handoffs)
	}
	r.checkBackups()
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.ws), "outside.md")); err == nil {
		r.t.Error("a file was written outside the workspace")
	}
}

// TestCrashAtEveryBatchFailpoint kills the ingester at every failpoint it
// passes, at every hit of it (commit.written once per target replaced:
// between the writes of a chain of appends to one document, and of a card
// created then updated in the same batch), with everything in one batch
// and with batches of three (chains across batches, the next batch decided
// while one is applied), then runs it again.
//
// Invariants: no handoff lost (each source ends with its expected result),
// none applied twice (each text once in its document; a crash between two
// writes of one chain must not make recovery append the first again),
// backups durable, nothing left behind.
func TestCrashAtEveryBatchFailpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("many child processes")
	}
	crashes := 0
	for _, batch := range []int{256, 3} {
		for _, fp := range ingestPoints {
			for n := 1; ; n++ {
				spec := fmt.Sprintf("%s@%d", fp, n)
				reached := false
				t.Run(fmt.Sprintf("batch%d/%s", batch, spec), func(t *testing.T) {
					r := newRig(t)
					want, markers := chainFixture(r)
					if reached = r.runChild(spec, batch); !reached {
						if n == 1 {
							t.Fatalf("failpoint %s never reached", fp)
						}
						return
					}
					crashes++
					if _, err := r.run(batch, false); err != nil {
						t.Fatalf("run after the crash: %v", err)
					}
					r.checkConverged(want, markers)
				})
				if !reached {
					break
				}
			}
		}
	}
	t.Logf("%d crashes survived", crashes)
}

// TestCrashMidChainRecovers is the case batching makes possible and the
// one recovery must get right: several plans of one batch on one document,
// the process killed after the document was replaced. A batch replaces it
// once, with what the whole chain leaves, so every plan but the last finds
// neither its before-hash nor its after-hash there; each must be
// recognised as done (its write was replaced by the next plan of its
// chain), not re-planned. The same holds for a document left halfway
// through a chain (as a version that replaced it once per plan could leave
// it), and for chains cut by batches of two. Invariant: none applied twice,
// none lost.
func TestCrashMidChainRecovers(t *testing.T) {
	marks := func(n int) string {
		s := "# Tools\n"
		for i := range n {
			s += fmt.Sprintf("\n- marker-%d\n", i)
		}
		return s
	}
	for _, tc := range []struct {
		name        string
		spec        string
		batch       int
		written     int // appends the document holds after the crash
		halfway     int // if set, the document is put back to this many appends
		interrupted int
	}{
		{"one-batch", "commit.written@1", 256, 5, 0, 5},
		{"halfway", "commit.written@1", 256, 5, 2, 5},
		{"batches-of-two", "commit.written@2", 2, 4, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.writeWS("TOOLS.md", "# Tools\n")
			var named [][2]string
			for i := range 5 {
				named = append(named, [2]string{fmt.Sprintf("t%d.md", i), docH("TOOLS.md", fmt.Sprintf("- marker-%d", i))})
			}
			r.store(named...)
			if !r.runChild(tc.spec, tc.batch) {
				t.Fatalf("failpoint %s never reached", tc.spec)
			}
			if got := r.readWS("TOOLS.md"); got != marks(tc.written) {
				t.Fatalf("after the crash TOOLS.md = %q, want %d appends", got, tc.written)
			}
			if tc.halfway > 0 {
				r.writeWS("TOOLS.md", marks(tc.halfway))
			}
			if n, _ := r.led.InterruptedPlans(context.Background()); n != tc.interrupted {
				t.Fatalf("%d interrupted plans, want %d", n, tc.interrupted)
			}
			if _, err := r.run(tc.batch, false); err != nil {
				t.Fatal(err)
			}
			if got := r.readWS("TOOLS.md"); got != marks(5) {
				t.Errorf("TOOLS.md = %q, want %q", got, marks(5))
			}
			results := r.results()
			if len(results) != 5 {
				t.Errorf("%d sources in the ledger, want 5", len(results))
			}
			for name, res := range results {
				if res != ResultRouted {
					t.Errorf("%s: %s, want routed", name, res)
				}
			}
			r.checkClean()
		})
	}
}

// TestCrashRandomSchedules kills the ingester one to three times in a row
// at random failpoints and hits, with random batch sizes, before a clean
// run. Invariants: as TestCrashAtEveryBatchFailpoint.
func TestCrashRandomSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("many child processes")
	}
	schedules := 20
	if os.Getenv("HANDOFF_TORTURE") != "" {
		schedules = 300
	}
	seed := uint64(os.Getpid())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	crashes := 0
	for i := range schedules {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			r := newRig(t)
			want, markers := chainFixture(r)
			for range 1 + rng.IntN(3) {
				spec := fmt.Sprintf("%s@%d", ingestPoints[rng.IntN(len(ingestPoints))], 1+rng.IntN(6))
				if r.runChild(spec, 1+rng.IntN(8)) {
					crashes++
				}
			}
			if _, err := r.run(1+rng.IntN(8), false); err != nil {
				t.Fatalf("clean run: %v", err)
			}
			r.checkConverged(want, markers)
		})
	}
	t.Logf("%d schedules, %d crashes survived", schedules, crashes)
}

// TestCrashThenEditorAppends: the process is killed after some appends of
// a batch replaced the document, and before the next run another writer
// appends a line to it. The unfinished plans find neither their before-
// nor their after-hash; those whose write the document begins with are
// done, the others are re-planned on the new content. Invariants: none
// applied twice, none lost, the other writer's line kept.
func TestCrashThenEditorAppends(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		batch int
	}{{"commit.written@1", 256}, {"commit.written@2", 2}, {"batch.targets-synced@1", 256}, {"batch.targets-synced@2", 2}} {
		spec := tc.spec
		t.Run(fmt.Sprintf("%s/batch%d", spec, tc.batch), func(t *testing.T) {
			r := newRig(t)
			r.writeWS("TOOLS.md", "# Tools\n")
			var named [][2]string
			var marks []string
			for i := range 5 {
				m := fmt.Sprintf("- marker-%d", i)
				marks = append(marks, m)
				named = append(named, [2]string{fmt.Sprintf("t%d.md", i), docH("TOOLS.md", m)})
			}
			r.store(named...)
			if !r.runChild(spec, tc.batch) {
				t.Fatalf("failpoint %s never reached", spec)
			}
			f, err := os.OpenFile(filepath.Join(r.ws, "TOOLS.md"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("- editor-line\n")
			f.Close()
			entries, err := r.run(tc.batch, false)
			if err != nil {
				t.Fatal(err)
			}
			final := r.readWS("TOOLS.md")
			if strings.Count(final, "- editor-line\n") != 1 {
				t.Errorf("the other writer's line is lost:\n%s", final)
			}
			for _, m := range marks {
				if c := strings.Count(final, m); c != 1 {
					t.Errorf("%s appears %d times, want once:\n%s", m, c, final)
				}
			}
			for _, e := range entries {
				if e.Result != ResultRouted {
					t.Errorf("%s: %s/%s, want routed", e.Name, e.Result, e.Reason)
				}
			}
			r.checkClean()
		})
	}
}
